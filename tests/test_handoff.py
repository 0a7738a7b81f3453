"""Synthesis results come back from their worker through shared memory: the same arrays,
no name left behind, and the pickled way where shared memory cannot take them."""

from __future__ import annotations

import mmap
import threading
import time

import numpy as np
import pytest
from conftest import load_experiment

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


class _Pin:
    """Stands for the GPU's page-lock (simgpu.gpu.transfer.pin_pages, tested on the device
    in test_transfer_gpu.py): notes the region it was asked to lock, and on which thread
    it was let go."""

    def __init__(self, region: np.ndarray, dropped: list[str]) -> None:
        self.region = region
        self._dropped = dropped

    def __del__(self) -> None:
        self._dropped.append(threading.current_thread().name)


def test_a_b_c_are_pinned_as_one_run_of_pages_and_let_go_after_their_upload(tmp_path, monkeypatch):
    from simgpu.prover import groth16
    from simgpu.prover.setup import cached_keys

    monkeypatch.setattr(handoff, "SHM_DIR", tmp_path)
    dropped: list[str] = []
    pins: list[_Pin] = []

    def pin(region: np.ndarray) -> _Pin:
        pins.append(_Pin(region, dropped))
        return pins[-1]

    synth = synthesize(SPEC, 9)
    got = handoff.receive(handoff.hand_off(synth, "pin"), pin)
    (p,) = pins
    region = p.region
    # a, b, c back to back from the mapping's first page: one region for the driver to lock
    assert region.ctypes.data % mmap.PAGESIZE == 0
    assert region.nbytes == got.a.nbytes + got.b.nbytes + got.c.nbytes
    starts = [x.ctypes.data - region.ctypes.data for x in (got.a, got.b, got.c)]
    assert starts == [0, got.a.nbytes, got.a.nbytes + got.b.nbytes]
    assert got.abc_pin is p and np.array_equal(got.c, synth.c) and np.array_equal(got.aux, synth.aux)
    pins.clear()
    del p, region

    # the pin travels with a, b, c: prep takes it over, and their release lets it go on
    # the releaser thread, never on the GPU worker's that queued the upload
    pk, _, _ = cached_keys(SPEC, 1, tmp_path / "keys", None)
    prepared = groth16.prep(got, pk)
    del got
    assert prepared.abc_pin is not None and not dropped
    prepared.release_host_abc()
    for _ in range(100):
        if dropped:
            break
        time.sleep(0.05)
    assert dropped == ["handoff-releaser"] and prepared.abc_pin is None and prepared.a is None


def test_a_pickled_result_is_not_pinned(tmp_path, monkeypatch):
    monkeypatch.setattr(handoff, "SHM_DIR", tmp_path / "missing")
    calls: list[int] = []
    got = handoff.receive(handoff.hand_off(synthesize(SPEC, 10), "t3"), lambda r: calls.append(1))
    assert got.abc_pin is None and calls == []


@pytest.mark.skipif(not handoff.SHM_DIR.is_dir(), reason="needs a shared-memory file system (/dev/shm)")
def test_the_executor_counts_how_each_result_reaches_the_device(tmp_path):
    from conftest import make_executor

    from simgpu.sched.work import Partition, Proof

    ex = make_executor(tmp_path / "keys")
    try:
        assert ex.pin is None  # the CPU backend pins nothing, and counts nothing
        part = Partition(Proof(1, 1, SPEC.constraints), 0, SPEC.constraints)
        ex.run_stage("synthesis", part, None, {})
        assert ex.abc_uploads == {"pinned": 0, "staged": 0}
        dropped: list[str] = []
        answers = iter([_Pin(np.zeros(1), dropped), None])  # locked, then refused
        ex.pin = lambda region: next(answers)
        for _ in range(2):
            ex.run_stage("synthesis", part, None, {})
        assert ex.abc_uploads == {"pinned": 1, "staged": 1}
    finally:
        ex.close()


@pytest.mark.skipif(not handoff.SHM_DIR.is_dir(), reason="needs a shared-memory file system (/dev/shm)")
def test_receiving_a_result_leaves_the_other_threads_running():
    """Populating a 512 MiB mapping of shared memory takes tens of milliseconds, and so
    does unmapping it.  In one call each holds the kernel's address-space lock all
    along; a thread allocating memory beside (an mmap a block) then waits in the kernel
    holding the interpreter lock, and every other driver thread (the GPU workers'
    launch loops included) stands still with it.  simgpu.prover.address_space touches
    the pages one by one and unmaps in steps.  Measured as experiments/populate_hold.py
    measures it: a thread spinning in Python beside, its longest stretch without
    running; the median of three files."""
    probe = load_experiment("populate_hold")
    probe.one(2**20)  # address_space's loops compiled
    rows = [probe.one(512 * 2**20, "address_space", allocating=True) for _ in range(3)]
    gap_map, took_map, gap_drop, took_drop = (sorted(r[i] for r in rows)[1] for i in range(4))
    for what, gap, took in (("mapping", gap_map, took_map), ("unmapping", gap_drop, took_drop)):
        assert gap < max(0.03, took / 2), f"{what}: stood still {gap * 1e3:.0f} ms of {took * 1e3:.0f}"
