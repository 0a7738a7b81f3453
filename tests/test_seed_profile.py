"""The shipped default, simgpu/profile/profiles/seed-rtx5070ti.toml, against the published story."""

from __future__ import annotations

import pytest
from conftest import seed_profile, simulate

GiB = 1 << 30


def test_two_lock_on_a_16g_card_runs_out_of_vram():
    """cuzk's defaults (2 GPU workers, 10 partition workers), the seed's run (c=3, j=3)."""
    result, s = simulate(seed_profile(), "two-lock", proofs=3, concurrency=3)
    assert s.failed >= 1
    oom = s.oom_events[0]
    assert oom["kind"] == "VRAM" and oom["pool"] == "gpu0"
    assert oom["stage"] == "kernels" and oom["worker"].startswith("gpu0.w")
    assert oom["requested_bytes"] > oom["free_bytes"]
    # it comes from the footprints: a skipped pre-stage allocates d_a + d_bc itself while
    # another worker still holds its 4 GiB d_a (freed only after its b_g2_msm)
    assert oom["buffer"] == "d_bc" and oom["requested_bytes"] == 8 * GiB
    assert oom["free_bytes"] == int(7.5 * GiB)


def test_single_lock_never_fails_on_the_same_card():
    _, s = simulate(seed_profile(), "single-lock", proofs=3, concurrency=3)
    assert s.failed == 0 and s.completed == 3 and not s.oom_events
    assert s.peak_vram[0] <= 16 * GiB


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_single_lock_isolation_throughput_matches_the_published_32_1_s(seed):
    """One GPU worker, 3 proofs one at a time (c=3, j=1), 10 partition workers: 32.1 s/proof."""
    _, s = simulate(
        seed_profile(), "single-lock", seed=seed, proofs=3, concurrency=1, gpu_workers_per_device=1
    )
    assert s.completed == 3
    assert s.throughput == pytest.approx(32.1, rel=0.10)


def test_one_proof_alone_peaks_near_the_published_203_gib_rss():
    _, s = simulate(seed_profile(), "single-lock", proofs=1, concurrency=1)
    assert s.peak_host == pytest.approx(203 * GiB, rel=0.05)


def test_the_reservation_handshake_makes_two_locks_safe():
    _, s = simulate(seed_profile(), "two-lock-reserve", proofs=3, concurrency=3)
    assert s.failed == 0 and not s.oom_events
