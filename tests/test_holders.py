"""Every OOM lists what was live at that instant: each allocation's holder, buffer, bytes,
stage and time, and what the holder was doing; the ledgers and devices that keep them."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import simulate, tiny_profile

from simgpu.errors import VramExhausted
from simgpu.ledger import holder_scope, vram_ledger
from simgpu.prover.cpu_device import CpuDevice
from simgpu.prover.device import DeviceBuffer, LiveBuffers

GiB = 1 << 30


def test_an_oom_names_every_live_allocation_the_largest_first():
    t = [0.0]
    led = vram_ledger(0, 16 * GiB, resident=GiB // 2, clock=lambda: t[0])
    t[0] = 25.0
    led.alloc(4 * GiB, "d_a", stage="prestage", worker="gpu0.w0", proof=0, partition=6)
    led.alloc(8 * GiB, "d_bc", stage="prestage", worker="gpu0.w0", proof=0, partition=6)
    t[0] = 37.0
    with pytest.raises(VramExhausted) as e:
        led.alloc(4 * GiB, "d_a", stage="kernels", worker="gpu0.w1", proof=0, partition=7)
    assert e.value.holders == [
        {
            "worker": "gpu0.w0",
            "proof": 0,
            "partition": 6,
            "buffer": "d_bc",
            "bytes": 8 * GiB,
            "stage": "prestage",
            "t": 25.0,
        },
        {
            "worker": "gpu0.w0",
            "proof": 0,
            "partition": 6,
            "buffer": "d_a",
            "bytes": 4 * GiB,
            "stage": "prestage",
            "t": 25.0,
        },
    ]
    assert e.value.as_dict()["holders"] == e.value.holders
    # SimPy re-creates an exception from its args: the holders survive that
    again = type(e.value)(*e.value.args)
    assert again.holders == e.value.holders and str(again) == str(e.value)


def test_allocations_made_deep_in_a_stage_are_booked_for_the_threads_holder():
    led = vram_ledger(0, GiB)
    led.alloc(100, "srs")  # set-up: nobody's partition
    with holder_scope(lambda: 3.5, stage="kernels", worker="gpu0.w1", proof=2, partition=1):
        led.alloc(200, "msm_temporaries")
    (mine, setup) = led.holders()
    assert mine == {
        "worker": "gpu0.w1",
        "proof": 2,
        "partition": 1,
        "buffer": "msm_temporaries",
        "bytes": 200,
        "stage": "kernels",
        "t": 3.5,
    }
    assert setup["proof"] is None and setup["t"] is None


def test_the_cpu_device_reports_its_own_live_buffers_with_their_holders():
    dev = CpuDevice(vram_limit=10_000)
    with holder_scope(lambda: 1.0, stage="prestage", worker="gpu0.w0", proof=0, partition=0):
        kept = dev.alloc("d_a", (500,), np.uint32)  # 2000 bytes
    with holder_scope(lambda: 2.0, stage="kernels", worker="gpu0.w1", proof=0, partition=1):
        with pytest.raises(VramExhausted) as e:
            dev.alloc("d_bc", (2500,), np.uint32)  # 10000 bytes: only 8000 free
    assert [(h["buffer"], h["worker"], h["t"]) for h in e.value.holders] == [("d_a", "gpu0.w0", 1.0)]
    dev.free(kept)
    assert dev.ledger.holders() == []


def test_a_devices_record_of_live_buffers_follows_alloc_and_free_and_keeps_nothing_alive():
    live = LiveBuffers()
    big = DeviceBuffer("d_bc", None, 800, device=None)
    small = DeviceBuffer("d_a", None, 400, device=None)
    with holder_scope(lambda: 7.0, stage="prestage", worker="gpu0.w2", proof=1, partition=3):
        live.add(small)
        live.add(big)
    assert [(h["buffer"], h["bytes"], h["partition"], h["t"]) for h in live.holders()] == [
        ("d_bc", 800, 3, 7.0),
        ("d_a", 400, 3, 7.0),
    ]
    live.discard(small)
    assert [h["buffer"] for h in live.holders()] == ["d_bc"]
    del big  # dropped without a free: the record does not keep it (or its VRAM) alive
    assert live.holders() == []


def test_the_model_says_what_each_holder_was_doing_and_under_which_locks():
    # tiny, 4.5 GiB, two-lock (test_designs): w0 pre-stages d_a + d_bc under `mem` at 1.5,
    # computes 1.75-2.75 (d_bc dies in the ntt), lets go of `compute` at 2.75 and keeps d_a
    # through its b_g2_msm.  w1 skipped its pre-stage, waited for `compute` from 1.75,
    # gets it at 2.75; its kernels allocate d_a (fits) then d_bc: out of memory.
    _, s = simulate(tiny_profile(hardware={"vram": "4.5GiB"}), "two-lock", proofs=1, concurrency=1)
    (oom,) = s.oom_events
    theirs, mine = oom["holders"]
    assert (theirs["worker"], theirs["buffer"], theirs["bytes"], theirs["stage"]) == (
        "gpu0.w0",
        "d_a",
        GiB,
        "prestage",
    )
    assert theirs["t"] == pytest.approx(1.5)
    assert theirs["doing"].startswith("in stage b_g2_msm") and theirs["waits_for"] is None
    assert theirs["locks_held"] == [] and theirs["allocated_under"] == ["gpu0/mem"]
    assert theirs["last_released"] == {"lock": "gpu0/compute", "t": pytest.approx(2.75)}
    assert (mine["worker"], mine["buffer"], mine["stage"]) == ("gpu0.w1", "d_a", "kernels")
    assert mine["locks_held"] == [
        {"lock": "gpu0/compute", "since": pytest.approx(2.75), "waited": pytest.approx(1.0)}
    ]
    assert oom["locks_held"] == mine["locks_held"]
    # what was live, with what is resident, is what the pool held
    assert oom["capacity_bytes"] - oom["free_bytes"] == GiB + sum(h["bytes"] for h in oom["holders"])
