"""predict end to end: determinism, Monte Carlo, host memory, backpressure."""

from __future__ import annotations

import pytest
from conftest import seed_profile, simulate, tiny_profile

from simgpu.config import PipelineConfig
from simgpu.model.montecarlo import predict
from simgpu.sched.registry import resolve_design

GiB = 1 << 30


def test_same_seed_same_run_and_noise_moves_other_seeds():
    a = simulate(seed_profile(), "single-lock", seed=7)[1]
    b = simulate(seed_profile(), "single-lock", seed=7)[1]
    c = simulate(seed_profile(), "single-lock", seed=8)[1]
    assert a.throughput == b.throughput and a.latencies == b.latencies
    assert a.throughput != c.throughput


def test_monte_carlo_reports_oom_risk_with_an_interval():
    prof = seed_profile()
    cfg = PipelineConfig(proofs=3, concurrency=3, gpu_workers_per_device=3)
    agg = predict(prof, cfg, prof.workload(), resolve_design("two-lock"), runs=4).aggregate()
    risk = agg["oom_risk"]
    assert risk["runs"] == 4 and 0 < risk["p"] < 1
    lo, hi = risk["ci95"]
    assert 0.0 < lo < risk["p"] < hi < 1.0
    agg = predict(prof, cfg, prof.workload(), resolve_design("single-lock"), runs=4).aggregate()
    assert agg["oom_risk"]["p"] == 0.0 and agg["oom_risk"]["ci95"][0] == 0.0
    assert agg["proofs"] == {"submitted": 12, "completed": 12, "failed": 0, "not_started": 0}


def test_host_ram_exhaustion_fails_the_proof_with_the_reason():
    # 12 GiB of RAM, 10 resident: one partition's 2 GiB of synthesis output fits, the
    # second does not (the budget is generous, so the daemon lets it try)
    prof = tiny_profile(hardware={"host_ram": "12GiB"})
    result, s = simulate(prof, "single-lock", proofs=1, concurrency=1, total_budget=100 * GiB)
    assert s.failed == 1 and s.host_oom
    (oom,) = s.oom_events
    assert oom["kind"] == "host RAM" and oom["stage"] == "synthesis"
    assert result.host.used == result.host.resident


def test_the_memory_budget_gates_synthesis():
    # a budget of one partition estimate (2 GiB): partitions synthesise one at a time
    prof = tiny_profile()
    _, s = simulate(prof, "single-lock", proofs=1, concurrency=1, total_budget=12 * GiB)
    _, free = simulate(prof, "single-lock", proofs=1, concurrency=1)
    assert s.peak_host == 10 * GiB + 2 * GiB
    assert free.peak_host == 10 * GiB + 4 * GiB
    assert s.makespan > free.makespan


def test_a_bounded_gpu_queue_holds_synthesis_back():
    # tiny profile, serial design, one worker: 2.0 s of GPU-worker time per partition.
    # Two synthesis slots; partitions finish prep at 1.5 (p0, p1) and 3.0 (p2, p3).
    # With room for one queued partition, p2 and p3 block in put holding their slots
    # until the worker takes p1 (3.5) and p2 (5.5): p4 and p5 start synthesis then.
    prof = tiny_profile()

    def synthesis_starts(**config):
        result, _ = simulate(
            prof,
            "serial",
            proofs=1,
            concurrency=1,
            partitions=6,
            partition_workers=2,
            gpu_workers_per_device=1,
            **config,
        )
        return {
            r.partition: r.t
            for r in result.records
            if r.event == "stage_start" and r.fields["stage"] == "synthesis"
        }

    bounded = synthesis_starts(max_gpu_queue_depth=1)
    assert (bounded[4], bounded[5]) == (pytest.approx(3.5), pytest.approx(5.5))
    free = synthesis_starts()
    assert (free[4], free[5]) == (pytest.approx(3.0), pytest.approx(3.0))


def test_open_loop_arrivals():
    _, s = simulate(seed_profile(), "single-lock", proofs=4, arrival_rate=1 / 60)
    assert s.submitted == 4 and s.completed == 4


def test_several_devices_each_get_workers():
    result, s = simulate(seed_profile(), "single-lock", devices=2, proofs=3, concurrency=3)
    used = {r.device for r in result.records if r.event == "stage_start" and r.fields["stage"] == "kernels"}
    assert used == {0, 1}
    assert len(s.busy_frac) == 2 and all(b > 0 for b in s.busy_frac)


@pytest.mark.parametrize(
    "design", ["serial", "single-lock", "two-lock", "two-lock-reserve", "split-finalizer"]
)
def test_every_design_returns_all_vram_at_the_end(design):
    result, s = simulate(seed_profile(), design)
    assert s.deadlock is None and not result.leaks
    assert result.vram[0].used == result.vram[0].resident
    assert s.completed + s.failed == s.submitted
