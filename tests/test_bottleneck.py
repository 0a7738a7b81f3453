"""Bottleneck shares against numbers worked out by hand, and the seed's conclusion.

The hand-worked cases run the tiny profile (tests/data/tiny.toml: synthesis 1.0 s, prep
0.5, prestage 0.25, kernels 1.0, b_g2_msm 0.5, epilogue 0.25, no noise) with the
single-lock design, one proof; each timeline is written out above its test.  The rules
are report.bottleneck's docstring.
"""

from __future__ import annotations

import pytest
from conftest import seed_profile, simulate, tiny_profile

from simgpu.report.bottleneck import bottleneck
from simgpu.report.intervals import at_least, intersect, subtract, union

GiB = 1 << 30
ONE_PROOF = {"proofs": 1, "concurrency": 1}


def shares_of(profile, **config):
    _, s = simulate(profile, "single-lock", **ONE_PROOF, **config)
    return s.makespan, s.bottleneck


def test_two_workers_behind_one_lock_with_synthesis_on_shared_bandwidth():
    # Synthesis draws 60 of 100 GB/s: two at once oversubscribe it 1.2x, so both take
    # 1.2 s (membw saturated 0-1.2) and, after prep, reach the queue at 1.7, where w0
    # and w1 have waited since 0 (every GPU worker idle 0-1.7).
    # w0: lock 1.7, prestage -> 1.95, kernels -> 2.95, unlock; b_g2 -> 3.45, epi -> 3.7.
    # w1 waits for the lock 1.7 -> 2.95: behind w0's prestage 1.7-1.95 (the lock's),
    # behind its kernels 1.95-2.95 (the GPU's); then prestage -> 3.2, kernels -> 4.2,
    # b_g2 -> 4.7, epilogue -> 4.95 = the makespan.
    prof = tiny_profile(**{"stages.synthesis": {"uses": {"membw": {"demand": 60.0, "bound": 1.0}}}})
    makespan, b = shares_of(prof, partition_workers=2, gpu_workers_per_device=2)
    assert makespan == pytest.approx(4.95)
    assert b["host_membw"] == pytest.approx(1.2 / 4.95)
    assert b["lock gpu0/gpu"] == pytest.approx(0.25 / 4.95)
    assert b["gpu0"] == pytest.approx(1.0 / 4.95)
    assert b["gpu_queue_empty"] == pytest.approx(1.7 / 4.95)
    assert b["synthesis_pool"] == b["host_budget"] == b["gpu_queue_full"] == 0.0


def test_a_small_pool_and_a_small_budget_one_worker():
    # Three partitions; a budget of two (4 GiB of 2 GiB estimates), one synthesis slot,
    # one GPU worker.  p0, p1 take the budget at 0, p2 waits for it.  p0 synthesises
    # 0-1, preps -> 1.5 (slot 0-1.5); p1 waits for the slot 0-1.5, has it 1.5-3.0.
    # The worker: p0 1.5 (prestage, kernels 1.75-2.75, tail) -> 3.5; p0 ends, so p2
    # gets its budget at 3.5 and the free slot (3.5-5.0); p1 3.5 -> 5.5 (kernels
    # 3.75-4.75); p2 5.5 -> 7.5 (kernels 5.75-6.75).  Makespan 7.5.
    # Pool: full with partitions behind it 0-3.0 (p1 for the slot 0-1.5, p2 for its
    # budget with no slot free 1.5-3.0).  Budget: p2 waits with a slot free 3.0-3.5.
    # GPU: its kernels never have a partition waiting (p1 waits 3.0-3.5, p2 5.0-5.5,
    # while the worker does the CPU tail).  The worker idles 0-1.5.
    prof = tiny_profile(workloads={"two": {"partitions": 3, "constraints": 1024}})
    makespan, b = shares_of(prof, partition_workers=1, gpu_workers_per_device=1, total_budget=14 * GiB)
    assert makespan == pytest.approx(7.5)
    assert b["synthesis_pool"] == pytest.approx(3.0 / 7.5)
    assert b["host_budget"] == pytest.approx(0.5 / 7.5)
    assert b["gpu0"] == 0.0
    assert b["gpu_queue_empty"] == pytest.approx(1.5 / 7.5)
    assert b["host_membw"] == 0.0  # the model sees it: never oversubscribed
    assert b["lock gpu0/gpu"] == b["gpu_queue_full"] == 0.0


def test_a_full_gpu_queue_holds_synthesis_back():
    # Three slots: all three partitions reach the queue at 1.5.  The idle worker takes
    # p0, p1 fills the queue (depth 1), p2 waits for room 1.5-3.5, when the worker
    # takes p1.  Worker: p0 1.5-3.5, p1 3.5-5.5, p2 5.5-7.5, kernels 1.75-2.75,
    # 3.75-4.75, 5.75-6.75; a partition waits in the queue 1.5-5.5, so the GPU bounds
    # during the first two kernels (2.0 s), not the last.
    prof = tiny_profile(workloads={"two": {"partitions": 3, "constraints": 1024}})
    makespan, b = shares_of(prof, partition_workers=3, gpu_workers_per_device=1, max_gpu_queue_depth=1)
    assert makespan == pytest.approx(7.5)
    assert b["gpu_queue_full"] == pytest.approx(2.0 / 7.5)
    assert b["gpu0"] == pytest.approx(2.0 / 7.5)
    assert b["gpu_queue_empty"] == pytest.approx(1.5 / 7.5)
    assert b["synthesis_pool"] == b["host_budget"] == 0.0


def test_the_seed_under_sustained_load_is_bound_by_host_bandwidth_and_the_gpu_not_the_locks():
    # The seed's diagnosis: "the bottleneck was not lock contention but GPU kernel time
    # and DDR5 memory bandwidth" (Phase 9, high concurrency).
    _, s = simulate(seed_profile(), "single-lock", proofs=10, concurrency=10)
    b = s.bottleneck
    top = sorted((k for k, v in b.items() if v), key=lambda k: -b[k])
    assert top[:2] == ["host_membw", "gpu0"], b
    assert b["host_membw"] > 0.8 and b["gpu0"] > 0.4
    assert b["lock gpu0/gpu"] < 0.01


def test_without_the_models_saturation_the_other_shares_come_from_the_records_alone():
    # what a real run hands over: the same records, no fluid share to read
    prof = tiny_profile(**{"stages.synthesis": {"uses": {"membw": {"demand": 60.0, "bound": 1.0}}}})
    result, s = simulate(prof, "single-lock", **ONE_PROOF, partition_workers=2)
    real = bottleneck(result.records, (0.0, s.makespan), None, result.config)
    assert real["host_membw"] is None
    assert {k: v for k, v in real.items() if k != "host_membw"} == {
        k: v for k, v in s.bottleneck.items() if k != "host_membw"
    }


def test_interval_sets():
    a = union([(0, 2), (1, 3), (5, 6), (4, 4)])
    assert a == [(0, 3), (5, 6)]
    assert intersect(a, [(2, 5.5)]) == [(2, 3), (5, 5.5)]
    assert subtract(a, [(1, 2), (5, 7)]) == [(0, 1), (2, 3)]
    # a count up and down at one instant never reaches 2
    assert at_least([(0, 1), (1, 1), (1, -1), (2, -1)], 2) == []
    assert at_least([(0, 1), (1, 1), (3, -1), (4, -1)], 2) == [(1, 3)]
