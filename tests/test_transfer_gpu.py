"""Copies through the page-locked staging (simgpu.gpu.transfer), on the device:
`pytest -m gpu`.  Fresh random bytes each time, sizes around the parallel packing
threshold, several threads at once (each has its own blocks in flight), and a copy
checked after its host source is overwritten."""

from __future__ import annotations

import mmap
import threading

import numpy as np
import pytest

from simgpu.gpu import cuda as gpu

pytestmark = pytest.mark.gpu

if not gpu.cupy_available():
    pytest.skip("CuPy/CUDA not available", allow_module_level=True)

import cupy as cp  # noqa: E402
import cupyx  # noqa: E402

from simgpu.gpu import transfer  # noqa: E402

BAY = transfer.PARALLEL_BYTES


@pytest.mark.parametrize("nbytes", [4, BAY - 4, BAY, BAY + 4, 3 * BAY + 1000])
def test_round_trip_of_random_bytes(nbytes: int) -> None:
    host = np.random.default_rng().integers(0, 256, nbytes, dtype=np.uint8)
    dev = transfer.upload(host)
    assert cp.asnumpy(dev).tobytes() == host.tobytes()
    assert transfer.to_host(dev).tobytes() == host.tobytes()


def test_the_source_may_be_overwritten_at_once() -> None:
    rng = np.random.default_rng()
    host = rng.integers(0, 2**32, (3 * BAY // 4 + 17,), dtype=np.uint32)
    want = host.copy()
    dev = cp.empty_like(cp.asarray(host))
    cp.cuda.runtime.deviceSynchronize()
    # a long kernel first, so that the copies are still queued when the host is reused
    work = cp.ones(1 << 24, dtype=cp.float32)
    for _ in range(50):
        cp.sin(work, out=work)
    transfer.to_device(dev, host)
    host[...] = 0
    assert np.array_equal(transfer.to_host(dev), want)


def test_rows_of_a_larger_array_and_a_page_locked_source() -> None:
    rng = np.random.default_rng()
    rows = rng.integers(0, 2**32, (1000, 24), dtype=np.uint32)
    dev = cp.zeros((1500, 24), dtype=cp.uint32)
    transfer.to_device(dev[200:1200], rows)
    got = cp.asnumpy(dev)
    assert np.array_equal(got[200:1200], rows) and not got[:200].any() and not got[1200:].any()
    pinned = cupyx.empty_pinned(rows.shape, dtype=rows.dtype)
    pinned[...] = rows[::-1]
    assert transfer.page_locked(pinned) and not transfer.page_locked(rows)
    transfer.to_device(dev[:1000], pinned)
    assert np.array_equal(cp.asnumpy(dev[:1000]), rows[::-1])


def test_scalars_and_strided_reads() -> None:
    a = cp.arange(10, dtype=cp.uint32) * 7
    assert transfer.read_int(a[3]) == 21 and transfer.read_int(a.max()) == 63
    assert np.array_equal(transfer.to_host(a[::2]), np.arange(0, 70, 14, dtype=np.uint32))


def test_bad_copies_are_refused() -> None:
    dev = cp.zeros((4, 4), dtype=cp.uint32)
    with pytest.raises(ValueError, match="bytes"):
        transfer.to_device(dev, np.zeros(3, dtype=np.uint32))
    with pytest.raises(ValueError, match="contiguous"):
        transfer.to_device(dev[:, :2], np.zeros((4, 2), dtype=np.uint32))


def test_threads_copy_at_once() -> None:
    errors: list[str] = []

    def worker(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(6):
            host = rng.integers(0, 2**32, int(rng.integers(1, BAY // 2)), dtype=np.uint32)
            if not np.array_equal(transfer.to_host(transfer.upload(host)), host):
                errors.append(f"thread {seed}")

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_the_pageable_a_b_switch_copies_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(transfer.PAGEABLE_ENV, "1")
    host = np.random.default_rng().integers(0, 2**32, BAY // 2 + 3, dtype=np.uint32)
    assert np.array_equal(transfer.to_host(transfer.upload(host)), host)


def test_memory_pinned_where_it_lies_is_copied_from_there_and_unlocked_after() -> None:
    rows = 3 * BAY // 32 + 64  # a, b, c of a small partition: (rows, 8) uint32 each
    raw = mmap.mmap(-1, 3 * rows * 32)  # page-aligned, as a received result's mapping
    region = np.frombuffer(raw, dtype=np.uint32).reshape(3, rows, 8)
    region[...] = np.random.default_rng().integers(0, 2**32, region.shape, dtype=np.uint32)
    want = region.copy()
    pin = transfer.pin_pages(region)
    assert pin is not None and transfer.page_locked(region)
    dev = cp.empty((2, rows, 8), dtype=cp.uint32)
    d_a = cp.empty((rows, 8), dtype=cp.uint32)
    work = cp.ones(1 << 24, dtype=cp.float32)
    for _ in range(50):  # the copies queue behind this, so close() must wait for them
        cp.sin(work, out=work)
    transfer.to_device(d_a, region[0])
    transfer.to_device(dev, region[1:])
    pin.close()  # waits for both copies, then unlocks
    assert not transfer.page_locked(region)
    assert np.array_equal(cp.asnumpy(d_a), want[0]) and np.array_equal(cp.asnumpy(dev), want[1:])
    pin.close()  # once only
    del region


def test_a_refused_pin_falls_back_to_the_staging_and_says_so() -> None:
    transfer._refusals.clear()  # each refusal is said once a process
    raw = mmap.mmap(-1, 64 * 4096)
    host = np.frombuffer(raw, dtype=np.uint32).reshape(-1, 8)
    host[...] = np.random.default_rng().integers(0, 2**32, host.shape, dtype=np.uint32)
    first = transfer.pin_pages(host)
    assert first is not None
    with pytest.warns(UserWarning, match="not page-locked"):
        assert transfer.pin_pages(host) is None  # CUDA: already registered
    first.close()
    dev = cp.empty(host.shape, dtype=cp.uint32)
    transfer.to_device(dev, host)  # no pin holds it now: through the staging
    assert np.array_equal(cp.asnumpy(dev), host)
    del host


def test_a_pin_let_go_on_the_releaser_is_unlocked_once_it_has_settled() -> None:
    from simgpu.prover import handoff

    raw = mmap.mmap(-1, 256 * 4096)
    host = np.frombuffer(raw, dtype=np.uint32).reshape(-1, 8)
    host[...] = np.random.default_rng().integers(0, 2**32, host.shape, dtype=np.uint32)
    pin = transfer.pin_pages(host)
    assert pin is not None
    dev = cp.empty(host.shape, dtype=cp.uint32)
    transfer.to_device(dev, host)
    handoff.release_later(pin)  # as prestage lets a, b, c go
    del pin
    handoff.settled()  # as calibrate does before it times the kernels
    assert not transfer.page_locked(host)
    assert np.array_equal(cp.asnumpy(dev), host)
    del host


def test_calibrate_reads_what_the_pins_cost() -> None:
    """simgpu.calibrate.pins on two small regions: every lock and unlock takes time, a
    stall is never more than its call (within the spin stage's own jitter), and the fit
    gives [pins] keys a profile accepts."""
    from simgpu.calibrate.pins import fit_pins, measure_pins
    from simgpu.profile.schema import _pins

    got = measure_pins([4 << 20, 16 << 20], 1, lambda _: None)
    rows = got["rows"]
    assert [r[0] for r in rows] == [4 << 20, 16 << 20]
    assert all(r[1] > 0 and r[2] > 0 and r[3] >= 0 and r[4] >= 0 for r in rows)
    pins = _pins(fit_pins(rows), "test")
    assert pins is not None and pins.lock_s_per_gib > 0 and 0 <= pins.unlock_stall <= 1
    # BURST locks of the larger region at once: each call timed, the row as long as its
    # slowest call, and no call quicker than zero
    from simgpu.calibrate.pins import BURST

    for row in got["bursts"]:
        assert row[0] == 16 << 20 and row[1] == BURST and len(row) == 4 + BURST
        assert row[2] == max(row[4:]) and min(row[4:]) > 0 and row[3] >= 0


def test_a_failed_burst_step_keeps_the_pins_keys(monkeypatch) -> None:
    """The burst step is a check: where it fails, measure_pins says so and keeps its rows
    (the forty-fourth lease's calibrate lost its whole [pins] to a bug there)."""
    from simgpu.calibrate import pins as pins_probe

    def broken(*_: object, **__: object) -> list[list[float]]:
        raise BufferError("a mapping still viewed")

    said: list[str] = []
    monkeypatch.setattr(pins_probe, "measure_bursts", broken)
    got = pins_probe.measure_pins([4 << 20], 1, said.append)
    assert [r[0] for r in got["rows"]] == [4 << 20] and "bursts" not in got
    assert any("not measured: BufferError" in line for line in said)


def test_a_lock_of_a_fresh_region_is_timed_and_let_go() -> None:
    """calibrate times one page-lock of a landing result's size beside its load
    (measure_pressure's pins.lock): a fresh region, locked, unlocked and unmapped."""
    from simgpu.calibrate.pins import time_lock

    took = time_lock(16 << 20)
    assert 0 < took < 5
