"""What page-locking the uploaded host buffers costs the device: the profile's [pins].

A prover that page-locks a, b, c where they land (`--abc-upload pinned`, cuzk's
cudaHostRegister) and unlocks them once their copies have left pays twice per partition,
like a loading dock that closes the road while a lorry backs in and again while it pulls
out: the lock holds the driver, so the other threads' launches wait; the unlock first
waits for the device's queued work and then holds the device itself (the thirty-seventh
lease's probe, experiments/pin_barrier.py: a 384 MiB unlock stalled a stage on another
thread or stream by all of its 6.4 ms).  The dock takes one lorry at a time: locks asked
for together are done one after another (model.interpreter.pin_pause).

`measure_pins` times, for regions of the given sizes in shared memory (as a received
result's mapping), the lock and the unlock alone, and the stall each causes to two
threads launching a stage of short spin kernels (bench.cu's bench_spin: a known length,
no memory traffic), each waited for before the next: a launcher with next to nothing
queued loses every moment the driver takes no launch.  The pipeline's GPU stages keep
little more queued (a median 1-4 ms at 2^22 on the forty-third lease's traces, against
13-14 ms a 384 MiB lock): a probe with 8 ms queued hid most of each lock and read a
share of 0.16-0.3, where the device stood idle through 90% of every lock in the
pipeline.  It also times BURST locks asked for at once, as a proof's results land, to
check that they are done one at a time.  `fit_pins` reads them into the [pins] keys:
seconds a GiB (over all sizes, by bytes) and the stall as a share of the call's time.
"""

from __future__ import annotations

import functools
import mmap
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

#: A spin kernel's length, and the stage's kernels between its syncs: a quarter of a
#: millisecond queued at most, so the stall is the time the driver takes no launch.
SPIN_MS = 0.25
SYNC_EVERY = 1
#: Kernels in a stage: long enough (90 ms of spin) to hold the call, a third of the way
#: in, whole.
STAGE_KERNELS = 360
#: The threads launching beside the call: a pipeline's two GPU workers.
LAUNCHERS = 2
#: Locks asked for at once: a proof's four results landing together.
BURST = 4


def shm_region(nbytes: int, rng: np.random.Generator | None) -> tuple[np.ndarray, mmap.mmap]:
    """`nbytes` of fresh random bytes (zeros without `rng`) in a populated shared-memory
    mapping, as a received result's a, b, c lie (simgpu.prover.handoff.receive): (its
    bytes, the mapping)."""
    fd, path = tempfile.mkstemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        os.ftruncate(fd, nbytes)
        mm = mmap.mmap(fd, nbytes, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0))
    finally:
        os.close(fd)
        os.unlink(path)
    buf = np.frombuffer(mm, dtype=np.uint8)
    if rng is not None:
        buf[:] = rng.integers(0, 256, nbytes, dtype=np.uint8)
    return buf, mm


def time_lock(nbytes: int) -> float:
    """Seconds to page-lock a fresh populated region of `nbytes` (a landing result's a, b,
    c), unlocked and unmapped after: what measure.measure_pressure times beside its load
    of syntheses, as the pipeline's locks run (pinning pages is host work: the
    forty-third lease's locks with no other beside them took 13-56 ms where this probe
    alone times 12-18)."""
    from simgpu.gpu import transfer

    buf, mm = shm_region(nbytes, None)
    try:
        t = time.perf_counter()
        pin = transfer.pin_pages(buf)
        took = time.perf_counter() - t
        if pin is None:
            raise RuntimeError("CUDA refused to page-lock a region")
        pin.close()
        del pin
    finally:
        del buf
        mm.close()
    return took


class SpinKernel:
    """bench_spin scaled to `ms` a launch, and a stage of it (a sync every `sync_every`)."""

    def __init__(self, ms: float = SPIN_MS, sync_every: int = SYNC_EVERY) -> None:
        from simgpu.gpu.cuda import get_cupy, load_module

        self.cp = get_cupy()
        self.ms, self.sync_every = ms, sync_every
        self.k = load_module("bench.cu").get_function("bench_spin")
        self.cycles = 1_000_000
        for _ in range(3):
            t = self._once(self.cycles)
            self.cycles = max(1000, int(self.cycles * ms / max(t, 1e-3)))

    def _once(self, cycles: int) -> float:
        self.k((1,), (1,), (np.int64(cycles),))
        self.cp.cuda.Device().synchronize()
        t = time.perf_counter()
        self.k((1,), (1,), (np.int64(cycles),))
        self.cp.cuda.Device().synchronize()
        return (time.perf_counter() - t) * 1e3

    def launch(self, stream: Any = None) -> None:
        """One kernel, on `stream` or the thread's current one."""
        if stream is None:
            self.k((1,), (1,), (np.int64(self.cycles),))
        else:
            self.k((1,), (1,), (np.int64(self.cycles),), stream=stream)

    def stage(
        self, kernels: int = STAGE_KERNELS, stream: Any = None, started: threading.Event | None = None
    ) -> float:
        """Seconds for `kernels` launches with a sync every `sync_every` (a stage's pattern);
        `started` is set once the first is queued."""
        on = stream if stream is not None else self.cp.cuda.get_current_stream()
        t = time.perf_counter()
        for i in range(kernels):
            self.launch(stream)
            if i == 0 and started is not None:
                started.set()
            if (i + 1) % self.sync_every == 0:
                on.synchronize()
        on.synchronize()
        return time.perf_counter() - t


def _beside(spin: SpinKernel, call: Callable[[], None], kernels: int = STAGE_KERNELS) -> tuple[float, float]:
    """(the launchers' stage, the call's time), `call` made a third of the way in."""
    times: list[float] = []
    started = threading.Event()

    def launch() -> None:
        times.append(spin.stage(kernels, started=started))

    threads = [threading.Thread(target=launch) for _ in range(LAUNCHERS)]
    for th in threads:
        th.start()
    if not started.wait(60):
        raise RuntimeError("the spin kernels did not start")
    time.sleep(kernels * spin.ms / 3e3)
    t = time.perf_counter()
    call()
    took = time.perf_counter() - t
    for th in threads:
        th.join()
    return max(times), took


def _alone(spin: SpinKernel, kernels: int = STAGE_KERNELS) -> float:
    times: list[float] = []
    threads = [threading.Thread(target=lambda: times.append(spin.stage(kernels))) for _ in range(LAUNCHERS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return max(times)


def _lock_into(pins: list[Any], buf: np.ndarray) -> None:
    from simgpu.gpu import transfer

    pins.append(transfer.pin_pages(buf))


def _lock_row(bufs: list[np.ndarray], into: list[Any]) -> list[float]:
    """Page-lock every region at once, a thread each (as a proof's results land): each
    call's seconds; the pins go into `into`."""
    from simgpu.gpu import transfer

    took = [0.0] * len(bufs)
    pins: list[Any] = [None] * len(bufs)
    errors: list[BaseException] = []
    go = threading.Barrier(len(bufs))

    def one(i: int) -> None:
        try:
            go.wait()
            t = time.perf_counter()
            pins[i] = transfer.pin_pages(bufs[i])
            took[i] = time.perf_counter() - t
        except BaseException as e:  # noqa: BLE001 - handed to the measuring thread
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(bufs))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    into.extend(p for p in pins if p is not None)
    if errors:
        raise errors[0]
    if any(p is None for p in pins):
        raise RuntimeError("CUDA refused to page-lock a region: no [pins] to measure")
    return took


def measure_bursts(
    spin: SpinKernel, nbytes: int, repeats: int, rng: np.random.Generator
) -> list[list[float]]:
    """`repeats` rows of [bytes, BURST, the row's seconds (the last call's return), the
    launchers' stall beside the row s, each call's s...]: BURST regions locked at once,
    alone and then beside the launchers (on a stage three times the usual length, which
    holds the whole row)."""
    kernels = 3 * STAGE_KERNELS
    rows: list[list[float]] = []
    for _ in range(repeats):
        alone = statistics.median(_alone(spin, kernels) for _ in range(3))
        regions = [shm_region(nbytes, rng) for _ in range(BURST)]
        bufs, maps = [b for b, _ in regions], [m for _, m in regions]
        del regions  # a mapping closes only once no array views it
        pins: list[Any] = []
        try:
            took = _lock_row(bufs, pins)
        finally:
            for pin in pins:
                pin.close()
        pins = []
        try:
            stage, _ = _beside(spin, functools.partial(_lock_row, bufs, pins), kernels)
        finally:
            for pin in pins:
                pin.close()
        del bufs, pins
        for mm in maps:
            mm.close()
        rows.append([nbytes, BURST, max(took), max(0.0, stage - alone), *took])
    return rows


def burst_summary(bursts: list[list[float]], lock_s: float) -> tuple[float, float]:
    """(how many locks' time a row of k took, over k: 1 where the driver does them one
    at a time, 1/k side by side; the launchers' stall as a share of the row), medians
    over measure_bursts' rows, `lock_s` one lock's time alone."""
    in_a_row = statistics.median(r[2] / (r[1] * lock_s) for r in bursts) if lock_s > 0 else 0.0
    stall = statistics.median(r[3] / r[2] for r in bursts if r[2] > 0)
    return in_a_row, min(1.0, stall)


def measure_pins(sizes: list[int], repeats: int, log: Callable[[str], None]) -> dict[str, list[list[float]]]:
    """For each region size (bytes) in `sizes`, `repeats` times: [bytes, lock s, unlock s,
    the launchers' stall beside a lock s, beside an unlock s] under "rows" (the stall is
    the stage beside less the median stage alone, read in the same repeat), and BURST
    locks at once of the largest under "bursts" (measure_bursts).  Each locked region's
    copy to the device is checked against the host."""
    from simgpu.gpu import transfer

    cp = transfer.cuda.get_cupy()
    spin = SpinKernel()
    rng = np.random.default_rng()
    rows: list[list[float]] = []
    for nbytes in sizes:
        for rep in range(repeats + 1):  # the first warms the driver's page tables
            alone = statistics.median(_alone(spin) for _ in range(3))
            buf, mm = shm_region(nbytes, rng)
            t = time.perf_counter()
            pin = transfer.pin_pages(buf)
            lock = time.perf_counter() - t
            if pin is None:
                raise RuntimeError("CUDA refused to page-lock a region: no [pins] to measure")
            dev = cp.empty(nbytes, dtype=cp.uint8)
            transfer.to_device(dev, buf)
            if not np.array_equal(cp.asnumpy(dev), buf):
                raise RuntimeError("a page-locked region's copy differs from the host's")
            del dev
            t = time.perf_counter()
            pin.close()
            unlock = time.perf_counter() - t
            pins: list[Any] = []
            stage_lock, _ = _beside(spin, functools.partial(_lock_into, pins, buf))
            stage_unlock, _ = _beside(spin, pins[0].close)
            del buf, pins, pin
            mm.close()
            if rep:
                stalls = [max(0.0, stage_lock - alone), max(0.0, stage_unlock - alone)]
                rows.append([nbytes, lock, unlock, *stalls])
        mine = [r for r in rows if r[0] == nbytes]
        med = [statistics.median(r[i] for r in mine) * 1e3 for i in range(1, 5)]
        log(
            f"  pins of {nbytes / 2**20:.0f} MiB: lock {med[0]:.1f} ms, unlock {med[1]:.1f} ms; {LAUNCHERS} "
            f"launching threads stall {med[2]:.1f} ms beside a lock, {med[3]:.1f} beside an unlock"
        )
    # the largest size again, BURST at once: done one at a time, and the device held through?
    # A check, not a key: its failure must not cost the keys (the forty-fourth lease lost
    # its [pins] to a bug here), so it is said and left out
    top = max(sizes)
    try:
        bursts = measure_bursts(spin, top, repeats, rng)
    except Exception as e:  # noqa: BLE001 - said, and the rows kept
        log(f"  {BURST} locks at once not measured: {type(e).__name__}: {e}")
        return {"rows": rows}
    lock_top = statistics.median(r[1] for r in rows if r[0] == top)
    in_a_row, stall = burst_summary(bursts, lock_top)
    log(
        f"  {BURST} locks of {top / 2**20:.0f} MiB at once: the row took {in_a_row:.2f} x {BURST} "
        f"locks' time (1: one at a time); the launchers stalled {stall:.2f} of it"
    )
    return {"rows": rows, "bursts": bursts}


def fit_pins(rows: list[list[float]]) -> dict[str, float]:
    """The [pins] keys from measure_pins' rows: seconds a GiB through the origin (total
    time over total bytes), and each stall as a share of its call's time (0-1)."""
    if not rows:
        raise ValueError("fit_pins: no rows")
    gib = sum(r[0] for r in rows) / 2**30
    lock, unlock = sum(r[1] for r in rows), sum(r[2] for r in rows)
    stall_lock, stall_unlock = sum(r[3] for r in rows), sum(r[4] for r in rows)
    return {
        "lock_s_per_gib": round(lock / gib, 6),
        "unlock_s_per_gib": round(unlock / gib, 6),
        "lock_stall": round(min(1.0, stall_lock / lock), 3) if lock > 0 else 0.0,
        "unlock_stall": round(min(1.0, stall_unlock / unlock), 3) if unlock > 0 else 0.0,
    }
