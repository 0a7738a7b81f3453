"""What ran beside each b_g2_msm (experiments/stream_share.py), worked by hand on a run's
stage spans and on a pool's trace."""

from __future__ import annotations

import pytest
from conftest import load_experiment

stream_share = load_experiment("stream_share")  # registered: its dataclass looks its module up


def test_a_b_g2_msm_is_classed_by_the_other_partitions_device_stages_beside_it():
    spans = [
        # [proof, partition, stage, worker, start, end]
        [0, 0, "kernels", "w0", 0.0, 1.0],  # its own kernels, before it: not beside it
        [0, 0, "b_g2_msm", "w0", 1.0, 1.2],
        [0, 1, "kernels", "w1", 1.1, 1.3],  # another worker's kernels overlap it
        [0, 1, "b_g2_msm", "w1", 1.3, 1.4],
        [0, 2, "prestage", "w0", 1.35, 1.36],  # a prestage overlaps that one
        [0, 2, "kernels", "w0", 1.36, 1.5],
        [0, 2, "b_g2_msm", "w0", 2.0, 2.05],  # nothing else on the device
        [0, 4, "prestage", "w1", 2.9, 3.1],  # another partition's
        [0, 3, "b_g2_msm", "w0", 3.0, 3.05],  # a prestage beside it, no kernels
    ]
    eps = stream_share.span_episodes(spans)
    assert [(round(e.seconds, 3), e.kind) for e in eps] == [
        (0.2, "beside kernels"),
        (0.1, "beside kernels and a prestage"),
        (0.05, "alone"),
        (0.05, "beside a prestage"),
    ]


def test_a_traced_b_g2_msm_gives_its_staging_and_its_longest_wait():
    # (t, thread, stage, op, bytes, ptr, used, total) as AllocTrace writes them
    rows = [
        [0.000, "w0", "b_g2_msm", "malloc", 100, 1, 0, 0],  # bases batch
        [0.001, "w0", "b_g2_msm", "malloc", 50, 2, 0, 0],  # tail bases
        [0.002, "w0", "b_g2_msm", "malloc", 10, 3, 0, 0],  # scalars
        [0.005, "w1", "kernels.h_msm", "malloc", 64, 4, 0, 0],
        [0.010, "w0", "b_g2_msm", "malloc", 80, 5, 0, 0],  # the MSM's first temporary
        [0.045, "w0", "b_g2_msm", "free", 80, 5, 0, 0],  # after a 35 ms wait on the device
        [0.046, "w0", "b_g2_msm", "free", 100, 1, 0, 0],
        [0.050, "w0", "epilogue", "malloc", 1, 6, 0, 0],
    ]
    (ep,) = stream_share.real_episodes(rows)
    assert ep.kind == "beside kernels"
    assert ep.seconds == pytest.approx(0.046)
    assert ep.staging == pytest.approx(0.010)
    assert ep.longest_wait == pytest.approx(0.035)


def test_a_runs_stage_rows_hold_every_stage_of_every_partition_in_order():
    from conftest import simulate, tiny_profile

    from simgpu.report.trace import stage_rows

    result, _ = simulate(tiny_profile(), "single-lock", proofs=2, concurrency=2)
    rows = stage_rows(result.records)
    stages = {}
    for proof, part, stage, worker, start, end in rows:
        assert start <= end
        assert (worker is None) == (stage in ("synthesis", "prep"))  # the GPU worker's stages name it
        stages.setdefault((proof, part), []).append((start, stage))
    assert len(stages) == sum(p.partitions for p in result.proofs)
    pipeline = ["synthesis", "prep", "prestage", "kernels", "b_g2_msm", "epilogue"]
    for spans in stages.values():
        assert [s for _, s in sorted(spans)] == pipeline
