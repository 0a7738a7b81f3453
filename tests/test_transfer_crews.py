"""The staging copiers of simgpu.gpu.transfer: each uploading thread packs with its own
crew (no GPU needed: packing is a host copy)."""

from __future__ import annotations

import threading

import numpy as np

from simgpu.gpu import transfer


def _crews_of_two_threads() -> list:
    crews: list = [None, None]

    def take(i: int) -> None:
        crews[i] = (transfer._pool(), transfer._pool())

    threads = [threading.Thread(target=take, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return crews


def test_each_thread_packs_with_its_own_crew(monkeypatch):
    monkeypatch.delenv(transfer.SHARED_COPIERS_ENV, raising=False)
    (a, a_again), (b, _) = _crews_of_two_threads()
    assert a is a_again  # a thread keeps its crew
    assert a is not b  # and no other thread's parcels queue in it


def test_one_crew_for_the_process_when_asked_for_the_ab(monkeypatch):
    monkeypatch.setenv(transfer.SHARED_COPIERS_ENV, "1")
    (a, _), (b, _) = _crews_of_two_threads()
    assert a is b


def test_a_large_upload_is_packed_whole_by_the_crew():
    rng = np.random.default_rng(7)
    src = rng.integers(0, 256, transfer.PARALLEL_BYTES + 12345, dtype=np.uint8)
    block = np.zeros_like(src)
    transfer._pack(block, src)  # COPIERS pieces, the last one short
    assert np.array_equal(block, src)
