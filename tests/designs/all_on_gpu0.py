"""cuzk's multi-GPU fault, written as a design: per-GPU locks that protect nothing.

cuzk's GPU workers were started per device, each taking the lock of its own device, but
the proving calls never selected that device, so every partition ran on GPU 0.  Workers
of different devices then held different locks while running on the same card: the
other cards stayed idle, and GPU 0 held the buffers of as many partitions at once as
there were devices.  Predict it with

    simgpu predict --design tests/designs/all_on_gpu0.py:all_on_gpu0 --devices 2

and compare `--design single-lock`, the same protocol on the worker's own device.
"""

from __future__ import annotations

#: The device every stage runs on, whichever device the worker was started for.
CURRENT_DEVICE = 0


def all_on_gpu0(rt, worker, part):
    """single-lock's protocol with the worker's device's lock, but every stage on GPU 0
    (the device nobody selected away from)."""
    gpu = rt.lock("gpu", worker.device)
    yield gpu.acquire()
    try:
        buffers = yield rt.stage("prestage", part, CURRENT_DEVICE)
        try:
            yield rt.stage("kernels", part, CURRENT_DEVICE, buffers=buffers)
        finally:
            rt.free(buffers)
    finally:
        gpu.release()
    yield rt.stage("b_g2_msm", part, CURRENT_DEVICE)
    part.complete((yield rt.stage("epilogue", part, CURRENT_DEVICE)))
