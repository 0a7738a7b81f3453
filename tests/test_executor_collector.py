"""The real prover takes set-up's objects out of the cyclic collector's sight for its run
(simgpu.real.executor._freeze_setup) and gives them back when the last executor closes."""

from __future__ import annotations

import gc

from conftest import make_executor

from simgpu.real import executor


def test_set_up_is_frozen_for_the_run_and_thawed_when_the_last_executor_closes(tmp_path):
    assert executor._frozen_by == 0, "an earlier test left an executor open"
    assert gc.get_freeze_count() == 0
    first = make_executor(tmp_path / "keys")
    try:
        assert first.gc_frozen and gc.get_freeze_count() > 0
        second = make_executor(tmp_path / "keys")
        second.close()
        assert gc.get_freeze_count() > 0  # the first is still running
    finally:
        first.close()
    assert gc.get_freeze_count() == 0
    first.close()  # closing twice thaws nothing more
    assert executor._frozen_by == 0


def test_the_collector_can_be_left_as_it_is(tmp_path, monkeypatch):
    monkeypatch.setenv(executor.GC_AS_USUAL_ENV, "1")
    ex = make_executor(tmp_path / "keys")
    try:
        assert not ex.gc_frozen and gc.get_freeze_count() == 0
    finally:
        ex.close()
