"""Ledger arithmetic: what fits, what does not, and who asked."""

from __future__ import annotations

import pytest

from simgpu.errors import DesignError, HostRamExhausted, VramExhausted
from simgpu.ledger import host_ledger, vram_ledger

GiB = 1 << 30


def test_allocations_add_up_and_free_returns_to_the_resident_baseline():
    led = vram_ledger(0, 16 * GiB, resident=GiB // 2)
    a = led.alloc(4 * GiB, "d_a")
    bc = led.alloc(8 * GiB, "d_bc")
    assert led.used == int(12.5 * GiB) and led.free == int(3.5 * GiB)
    bc.release()
    a.release()
    assert led.used == led.resident and led.peak == int(12.5 * GiB)


def test_an_allocation_that_does_not_fit_books_nothing_and_says_where():
    led = vram_ledger(0, 16 * GiB, resident=GiB // 2)
    led.alloc(12 * GiB, "prestage")
    with pytest.raises(VramExhausted) as e:
        led.alloc(4 * GiB, "d_a", stage="kernels", worker="gpu0.w1", proof=1, partition=3)
    err = e.value
    assert (err.requested, err.free, err.capacity) == (4 * GiB, int(3.5 * GiB), 16 * GiB)
    assert str(err) == (
        "VRAM exhausted on gpu0 in stage kernels, worker gpu0.w1, proof 1 partition 3: "
        "requested 4.00 GiB for d_a, free 3.50 GiB of 16.00 GiB"
    )
    assert led.used == int(12.5 * GiB)


def test_exactly_full_fits():
    led = host_ledger(10 * GiB, resident=2 * GiB)
    led.alloc(8 * GiB, "host_abc")
    assert led.free == 0
    with pytest.raises(HostRamExhausted):
        led.alloc(1, "one byte")


def test_double_free_is_a_design_error():
    led = vram_ledger(0, GiB)
    a = led.alloc(10, "x")
    a.release()
    with pytest.raises(DesignError):
        a.release()


def test_history_draws_memory_over_time():
    t = [0.0]
    led = vram_ledger(0, GiB, clock=lambda: t[0])
    t[0] = 1.0
    a = led.alloc(100, "x")
    t[0] = 2.0
    a.release()
    assert led.history == [(0.0, 0), (1.0, 100), (2.0, 0)]


def test_a_watch_sees_every_allocation_booked_and_none_refused():
    """`watch` is the model's side of an allocation trace (experiments/alloc_order.py
    --model): each allocation as it is booked, with its holder and instant."""
    t = [0.5]
    seen = []
    led = vram_ledger(0, GiB, clock=lambda: t[0])
    led.watch = seen.append
    led.alloc(100, "d_a", stage="prestage", worker="gpu0.w0")
    t[0] = 0.75
    led.alloc(200, "scratch", stage="kernels", worker="gpu0.w0")
    with pytest.raises(VramExhausted):
        led.alloc(2 * GiB, "too big", stage="kernels", worker="gpu0.w1")
    assert [(a.tag, a.stage, a.worker, a.t) for a in seen] == [
        ("d_a", "prestage", "gpu0.w0", 0.5),
        ("scratch", "kernels", "gpu0.w0", 0.75),
    ]
