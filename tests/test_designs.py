"""Each shipped design on the hand-made tiny profile, where the answer is worked out by hand.

tiny.toml: synthesis 1.0 s, prep 0.5, prestage 0.25, kernels 0.5 (ntt) + 0.5 (msm),
b_g2_msm 0.5, epilogue 0.25; one proof of two partitions.  Both partitions are
synthesised and prepped in parallel and reach the GPU queue at t = 1.5.
VRAM: 10 GiB with 1 GiB resident; pre-stage 3 GiB (d_a 1 + d_bc 2), the ntt phase
frees d_bc, the msm phase holds 1 GiB of scratch.
"""

from __future__ import annotations

import pytest
from conftest import simulate, tiny_profile
from hypothesis import given, settings
from hypothesis import strategies as st

GiB = 1 << 30
ONE_PROOF = {"proofs": 1, "concurrency": 1}


def test_single_lock_serialises_the_gpu_part_and_overlaps_the_cpu_tail():
    # w0: lock 1.5, prestage ->1.75, kernels ->2.75, unlock; b_g2 ->3.25, epilogue ->3.5
    # w1: waits for the lock until 2.75, then 3.0, 4.0, 4.5, 4.75
    result, s = simulate(tiny_profile(), "single-lock", **ONE_PROOF)
    assert s.completed == 1 and s.failed == 0
    assert s.makespan == pytest.approx(4.75)
    assert s.locks["gpu0/gpu"]["wait_s_total"] == pytest.approx(1.25)
    # at most one partition's buffers at a time: resident 1 + pre-stage 3
    assert s.peak_vram[0] == 4 * GiB


def test_serial_holds_the_lock_through_the_cpu_tail():
    # w0 holds the lock 1.5 -> 3.5, w1 3.5 -> 5.5
    _, s = simulate(tiny_profile(), "serial", **ONE_PROOF)
    assert s.makespan == pytest.approx(5.5)
    assert s.locks["gpu0/gpu"]["wait_s_total"] == pytest.approx(2.0)


def test_split_finalizer_frees_a_single_worker_for_the_next_partition():
    # one worker: p0 GPU 1.5->2.75 then its finalizer 2.75->3.5 runs beside
    # p1's GPU part 2.75->4.0, whose finalizer ends at 4.75 ...
    _, s = simulate(tiny_profile(), "split-finalizer", gpu_workers_per_device=1, **ONE_PROOF)
    assert s.makespan == pytest.approx(4.75)
    # ... where single-lock with one worker does the tail before the next partition
    _, s = simulate(tiny_profile(), "single-lock", gpu_workers_per_device=1, **ONE_PROOF)
    assert s.makespan == pytest.approx(5.5)


def test_two_lock_overlaps_prestage_with_compute_when_vram_allows():
    # w1 pre-stages 1.75->2.0 under `mem` while w0 computes; w1 computes 2.75->3.75,
    # b_g2 ->4.25, epilogue ->4.5.  Both pre-stages live at once: 1 + 3 + 3 GiB.
    _, s = simulate(tiny_profile(), "two-lock", **ONE_PROOF)
    assert s.failed == 0
    assert s.makespan == pytest.approx(4.5)
    assert s.peak_vram[0] == 7 * GiB


def test_two_lock_runs_out_of_vram_when_the_prestage_is_skipped():
    # 4.5 GiB: w0 pre-stages (3.5 GiB free is just enough with cuzk's 0.5 GiB margin);
    # w1 finds 0.5 GiB free and skips its pre-stage.  At 2.75 w0 leaves `compute` but
    # keeps d_a until its b_g2_msm is done; w1's kernels allocate d_a (1 GiB, fits)
    # then d_bc (2 GiB) with 1.5 GiB free: VramExhausted.
    result, s = simulate(tiny_profile(hardware={"vram": "4.5GiB"}), "two-lock", **ONE_PROOF)
    assert s.failed == 1 and s.completed == 0
    (oom,) = s.oom_events
    assert oom["stage"] == "kernels" and oom["buffer"] == "d_bc"
    assert oom["worker"] == "gpu0.w1"
    assert oom["requested_bytes"] == 2 * GiB
    assert oom["free_bytes"] == int(1.5 * GiB)
    assert oom["t"] == pytest.approx(2.75)
    assert "VRAM exhausted on gpu0 in stage kernels" in s.failures[0]["reason"]
    # the failed partition gave back what it held: nothing leaks
    assert result.vram[0].used == result.vram[0].resident
    assert not result.leaks


def test_single_lock_and_the_reservation_stay_within_the_same_small_card():
    for design in ("single-lock", "two-lock-reserve"):
        _, s = simulate(tiny_profile(hardware={"vram": "4.5GiB"}), design, **ONE_PROOF)
        assert s.failed == 0 and not s.oom_events, design


def test_two_lock_reserve_serialises_when_only_one_reservation_fits():
    # capacity 3.5 GiB beyond resident, a partition needs 3: w1 waits for w0's buffers
    # to be freed at 2.75 (end of kernels), pre-stages ->3.0, computes ->4.0, tail ->4.75
    _, s = simulate(tiny_profile(hardware={"vram": "4.5GiB"}), "two-lock-reserve", **ONE_PROOF)
    assert s.makespan == pytest.approx(4.75)
    # and overlaps like two-lock where two fit
    _, s = simulate(tiny_profile(), "two-lock-reserve", **ONE_PROOF)
    assert s.makespan == pytest.approx(4.5)


def test_a_retry_after_backoff_completes_the_proof():
    # the OOM at 2.75 as above; after a 1 s back-off the partition is made ready again
    # (its a, b, c died on the device): synthesis 3.75->4.75, prep ->5.25; w0 freed d_a at
    # 3.25, so the pre-stage fits: ->5.5, kernels ->6.5, b_g2 ->7.0, epilogue ->7.25
    _, s = simulate(
        tiny_profile(hardware={"vram": "4.5GiB"}),
        "two-lock",
        retries=1,
        retry_backoff=1.0,
        **ONE_PROOF,
    )
    assert s.failed == 0 and s.completed == 1
    assert len(s.oom_events) == 1
    assert s.makespan == pytest.approx(7.25)


def test_a_proof_with_a_failed_partition_abandons_its_other_partitions():
    # three partitions, 4.5 GiB: p1 fails at 2.75; p2, still queued, is not proved
    result, s = simulate(tiny_profile(hardware={"vram": "4.5GiB"}), "two-lock", partitions=3, **ONE_PROOF)
    assert s.failed == 1
    reasons = [r.fields["reason"] for r in result.records if r.event == "partition_failed"]
    assert any("already failed" in r for r in reasons)
    kernels_runs = [r for r in result.records if r.event == "stage_start" and r.fields["stage"] == "kernels"]
    assert len(kernels_runs) == 2  # p0 and the failing p1; p2 never reached the GPU


# --- why no setting puts the four designs 15% apart (issue #19, item 3) ----------------
#
# With P, K, B, E the prestage, kernels, b_g2_msm and epilogue of a partition and gw GPU
# workers, the lock's cycle bounds single-lock at L = 1/(P + K) partitions a second and
# the workers' cycle at W = gw/(P + K + B + E).  Split-finalizer keeps the lock's cycle
# and frees the worker's (the finalizer takes B + E); two-lock-reserve keeps the worker's
# cycle and shortens the lock's (prestage and kernels under two locks).  So where the
# lock binds single-lock (L <= W) it runs at split-finalizer's pace, and where the
# workers bind it (W < L) at two-lock-reserve's: single-lock always ties one of them.


@settings(max_examples=40, deadline=None)
@given(
    times=st.tuples(*(st.sampled_from([0.05, 0.1, 0.25, 0.5, 0.75, 1.0]) for _ in range(5))),
    gpu_workers=st.integers(1, 3),
    synthesis_workers=st.sampled_from([1, 2, 4, 8]),
    vram=st.sampled_from(["4.5GiB", "10GiB"]),
)
def test_single_lock_ties_split_finalizer_or_two_lock_reserve_whatever_the_stage_times(
    times, gpu_workers, synthesis_workers, vram
):
    prestage, kernels, b_g2, epilogue, synthesis = times
    profile = tiny_profile(
        hardware={"vram": vram},
        **{
            "stages.synthesis": {"time": synthesis},
            "stages.prep": {"time": 0.01},
            "stages.prestage": {"time": prestage},
            "stages.kernels": {
                "phases": [
                    {"name": "ntt", "time": kernels / 2, "release": ["d_bc"]},
                    {"name": "msm", "time": kernels / 2, "transient": ["scratch"]},
                ]
            },
            "stages.b_g2_msm": {"time": b_g2},
            "stages.epilogue": {"time": epilogue},
        },
    )
    pace = {}
    for design in ("single-lock", "split-finalizer", "two-lock-reserve"):
        _, s = simulate(
            profile,
            design,
            proofs=24,
            concurrency=4,
            gpu_workers_per_device=gpu_workers,
            partition_workers=synthesis_workers,
        )
        assert s.failed == 0, design
        pace[design] = s.throughput
    single = pace["single-lock"]
    # within 3%: what 48 partitions' start and end leave of the steady state (the worst of
    # 300 random cases 1.1%; with 24 partitions 2.2%, and one case found at 3.2%)
    assert min(abs(single / pace[d] - 1) for d in ("split-finalizer", "two-lock-reserve")) < 0.03
