"""The lock/VRAM designs that ship with simgpu.

A design is the protocol one GPU worker follows for one partition that the daemon took
off the GPU queue: which locks it takes, when it allocates and frees device memory,
what overlaps with what.  It is a generator ``design(rt, worker, part)`` that returns
when the worker may take its next partition, and that sees to it that the partition
ends: ``part.complete(proof)`` (``finalize`` does that) or an exception, which the
daemon turns into a failed partition.  Every design releases what it holds on the way
out (``try/finally``), so an OOM in one partition never strands a lock or a buffer.

Write your own the same way and load it with ``--design path/to/file.py:name``.
"""

from __future__ import annotations

from simgpu.errors import SimgpuError
from simgpu.sched.runtime import Proc, Runtime, Task
from simgpu.sched.work import Partition, Worker

#: cuzk skips its pre-stage unless this much VRAM is free beyond the buffers themselves.
PRESTAGE_MARGIN = 512 << 20


def finish(rt: Runtime, worker: Worker, part: Partition) -> Proc:
    """The epilogue (A, B, C with randomness r, s); the partition is done."""
    proof = yield rt.stage("epilogue", part, worker.device)
    part.complete(proof)


def finalize(rt: Runtime, worker: Worker, part: Partition, b_g2: Task | None = None) -> Proc:
    """b_g2_msm (or join it, if already running as task `b_g2`), then `finish`."""
    if b_g2 is None:
        yield rt.stage("b_g2_msm", part, worker.device)
    else:
        yield b_g2
    yield from finish(rt, worker, part)


def finalizer(rt: Runtime, worker: Worker, part: Partition, b_g2: Task | None = None) -> Proc:
    """`finalize` as a task of its own: its failure fails the partition, not a worker."""
    try:
        yield from finalize(rt, worker, part, b_g2)
    except SimgpuError as e:
        part.fail(e)


def gpu_part(rt: Runtime, worker: Worker, part: Partition) -> Proc:
    """Pre-stage, kernels, and the pre-staged buffers freed: one partition's GPU work,
    for a caller that already holds whatever locks its design wants around it."""
    buffers = yield rt.stage("prestage", part, worker.device)
    try:
        yield rt.stage("kernels", part, worker.device, buffers=buffers)
    finally:
        rt.free(buffers)


def serial(rt: Runtime, worker: Worker, part: Partition) -> Proc:
    """One lock around everything, CPU tail included: nothing overlaps on a device.
    The baseline every other design must beat."""
    gpu = rt.lock("gpu", worker.device)
    yield gpu.acquire()
    try:
        yield from gpu_part(rt, worker, part)
        yield from finalize(rt, worker, part)
    finally:
        gpu.release()


def single_lock(rt: Runtime, worker: Worker, part: Partition) -> Proc:
    """cuzk Phase 9: one mutex around prestage + kernels, buffers freed before it is
    released; b_g2_msm and the epilogue run outside it, overlapping the next worker's
    GPU phase."""
    gpu = rt.lock("gpu", worker.device)
    yield gpu.acquire()
    try:
        yield from gpu_part(rt, worker, part)
    finally:
        gpu.release()
    yield from finalize(rt, worker, part)


def two_lock(rt: Runtime, worker: Worker, part: Partition) -> Proc:
    """cuzk Phase 10: a `mem` lock for the pre-stage and a `compute` lock for the kernels,
    so one worker can pre-stage while another computes.

    As in cuzk, the pre-stage is skipped when free VRAM is short (the kernels then
    allocate and upload for themselves), and the pre-staged buffers are freed only after
    the kernel threads are joined, once b_g2_msm is done: outside both locks.  Nothing
    reserves VRAM between the two locks, which is the flaw the seed's 16 GiB card hit.
    """
    mem = rt.lock("mem", worker.device)
    compute = rt.lock("compute", worker.device)
    buffers = None
    yield mem.acquire()
    try:
        need = rt.vram_estimate(part, "prestage")
        if rt.vram_free(worker.device) >= need + PRESTAGE_MARGIN:
            buffers = yield rt.stage("prestage", part, worker.device)
    finally:
        mem.release()
    try:
        yield compute.acquire()
        try:
            yield rt.stage("kernels", part, worker.device, buffers=buffers)
        finally:
            compute.release()
        yield rt.stage("b_g2_msm", part, worker.device)
    finally:
        rt.free(buffers)
    yield from finish(rt, worker, part)


def two_lock_reserve(rt: Runtime, worker: Worker, part: Partition) -> Proc:
    """Two locks made safe by a VRAM reservation handshake.

    Under the `mem` lock a worker reserves, from a per-device byte budget, the peak its
    partition needs from pre-stage through kernels, and only then pre-stages; the
    reservation is returned when its buffers are freed.  Whoever holds a reservation can
    always finish, so no allocation fails; on a card too small for two partitions the
    reservation serialises the workers, on a large one pre-staging overlaps compute.
    """
    mem = rt.lock("mem", worker.device)
    compute = rt.lock("compute", worker.device)
    budget = rt.semaphore("vram", rt.vram_capacity(worker.device), worker.device)
    need = min(rt.vram_estimate(part, "prestage", "kernels"), budget.capacity)
    yield mem.acquire()
    try:
        yield budget.acquire(need)
        try:
            buffers = yield rt.stage("prestage", part, worker.device)
        except BaseException:
            budget.release(need)
            raise
    finally:
        mem.release()
    try:
        yield compute.acquire()
        try:
            yield rt.stage("kernels", part, worker.device, buffers=buffers)
        finally:
            compute.release()
    finally:
        rt.free(buffers)
        budget.release(need)
    yield from finalize(rt, worker, part)


def split_finalizer(rt: Runtime, worker: Worker, part: Partition) -> Proc:
    """Single lock, and b_g2_msm + epilogue handed to a finalizer task so the worker
    takes its next partition at once."""
    gpu = rt.lock("gpu", worker.device)
    yield gpu.acquire()
    try:
        yield from gpu_part(rt, worker, part)
    finally:
        gpu.release()
    rt.spawn(
        finalizer(rt, worker, part),
        f"{worker.name}.fin",
        proof=part.proof.id,
        partition=part.index,
        device=worker.device,
    )
