"""Placement policies on several GPUs, mixed cards, and cuzk's all-on-GPU-0 fault, on the model.

The hand-made tiny profile (tests/test_designs.py's docstring): one proof of two
partitions, both ready for the GPU at t = 1.5; each needs 3 GiB at its peak (pre-stage:
d_a 1 + d_bc 2); 1 GiB of every card is resident.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import seed_profile, simulate, tiny_profile

from simgpu.sched.placement import POLICIES, DeviceView, make_placement

GiB = 1 << 30
ONE_PROOF = {"proofs": 1, "concurrency": 1}
DESIGNS = Path(__file__).parent / "designs"
ALL_ON_GPU0 = f"{DESIGNS / 'all_on_gpu0.py'}:all_on_gpu0"
LEAKS = f"{DESIGNS / 'leaky.py'}:keeps_its_buffers"


def placed(result) -> dict[int, int]:
    """partition -> the device the dispatcher placed it on (first placement)."""
    out: dict[int, int] = {}
    for r in result.records:
        if r.event == "partition_placed":
            out.setdefault(r.partition, r.device)
    return out


def ran_on(result) -> dict[int, set[int]]:
    """partition -> the devices its GPU stages ran on (what any policy did)."""
    out: dict[int, set[int]] = {}
    for r in result.records:
        if r.event == "stage_start" and r.fields["stage"] in ("prestage", "kernels"):
            out.setdefault(r.partition, set()).add(r.device)
    return out


# --------------------------------------------------------------------- the rules, one by one


def view(device, idle=1, free=9 * GiB, capacity=9 * GiB, committed=0):
    return DeviceView(device, idle, free, capacity, committed)


def test_available_is_the_lesser_of_free_and_capacity_less_what_is_placed():
    assert view(0, free=9 * GiB, committed=3 * GiB).available == 6 * GiB  # placed, not yet allocated
    assert view(0, free=2 * GiB, committed=3 * GiB).available == 2 * GiB  # held for another reason


def test_best_fit_takes_the_least_room_that_fits_and_breaks_ties_by_index():
    p = make_placement("best-fit")
    devices = [view(0, free=4 * GiB), view(1, free=9 * GiB), view(2, free=3 * GiB)]
    assert p.choose(3 * GiB, devices) == 2
    assert p.choose(4 * GiB, devices) == 0  # gpu2's 3 GiB does not fit
    assert p.choose(3 * GiB, [view(0), view(1)]) == 0
    assert p.choose(3 * GiB, [view(0, idle=0, free=3 * GiB), view(1)]) == 1  # only idle workers
    assert p.choose(10 * GiB, devices) is None  # none fits: wait


def test_most_free_spreads_and_breaks_ties_by_index():
    p = make_placement("most-free")
    assert p.choose(3 * GiB, [view(0, free=4 * GiB), view(1, free=9 * GiB)]) == 1
    assert p.choose(3 * GiB, [view(0), view(1)]) == 0
    assert p.choose(5 * GiB, [view(0, free=4 * GiB), view(1, idle=0)]) is None


def test_round_robin_takes_turns_and_waits_for_the_device_whose_turn_it_is():
    p = make_placement("round-robin")
    assert [p.choose(GiB, [view(0), view(1)]) for _ in range(3)] == [0, 1, 0]
    assert p.choose(GiB, [view(0), view(1, idle=0)]) is None  # gpu1's turn, no worker idle
    assert p.choose(GiB, [view(0), view(1)]) == 1


def test_when_nothing_can_make_room_the_partition_goes_where_most_is_available():
    p = make_placement("best-fit")
    devices = [view(0, free=GiB), view(1, free=2 * GiB), view(2, free=2 * GiB)]
    assert p.choose(3 * GiB, devices) is None
    assert p.overflow(3 * GiB, devices) == 1


def test_every_configured_name_has_its_policy():
    assert set(POLICIES) == {"shared-queue", "round-robin", "best-fit", "most-free"}
    assert not make_placement("shared-queue").dispatches
    assert make_placement("round-robin").turn == 0  # a fresh policy per run


# --------------------------------------------------------------------- on the daemon


@pytest.mark.parametrize(
    "design", ["serial", "single-lock", "two-lock", "two-lock-reserve", "split-finalizer"]
)
def test_one_device_round_robin_is_the_shared_queue(design):
    # one device: a dispatcher that hands each partition to the first idle worker serves
    # them as the shared queue does, to the same timeline
    _, shared = simulate(tiny_profile(), design, proofs=2, concurrency=2, gpu_workers_per_device=2)
    _, rr = simulate(
        tiny_profile(), design, proofs=2, concurrency=2, gpu_workers_per_device=2, placement="round-robin"
    )
    assert rr.makespan == pytest.approx(shared.makespan)
    assert rr.peak_vram == shared.peak_vram and rr.completed == shared.completed == 2


def test_the_shared_queue_puts_both_partitions_on_gpu0_and_round_robin_spreads_them():
    # 2 devices x 2 workers: the workers of gpu0 asked first, so the shared queue gives them
    # both partitions (single-lock serialises them: 4.75 s, as on one card); round-robin and
    # most-free give gpu1 the second, and the two run side by side (1.5 + 1.25 + 0.75 = 3.5)
    cfg = dict(ONE_PROOF, devices=2, gpu_workers_per_device=2)
    result, s = simulate(tiny_profile(), "single-lock", **cfg)
    assert ran_on(result) == {0: {0}, 1: {0}}
    assert s.makespan == pytest.approx(4.75) and s.busy_frac[1] == 0
    for policy in ("round-robin", "most-free"):
        result, s = simulate(tiny_profile(), "single-lock", placement=policy, **cfg)
        assert placed(result) == {0: 0, 1: 1} == {p: min(d) for p, d in ran_on(result).items()}, policy
        assert s.makespan == pytest.approx(3.5) and s.peak_vram == [4 * GiB, 4 * GiB], policy
    # best-fit packs: gpu0 still has 6 of 9 GiB for the second partition
    result, s = simulate(tiny_profile(), "single-lock", placement="best-fit", **cfg)
    assert placed(result) == {0: 0, 1: 0} and s.makespan == pytest.approx(4.75)


def test_mixed_cards_where_it_runs_out_of_memory_depends_on_the_placement():
    # a 4.5 GiB card beside a 10 GiB one, two-lock, two workers a card
    cfg = dict(ONE_PROOF, devices=2, gpu_workers_per_device=2, vram=(int(4.5 * GiB), 10 * GiB))
    # the shared queue: both on gpu0, the small card, where two-lock's race runs out of VRAM
    # (test_designs: the skipped pre-stage's kernels at t = 2.75)
    result, s = simulate(tiny_profile(), "two-lock", **cfg)
    assert [led.capacity for led in result.vram] == [int(4.5 * GiB), 10 * GiB]
    (oom,) = s.oom_events
    assert oom["pool"] == "gpu0" and oom["stage"] == "kernels" and oom["t"] == pytest.approx(2.75)
    # best-fit: the first on the small card (3.5 GiB available, the least that fits), the
    # second where it fits beside it: only on gpu1.  No OOM; both run at once.
    result, s = simulate(tiny_profile(), "two-lock", placement="best-fit", **cfg)
    assert placed(result) == {0: 0, 1: 1} and not s.oom_events and s.completed == 1
    assert s.peak_vram == [4 * GiB, 4 * GiB] and s.makespan == pytest.approx(3.5)
    # most-free: both on the big card (9 GiB, then 6 GiB available), pre-stages side by side
    result, s = simulate(tiny_profile(), "two-lock", placement="most-free", **cfg)
    assert placed(result) == {0: 1, 1: 1} and not s.oom_events
    assert s.peak_vram == [1 * GiB, 7 * GiB] and s.makespan == pytest.approx(4.5)


def test_best_fit_waits_when_nothing_fits_while_a_worker_is_busy():
    # one 4.5 GiB card holds one partition: two-lock's race (an OOM with the shared queue)
    # cannot happen, the second partition is placed when the first one's worker is done
    # (two-lock: 1.5 + 0.25 + 1.0 + 0.5 + 0.25 = 3.5), and ends at 3.5 + 2.0 = 5.5
    small = tiny_profile(hardware={"vram": "4.5GiB"})
    _, s = simulate(small, "two-lock", gpu_workers_per_device=2, **ONE_PROOF)
    assert len(s.oom_events) == 1
    result, s = simulate(small, "two-lock", gpu_workers_per_device=2, placement="best-fit", **ONE_PROOF)
    assert not s.oom_events and s.completed == 1 and s.makespan == pytest.approx(5.5)
    (second,) = [r for r in result.records if r.event == "partition_placed" and r.partition == 1]
    assert second.t == pytest.approx(3.5) and second.fields["available"] == int(3.5 * GiB)


def test_when_every_worker_is_idle_and_nothing_fits_it_is_placed_anyway_and_the_ledger_decides():
    # the design keeps its pre-staged d_a (1 GiB; the kernels released d_bc) for ever:
    # after the first partition 2.5 GiB are free, less than the 3 GiB needed, and no worker
    # is busy, so waiting could never end; the second partition is placed anyway and its
    # pre-stage runs out of VRAM (d_bc: 2 GiB asked, 1.5 free)
    small = tiny_profile(hardware={"vram": "4.5GiB"})
    result, s = simulate(small, LEAKS, gpu_workers_per_device=1, placement="best-fit", **ONE_PROOF)
    (oom,) = s.oom_events
    assert oom["stage"] == "prestage" and oom["partition"] == 1
    (second,) = [r for r in result.records if r.event == "partition_placed" and r.partition == 1]
    assert second.fields["available"] == int(2.5 * GiB) < second.fields["need"] == 3 * GiB
    assert oom["buffer"] == "d_bc" and oom["free_bytes"] == int(1.5 * GiB)
    assert result.leaks


# --------------------------------------------------------------------- cuzk's fault


def test_cuzk_all_on_gpu0_does_all_the_work_on_gpu0_and_runs_out_where_single_lock_does_not():
    # the seed: porep-32g on two 16 GiB cards, each partition 12 GiB at its peak
    result, fault = simulate(seed_profile(), ALL_ON_GPU0, devices=2)
    assert {d for ds in ran_on(result).values() for d in ds} == {0}
    assert fault.busy_frac[0] > 0 and fault.busy_frac[1] == 0
    assert fault.peak_vram[1] == result.vram[1].resident  # gpu1 never held a byte of work
    assert fault.oom_events and {o["pool"] for o in fault.oom_events} == {"gpu0"}
    # both locks were taken, by workers of both devices, while all ran on gpu0
    assert fault.locks["gpu0/gpu"]["acquisitions"] and fault.locks["gpu1/gpu"]["acquisitions"]
    result, right = simulate(seed_profile(), "single-lock", devices=2)
    assert not right.oom_events and right.failed == 0
    assert right.busy_frac[0] > 0 and right.busy_frac[1] > 0


def test_on_one_device_the_fault_is_single_lock():
    _, fault = simulate(seed_profile(), ALL_ON_GPU0)
    _, right = simulate(seed_profile(), "single-lock")
    assert fault.makespan == pytest.approx(right.makespan) and fault.peak_vram == right.peak_vram


def test_a_card_too_small_for_one_partition_beside_one_that_fits():
    # a mixed machine may hold a card too small for the workload: the shared queue sends
    # work there and it runs out of memory; best-fit keeps every partition off it
    cfg = dict(ONE_PROOF, devices=2, gpu_workers_per_device=1, vram=(3 * GiB, 10 * GiB))
    _, s = simulate(tiny_profile(), "single-lock", **cfg)
    assert s.failed == 1 and {o["pool"] for o in s.oom_events} == {"gpu0"}
    result, s = simulate(tiny_profile(), "single-lock", placement="best-fit", **cfg)
    assert s.completed == 1 and not s.oom_events and placed(result) == {0: 1, 1: 1}
