"""RealRuntime's mechanics on threads, with an executor whose stages do nothing (the
prover-backed runs are in tests/test_run_cpu.py)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from simgpu.config import PipelineConfig, Workload
from simgpu.errors import DesignError
from simgpu.real.null_executor import NullExecutor
from simgpu.real.primitives import RealEvent, Stop
from simgpu.real.runtime import RealRuntime
from simgpu.report.metrics import summarize
from simgpu.sched.registry import resolve_design
from simgpu.sched.work import Partition, Proof

DESIGNS = Path(__file__).parent / "designs" / "crossed.py"


def run(design: str, delay: float = 0.0, **config):
    cfg = PipelineConfig(proofs=2, concurrency=2).with_overrides(**config)
    rt = RealRuntime(NullExecutor(delay), cfg, Workload("w", 3, 16))
    return rt.run(resolve_design(design).fn)


@pytest.mark.parametrize(
    "design", ["serial", "single-lock", "two-lock", "two-lock-reserve", "split-finalizer"]
)
def test_every_design_completes_on_threads(design):
    result = run(design, delay=0.001)
    s = summarize(result)
    assert (s.submitted, s.completed, s.failed) == (2, 2, 0)
    assert s.deadlock is None
    kernels = [r for r in result.records if r.event == "stage_start" and r.fields["stage"] == "kernels"]
    assert len(kernels) == 6


def test_the_lock_really_excludes():
    # with 3 workers and a 20 ms kernels stage, no two kernels overlap under single-lock
    result = run("single-lock", delay=0.02, gpu_workers_per_device=3)
    spans, open_ = [], {}
    for r in result.records:
        if r.fields.get("stage") in ("prestage", "kernels") and r.event in ("stage_start", "stage_end"):
            key = (r.proof, r.partition)
            if r.event == "stage_start" and r.fields["stage"] == "prestage":
                open_[key] = r.t
            elif r.event == "stage_end" and r.fields["stage"] == "kernels":
                spans.append((open_.pop(key), r.t))
    spans.sort()
    assert all(b[0] >= a[1] for a, b in zip(spans, spans[1:], strict=False))


def test_a_deadlock_is_detected_and_named():
    result = run(f"{DESIGNS}:crossed_locks", proofs=1, concurrency=1)
    assert result.deadlock is not None
    assert "lock gpu0/a" in result.deadlock.waiting["gpu0.w1"]
    assert "lock gpu0/b" in result.deadlock.waiting["gpu0.w0"]


class _SlowToLook(RealEvent):
    """An event whose `triggered` takes a moment to read: a thread that checks it is
    preempted there, as an unlucky one may be anywhere."""

    @property
    def triggered(self) -> bool:
        seen = super().triggered
        time.sleep(0.002)
        return seen


def test_two_threads_ending_one_partition_race_and_the_first_wins():
    """A stopped run's worker fails its partition as it unwinds while the daemon fails
    the ones left: the two may end one partition at once.  The first end wins, once, and
    the other is no error (a check of `triggered` before triggering let both through:
    "event triggered twice", and the run crashed)."""
    errors: list[BaseException] = []
    for i in range(20):
        part = Partition(Proof(i, 1, 16), 0, 16, _SlowToLook(Stop()))
        start = threading.Barrier(2)

        def end(succeed: bool, part: Partition = part, start: threading.Barrier = start) -> None:
            start.wait()
            try:
                part.complete("proof") if succeed else part.fail(RuntimeError("stopped"))
            except BaseException as e:  # noqa: BLE001 - what the race raised is the finding
                errors.append(e)

        threads = [threading.Thread(target=end, args=(k == 0,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert part.done.triggered
    assert errors == []


def test_scheduler_code_between_two_yields_is_atomic_as_in_the_simulation():
    """Two tasks read a shared count, dawdle, and write it back, then yield: on threads
    that loses updates unless one task steps at a time.  The real runtime steps them one
    at a time, as SimPy does, so no update is lost."""
    rt = RealRuntime(NullExecutor(), PipelineConfig(proofs=1, concurrency=1), Workload("w", 1, 16))
    count = [0]

    def bump():
        for _ in range(30):
            seen = count[0]
            time.sleep(0.0005)  # a thread switch here is what loses an update
            count[0] = seen + 1
            yield rt.sleep(0)

    tasks = [rt.spawn(bump(), f"t{i}") for i in range(2)]
    for t in tasks:
        t.thread.join()
    assert count[0] == 60


def test_a_design_that_crashes_is_a_design_error():
    def broken(rt, worker, part):
        yield rt.stage("prestage", part, worker.device)
        raise ZeroDivisionError("oops")

    rt = RealRuntime(NullExecutor(), PipelineConfig(proofs=1, concurrency=1), Workload("w", 1, 16))
    with pytest.raises(DesignError, match="ZeroDivisionError: oops"):
        rt.run(broken)


class _Device:
    """Stands in for a device buffer that goes back to the pool when garbage-collected
    (as CuPy's arrays do)."""


class OomExecutor(NullExecutor):
    """kernels allocates a buffer, keeps it in a local, and runs out of memory."""

    def __init__(self) -> None:
        super().__init__()
        self.alive = []

    def run_stage(self, name, part, device, inputs):
        if name == "kernels":
            import weakref

            from simgpu.errors import VramExhausted

            scratch = _Device()  # a local of the failing frame, like kernels' d_a view
            self.alive.append(weakref.ref(scratch))
            raise VramExhausted("gpu0", 1 << 30, 0, 1 << 30, buffer="scratch")
        return None


def test_a_failed_stage_holds_no_memory_once_its_partition_has_failed():
    ex = OomExecutor()
    cfg = PipelineConfig(proofs=1, concurrency=1)
    result = RealRuntime(ex, cfg, Workload("w", 2, 16)).run(resolve_design("single-lock").fn)
    assert summarize(result).failed == 1 and len(summarize(result).oom_events) >= 1
    assert ex.alive and all(ref() is None for ref in ex.alive)


def test_ctrl_c_stops_cleanly_and_reports_what_finished():
    import os
    import signal
    import threading

    # 30 proofs one at a time take several seconds; Ctrl-C comes after half a second
    cfg = PipelineConfig(proofs=30, concurrency=1)
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
    assert 0 < s.completed < 30  # some finished before the stop, the rest did not start
    assert all(not t.thread.is_alive() for t in rt.tasks)


def admission_order(result) -> tuple[list, list]:
    """The (proof, partition) order the partitions were admitted in (given a synthesis
    slot), and the order the daemon's rule gives: proofs as they were submitted, each
    one's partitions by index."""
    submitted = [r.proof for r in result.records if r.event == "proof_submitted"]
    admitted = [(r.proof, r.partition) for r in result.records if r.event == "partition_admitted"]
    rule = sorted(admitted, key=lambda k: (submitted.index(k[0]), k[1]))
    return admitted, rule


@pytest.mark.parametrize("repeat", range(3))
def test_concurrent_proofs_take_synthesis_slots_proof_by_proof_on_threads(repeat):
    # Three clients submit at once; their twelve partitions' threads would reach the pool
    # in whatever order the OS runs them.  The admitter gives the slots in the daemon's
    # order instead, as the simulation does, so a proof's partitions are synthesised
    # together and it ends (and its client's next proof starts) as early as it can.
    cfg = PipelineConfig(proofs=6, concurrency=3, partition_workers=2, gpu_workers_per_device=2)
    rt = RealRuntime(NullExecutor(0.002), cfg, Workload("w", 4, 16))
    result = rt.run(resolve_design("single-lock").fn)
    assert summarize(result).completed == 6
    admitted, rule = admission_order(result)
    assert len(admitted) == 24
    assert admitted == rule
    # and no synthesis starts before its partition was admitted
    t_admitted = {(r.proof, r.partition): r.t for r in result.records if r.event == "partition_admitted"}
    for r in result.records:
        if r.event == "stage_start" and r.fields["stage"] == "synthesis":
            assert r.t >= t_admitted[(r.proof, r.partition)]
