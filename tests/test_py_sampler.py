"""The Python sampler of the kernel traces (experiments/py_sampler.py): a thread that
keeps the interpreter lock in one long C call makes the sampler late by about as much,
and the sample that ends the wait shows where that thread stood."""

from __future__ import annotations

import gc
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


def test_a_long_pass_of_the_collector_is_recorded_and_makes_the_sampler_late() -> None:
    """The cyclic collector runs holding the lock: a full pass over many objects held by
    cycles holds every thread up, and the sampler notes the pass beside its late sample."""
    cycles = []
    for _ in range(400_000):
        node: list = []
        node.append(node)
        cycles.append(node)
    sampler = py_sampler.PySampler(period=0.001)
    sampler.start()
    time.sleep(0.02)
    t0 = time.perf_counter()
    gc.collect()
    took = time.perf_counter() - t0
    time.sleep(0.02)
    sampler.stop()
    del cycles
    rec = sampler.record()
    full = [row for row in rec["gc"] if row[2] == 2]
    assert full, rec["gc"]
    start, dur_us, _ = max(full, key=lambda row: row[1])
    assert t0 - 0.001 <= start <= t0 + took and 0.5 * took * 1e6 <= dur_us <= took * 1e6 + 1_000
    assert max(s[1] for s in rec["samples"]) > 0.5 * dur_us  # everyone waited for it
    assert py_sampler.gc.callbacks.count(sampler._on_gc) == 0  # taken off at stop
