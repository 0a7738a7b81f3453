"""The Python sampler of the kernel traces (experiments/py_sampler.py): a thread that
keeps the interpreter lock in one long C call makes the sampler late by about as much,
and the sample that ends the wait shows where that thread stood."""

from __future__ import annotations

import threading
import time

from conftest import load_experiment

py_sampler = load_experiment("py_sampler")


def _hold_the_lock() -> None:
    # sum() over a range runs in C and never checks for a switch: it keeps the lock
    sum(range(30_000_000))
    time.sleep(0.02)  # still alive after it, for the samples to name it


def test_a_long_c_call_makes_the_sampler_late_and_is_seen() -> None:
    sampler = py_sampler.PySampler(period=0.001)
    sampler.start()
    time.sleep(0.05)
    t = threading.Thread(target=_hold_the_lock, name="holder")
    t0 = time.perf_counter()
    t.start()
    t.join()
    held = time.perf_counter() - t0
    time.sleep(0.05)
    sampler.stop()
    rec = sampler.record()
    frames = rec["frames"]
    latest = max(rec["samples"], key=lambda s: s[1])
    late = latest[1]
    assert late > 0.5 * held * 1e6, (late, held)
    # of the wait, the part spent runnable without a core is recorded beside it (on a
    # loaded machine the lock's waiter wakes every switch interval and may queue for a
    # core then, so only its bounds are certain: none before the alarm, none past it)
    assert 0 <= latest[3] <= late + 1e6 * sampler.period + 1_000, latest
    # quiet samples are on time (a loaded CI core may be a few ms late)
    assert sorted(s[1] for s in rec["samples"])[len(rec["samples"]) // 2] < 5_000
    names = {int(k): v for k, v in rec["threads"].items()}
    holder = [k for k, v in names.items() if v == "holder"]
    assert holder, names
    seen = {frames[top] for _, _, row, _ in rec["samples"] for tid, top, _ in row if tid == holder[0]}
    assert any(f.endswith(":_hold_the_lock") for f in seen), seen
