"""The staging copiers of simgpu.gpu.transfer: each uploading thread packs with its own
crew, handed on when the thread ends (no GPU needed: packing is a host copy)."""

from __future__ import annotations

import threading

import numpy as np

from simgpu.gpu import transfer


def _crews_of_two_threads() -> list:
    """The crews two threads alive at once take (twice each)."""
    crews: list = [None, None]
    both = threading.Barrier(2)

    def take(i: int) -> None:
        crews[i] = (transfer._pool(), transfer._pool())
        both.wait()  # neither ends, handing its crew on, before the other has taken one

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


def _crew_of_a_thread() -> object:
    crew: list = []
    t = threading.Thread(target=lambda: crew.append(transfer._pool()))
    t.start()
    t.join()
    return crew[0]


def test_a_crew_outlives_its_thread_and_serves_the_next(monkeypatch):
    """A finalizer is a new thread every partition: it takes over the crew of the one
    that ended, rather than starting four copier threads of its own."""
    monkeypatch.delenv(transfer.SHARED_COPIERS_ENV, raising=False)
    monkeypatch.delenv(transfer.FRESH_COPIERS_ENV, raising=False)
    first = _crew_of_a_thread()
    assert _crew_of_a_thread() is first
    (a, _), (b, _) = _crews_of_two_threads()
    assert first in (a, b) and a is not b  # two live threads still never share one


def test_a_new_crew_for_every_thread_when_asked_for_the_ab(monkeypatch):
    monkeypatch.delenv(transfer.SHARED_COPIERS_ENV, raising=False)
    monkeypatch.setenv(transfer.FRESH_COPIERS_ENV, "1")
    transfer._idle.clear()
    assert _crew_of_a_thread() is not _crew_of_a_thread()


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
