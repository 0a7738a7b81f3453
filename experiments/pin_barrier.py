"""Does page-locking (or unlocking) host memory stall the GPU's other work?  On the device:

    python experiments/pin_barrier.py 2^22 --repeats 7 --out out/pin-barrier.json

The thirty-seventh lease ran the pipeline both ways on one H100: with a, b, c page-locked
where they land (transfer.pin_pages) the kernels stage took 176 ms under load against
157 staged, and the synthesis span, which ends with the pin, 683 ms against 622.  The pin
alone takes 11 ms and the unpin 5.5 (experiments/pinned_abc.py).  This separates the
candidate mechanisms with a spin kernel of known length instead of the prover's stages:

1. `idle`: lock and unlock a region the size of a, b, c on an idle GPU;
2. `queued`: the same with Q ms of kernels queued ahead on the stream the prover uses
   (CuPy's current stream: the legacy default stream) - does the call wait for them?
3. `stage`: a thread runs a stage's pattern (2 ms kernels, a sync every 4) for a fixed
   count; another thread locks, unlocks, or both, a third of the way in: how much longer
   does the stage take than alone (the GPU's stall), and how long does the call take?
4. `two`: two such threads (two GPU workers) and the lock beside them;
5. `stream`: case 3 on a non-blocking stream of the stage's own;
6. a lock while another thread's unlock waits behind queued kernels (added after the
   thirty-seventh lease's run; the thirty-ninth's: 53 ms against 12 alone);
7. a kernel launched on a stream of its own while another thread's unlock waits behind
   queued kernels, and with no unlock (added after the thirty-ninth lease): does the
   driver hold launches behind a pending unlock too, as it holds a lock?

The regions are /dev/shm files mapped with MAP_POPULATE, as a received result's are
(simgpu.prover.handoff.receive), written with fresh random bytes each time; after each
lock, the region's copy to the device is checked against the host.  Prints a table of
medians (ms) last.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import threading
import time
from collections.abc import Iterator

import numpy as np

from simgpu.calibrate.pins import SpinKernel, shm_region
from simgpu.gpu import transfer
from simgpu.gpu.cuda import get_cupy
from simgpu.units import parse_count

#: this probe's kernels: 2 ms each, a sync every four (its 2026-12-05 pattern; calibrate's
#: own probe now keeps a shallower queue, simgpu.calibrate.pins)
SPIN_MS = 2.0


def region(n: int, rng: np.random.Generator) -> tuple[np.ndarray, object]:
    """a, b, c's bytes for n constraints (32-byte scalars) in a populated shared-memory
    mapping, as uint32 words."""
    buf, mm = shm_region(3 * n * 32, rng)
    return buf.view(np.uint32), mm


def checked_pin(cp: object, buf: np.ndarray) -> tuple[object, float]:
    t = time.perf_counter()
    pin = transfer.pin_pages(buf)
    took = (time.perf_counter() - t) * 1e3
    if pin is None:
        raise SystemExit("CUDA refused to page-lock the mapping")
    return pin, took


def check_copy(cp: object, buf: np.ndarray) -> None:
    d = cp.empty(buf.shape, dtype=cp.uint32)
    transfer.to_device(d, buf)
    if not np.array_equal(cp.asnumpy(d), buf):
        raise SystemExit("the device's copy differs from the page-locked host region")


@contextlib.contextmanager
def queued_behind(
    cp: object, sp: SpinKernel, n: int, rng: np.random.Generator, unlocking: bool
) -> Iterator[None]:
    """Inside: 40 ms of spin kernels queued on the prover's stream and, if `unlocking`,
    another thread's unlock of a region of its own waiting behind them (5 ms in)."""
    other, omm = region(n, rng)
    first = checked_pin(cp, other)[0]
    for _k in range(20):
        sp.launch()
    unlocker = threading.Thread(target=first.close) if unlocking else None
    if unlocker is not None:
        unlocker.start()
    time.sleep(0.005)
    try:
        yield
    finally:
        if unlocker is not None:
            unlocker.join()
        first.close()  # a second close does nothing
        cp.cuda.get_current_stream().synchronize()
        del other, first
        omm.close()


def stage(sp: SpinKernel, count: int, stream: object | None, started: threading.Event | None = None) -> float:
    """ms for `count` spin kernels in a stage's pattern (SpinKernel.stage)."""
    return sp.stage(count, stream, started) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("size", help="constraints, e.g. 2^22: the region is a, b and c's bytes")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--count", type=int, default=60, help="kernels in a stage (2 ms each)")
    ap.add_argument("--out")
    args = ap.parse_args()
    n = parse_count(args.size, "size", 1)
    cp = get_cupy()
    sp = SpinKernel(ms=SPIN_MS, sync_every=4)
    rng = np.random.default_rng()
    rows: dict[str, list[float]] = {}

    def note(key: str, ms: float) -> None:
        rows.setdefault(key, []).append(ms)

    buf, mm = region(n, rng)
    pin, _ = checked_pin(cp, buf)  # warm
    check_copy(cp, buf)
    pin.close()
    del buf
    mm.close()
    for _ in range(args.repeats):
        # 1. idle
        buf, mm = region(n, rng)
        pin, took = checked_pin(cp, buf)
        note("idle lock", took)
        check_copy(cp, buf)
        t = time.perf_counter()
        pin.close()
        note("idle unlock", (time.perf_counter() - t) * 1e3)
        # 2. queued: 40 ms of kernels ahead on the prover's stream
        for _k in range(20):
            sp.launch()
        pin, took = checked_pin(cp, buf)
        note("lock behind 40 ms queued", took)
        cp.cuda.get_current_stream().synchronize()
        for _k in range(20):
            sp.launch()
        t = time.perf_counter()
        pin.close()
        note("unlock behind 40 ms queued", (time.perf_counter() - t) * 1e3)
        cp.cuda.get_current_stream().synchronize()
        del buf
        mm.close()
        # 6. a lock while another thread's unlock waits behind 40 ms of queued kernels:
        # does the driver hold the lock behind it?  (the pipeline's synthesis span, which
        # ends with a lock, ran 60 ms longer pinned than staged on the 37th lease)
        buf, mm = region(n, rng)
        with queued_behind(cp, sp, n, rng, unlocking=True):
            pin, took = checked_pin(cp, buf)
            note("lock while an unlock waits behind 40 ms queued", took)
        check_copy(cp, buf)
        pin.close()
        del buf
        mm.close()
        # 7. a launch on a stream of its own while another thread's unlock waits behind
        # 40 ms of queued kernels, and with none: does the driver hold launches behind a
        # pending unlock too?  Then an unlock stalls every launching thread for its wait.
        own = cp.cuda.Stream(non_blocking=True)
        for unlocking in (False, True):
            with queued_behind(cp, sp, n, rng, unlocking):
                t = time.perf_counter()
                sp.launch(own)
                launched = time.perf_counter()
                own.synchronize()
                done = time.perf_counter()
            label = "beside an unlock behind 40 ms queued" if unlocking else "behind 40 ms queued elsewhere"
            note(f"launch on its own stream {label}: the call", (launched - t) * 1e3)
            note(f"launch on its own stream {label}: done", (done - t) * 1e3)
        # 3-5. a stage's pattern, alone and with a lock/unlock beside it
        note("stage alone", stage(sp, args.count, None))
        for what in ("lock", "unlock", "lock+unlock"):
            for where in ("stage", "two", "stream"):
                buf, mm = region(n, rng)
                held = checked_pin(cp, buf)[0] if what == "unlock" else None
                stream = cp.cuda.Stream(non_blocking=True) if where == "stream" else None
                started, times, call = threading.Event(), [], []

                run = lambda s=stream, t=times, e=started: t.append(stage(sp, args.count, s, e))  # noqa: E731
                ths = [threading.Thread(target=run) for _ in range(2 if where == "two" else 1)]
                for th in ths:
                    th.start()
                started.wait()
                time.sleep(args.count * sp.ms / 3e3)
                t = time.perf_counter()
                if what != "unlock":
                    held = checked_pin(cp, buf)[0]
                if what != "lock":
                    held.close()
                    held = None
                call.append((time.perf_counter() - t) * 1e3)
                for th in ths:
                    th.join()
                if held is not None:
                    check_copy(cp, buf)
                    held.close()
                note(f"{where} beside {what}: stage", max(times))
                note(f"{where} beside {what}: the call", call[0])
                del buf
                mm.close()
        for where in ("two", "stream"):
            stream = cp.cuda.Stream(non_blocking=True) if where == "stream" else None
            times = []
            ths = [
                threading.Thread(target=lambda s=stream, t=times: t.append(stage(sp, args.count, s)))
                for _ in range(2 if where == "two" else 1)
            ]
            for th in ths:
                th.start()
            for th in ths:
                th.join()
            note(f"{where} alone: stage", max(times))
    med = {k: statistics.median(v) for k, v in rows.items()}
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"size": n, "kernel_ms": SPIN_MS, "count": args.count, "runs": rows}, f, indent=1)
    print(f"n={n}: a, b, c = {3 * n * 32 / 2**20:.0f} MiB; a stage = {args.count} x {SPIN_MS} ms kernels; "
          f"medians of {args.repeats}, ms; every locked region's copy checked")  # fmt: skip
    print("| what | ms |\n|---|---:|")
    for k, v in med.items():
        print(f"| {k} | {v:.1f} |")


if __name__ == "__main__":
    main()
