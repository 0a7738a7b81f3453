"""Synthesis results come back from their worker through shared memory: the same arrays,
no name left behind, and the pickled way where shared memory cannot take them."""

from __future__ import annotations

import numpy as np
import pytest

from simgpu.prover import handoff
from simgpu.prover.circuits import CircuitSpec
from simgpu.prover.synthesis import Synthesized, synthesize

SPEC = CircuitSpec(log_constraints=8)


def test_a_handed_off_result_is_the_same_result_and_leaves_no_name(tmp_path, monkeypatch):
    monkeypatch.setattr(handoff, "SHM_DIR", tmp_path)
    synth = synthesize(SPEC, 3)
    sent = handoff.hand_off(synth, "t1")
    assert isinstance(sent, handoff.Handoff) and len(list(tmp_path.iterdir())) == 1
    got = handoff.receive(sent)
    assert list(tmp_path.iterdir()) == []  # the driver removed the name as it mapped it
    for name in ("aux", "a", "b", "c"):
        assert np.array_equal(getattr(got, name), getattr(synth, name)), name
    assert got.public_inputs == synth.public_inputs and got.spec == synth.spec
    got.a[0, 0] ^= 1  # the mapping is the driver's to use, writable


def test_without_room_the_result_travels_pickled(tmp_path, monkeypatch):
    monkeypatch.setattr(handoff, "SHM_DIR", tmp_path / "missing")
    synth = synthesize(SPEC, 4)
    assert handoff.hand_off(synth, "t2") is synth
    out, compute, share, extra = handoff.synthesize_handed_off_timed(SPEC, 4, "t2")
    assert isinstance(out, Synthesized) and compute > 0 and share == extra > 0


def test_results_nobody_received_are_cleared(tmp_path, monkeypatch):
    monkeypatch.setattr(handoff, "SHM_DIR", tmp_path)
    for seed in (5, 6):
        handoff.hand_off(synthesize(SPEC, seed), "lost")
    handoff.hand_off(synthesize(SPEC, 7), "kept")
    assert handoff.clear("lost") == 2
    assert [p.name.split("-")[0] for p in tmp_path.iterdir()] == ["kept"]


@pytest.mark.skipif(not handoff.SHM_DIR.is_dir(), reason="needs a shared-memory file system (/dev/shm)")
def test_the_executor_hands_results_off_and_clears_at_close(tmp_path):
    from conftest import make_executor

    from simgpu.sched.work import Partition, Proof

    ex = make_executor(tmp_path / "keys")
    try:
        part = Partition(Proof(1, 1, SPEC.constraints), 0, SPEC.constraints)
        host = ex.run_stage("synthesis", part, None, {})
        assert (
            isinstance(host.synth.a.base, np.ndarray) and not host.synth.a.flags.owndata
        )  # a view of the mapping
        assert not list(handoff.SHM_DIR.glob(f"{ex._tag}-*"))
    finally:
        ex.close()


def test_a_received_mapping_is_unmapped_on_the_releaser_thread(tmp_path, monkeypatch):
    import threading
    import weakref

    monkeypatch.setattr(handoff, "SHM_DIR", tmp_path)
    got = handoff.receive(handoff.hand_off(synthesize(SPEC, 8), "rel"))
    buffer = got.a.base.base  # the arrays view one buffer over the mapping
    gone = threading.Event()
    where: list[str] = []
    weakref.finalize(buffer, lambda: (where.append(threading.current_thread().name), gone.set()))
    arrays = (got.aux, got.a, got.b, got.c)
    del got, buffer
    assert not gone.is_set()
    handoff.release_later(*arrays)
    del arrays
    assert gone.wait(5), "the mapping was never let go"
    assert where == ["handoff-releaser"]
