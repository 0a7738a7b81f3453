"""A design that can never finish is reported as a deadlock, naming what each stuck
process waits for: never a hang, never a silent zero."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import tiny_profile

from simgpu.config import PipelineConfig
from simgpu.errors import UserError
from simgpu.model.sim import SimRuntime
from simgpu.report.metrics import summarize
from simgpu.sched.registry import resolve_design

DESIGNS = Path(__file__).parent / "designs" / "crossed.py"


def run(design_ref: str):
    prof = tiny_profile()
    rt = SimRuntime(prof, PipelineConfig(proofs=1, concurrency=1), prof.workload())
    return summarize(rt.run(resolve_design(design_ref).fn))


def test_crossed_locks_deadlock_names_each_waiter():
    s = run(f"{DESIGNS}:crossed_locks")
    assert s.deadlock is not None
    waiting = s.deadlock["waiting"]
    assert waiting["gpu0.w0"] == "lock gpu0/b (held by gpu0.w1)"
    assert waiting["gpu0.w1"] == "lock gpu0/a (held by gpu0.w0)"
    assert s.deadlock["at"] == pytest.approx(1.6)
    assert s.completed == 0


def test_a_partition_never_completed_is_a_deadlock_not_a_hang():
    s = run(f"{DESIGNS}:forgets_to_finish")
    assert s.deadlock is not None
    assert "a partition to finish" in s.deadlock["waiting"].values()


def test_file_designs_that_cannot_load_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="generator function"):
        resolve_design(f"{DESIGNS}:not_a_generator")
    with pytest.raises(UserError, match="has no 'missing'"):
        resolve_design(f"{DESIGNS}:missing")
    broken = tmp_path / "broken.py"
    broken.write_text("def d(rt, worker, part):\n    yield (\n")
    with pytest.raises(UserError, match="failed to load: SyntaxError"):
        resolve_design(f"{broken}:d")
