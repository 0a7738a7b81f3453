"""The placement dispatcher on RealRuntime's threads (an executor whose stages do nothing):
every policy ends every design's run, a deadlock is still found and named, Ctrl-C still
stops the run cleanly."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from simgpu.config import PLACEMENTS, PipelineConfig, Workload
from simgpu.real.null_executor import NullExecutor
from simgpu.real.runtime import RealRuntime
from simgpu.report.metrics import summarize
from simgpu.sched.registry import resolve_design

CROSSED = f"{Path(__file__).parent / 'designs' / 'crossed.py'}:crossed_locks"


def run(design: str, delay: float = 0.0, **config):
    cfg = PipelineConfig(proofs=2, concurrency=2, devices=2).with_overrides(**config)
    rt = RealRuntime(NullExecutor(delay), cfg, Workload("w", 3, 16))
    return rt, rt.run(resolve_design(design).fn)


@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("design", ["single-lock", "two-lock-reserve", "split-finalizer"])
def test_every_policy_ends_the_run_on_threads(design, placement):
    _, result = run(design, delay=0.001, placement=placement)
    s = summarize(result)
    assert (s.submitted, s.completed, s.failed) == (2, 2, 0) and s.deadlock is None
    gpu = [r for r in result.records if r.event == "stage_start" and r.fields["stage"] == "kernels"]
    assert len(gpu) == 6
    if placement == "round-robin":  # the k-th placement on device k mod 2
        placed = [r.device for r in result.records if r.event == "partition_placed"]
        assert placed == [0, 1] * 3


def test_a_deadlock_behind_the_dispatcher_is_found_and_named():
    _, result = run(CROSSED, proofs=1, concurrency=1, devices=1, placement="best-fit")
    assert result.deadlock is not None
    assert "lock gpu0/a" in result.deadlock.waiting["gpu0.w1"]
    # the proof's third partition waits in the dispatcher for a worker to be idle
    assert result.deadlock.waiting["dispatcher"] == "an item from queue idle_workers"


def test_ctrl_c_stops_a_dispatched_run_cleanly():
    # 400 proofs take at least 8 s uninterrupted, so the Ctrl-C at 0.5 s lands inside the
    # run however late a loaded machine fires the timer (30 could end first, 0.6 s).
    cfg = PipelineConfig(proofs=400, concurrency=1, devices=2, placement="round-robin")
    rt = RealRuntime(NullExecutor(delay=0.02), cfg, Workload("w", 2, 16))
    running = threading.Event()
    running.set()

    def ctrl_c():
        if running.is_set():  # never signal once the run is over: it would hit pytest
            os.kill(os.getpid(), signal.SIGINT)

    threading.Timer(0.5, ctrl_c).start()
    try:
        result = rt.run(resolve_design("single-lock").fn)
    finally:
        running.clear()
    s = summarize(result)
    assert result.interrupted == "interrupted by Ctrl-C"
    assert 0 < s.completed < 400
    assert all(not t.thread.is_alive() for t in rt.tasks)
