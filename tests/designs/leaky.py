"""A design that keeps its device buffers: memory no partition in flight will give back."""

from simgpu.sched.designs import finalize


def keeps_its_buffers(rt, worker, part):
    """Pre-stage and kernels, and the pre-staged buffers never freed (a leak)."""
    buffers = yield rt.stage("prestage", part, worker.device)
    yield rt.stage("kernels", part, worker.device, buffers=buffers)
    yield from finalize(rt, worker, part)
