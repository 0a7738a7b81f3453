"""Fluid sharing of host memory bandwidth, cores and GPUs (model.contention)."""

from __future__ import annotations

import pytest
import simpy

from simgpu.errors import UserError
from simgpu.model.contention import FluidShare


def finish_times(jobs, capacity, bursty=frozenset()):
    """jobs: (start, work, uses).  Returns each job's finish time."""
    env = simpy.Environment()
    share = FluidShare(env, capacity, bursty=frozenset(bursty))
    done = {}

    def job(i, start, work, uses):
        yield env.timeout(start)
        yield share.submit(work, uses, f"job{i}")
        done[i] = env.now

    for i, (start, work, uses) in enumerate(jobs):
        env.process(job(i, start, work, uses))
    env.run()
    return [done[i] for i in range(len(jobs))]


def test_two_kernels_on_one_gpu_share_it_evenly():
    gpu = (("gpu", 0), 1.0, 1.0)
    assert finish_times([(0, 1.0, (gpu,)), (0, 1.0, (gpu,))], {("gpu", 0): 1.0}) == pytest.approx([2.0, 2.0])


def test_a_job_joining_halfway_slows_only_the_overlap():
    # job 0 runs alone for 0.5 s (half done), then both share: job 0's last 0.5 s of
    # work takes 1.0 s -> ends at 1.5; job 1 did 0.5 by then, finishes its last 0.5 alone.
    gpu = (("gpu", 0), 1.0, 1.0)
    assert finish_times([(0, 1.0, (gpu,)), (0.5, 1.0, (gpu,))], {("gpu", 0): 1.0}) == pytest.approx(
        [1.5, 2.0]
    )


def test_only_the_bound_fraction_stretches():
    # 30% memory-bound, bandwidth oversubscribed 2x: 0.7 + 0.3 * 2 = 1.3
    mem = ("membw", 100.0, 0.3)
    t = finish_times([(0, 1.0, (mem,)), (0, 1.0, (mem,))], {"membw": 100.0})
    assert t == pytest.approx([1.3, 1.3])


def test_no_slowdown_below_capacity():
    mem = ("membw", 40.0, 0.9)
    assert finish_times([(0, 2.0, (mem,)), (0, 1.0, (mem,))], {"membw": 100.0}) == pytest.approx([2.0, 1.0])


def test_interpreter_bursts_collide_even_below_capacity():
    # Two stages each holding the interpreter lock 40% of the time: together they ask
    # for 0.8 of it, yet each one's bursts meet the other's 40% of the time: 0.6 + 0.4 * 1.4.
    gil = ("gil", 0.4, 0.4)
    t = finish_times([(0, 1.0, (gil,)), (0, 1.0, (gil,))], {"gil": 1.0}, bursty={"gil"})
    assert t == pytest.approx([1.16, 1.16])
    # a stage alone is never slowed by its own bursts
    assert finish_times([(0, 1.0, (gil,))], {"gil": 1.0}, bursty={"gil"}) == pytest.approx([1.0])
    # fully interpreter-bound stages take turns, as on a GPU
    whole = ("gil", 1.0, 1.0)
    assert finish_times([(0, 1.0, (whole,))] * 2, {"gil": 1.0}, bursty={"gil"}) == pytest.approx([2.0, 2.0])


def test_results_coming_back_share_the_drivers_one_channel():
    """Four syntheses ending together: computing in parallel, their 0.1 s trips back
    through the driver's result thread take turns (fluid: all four end at 1.4 s)."""
    import tomllib

    from conftest import DATA, simulate

    from simgpu.profile import profile_from_dict

    doc = tomllib.loads((DATA / "tiny.toml").read_text())
    del doc["stages"]["synthesis"]["time"]
    doc["stages"]["synthesis"]["phases"] = [
        {"name": "compute", "time": 1.0},
        {"name": "transfer", "time": 0.1, "uses": {"driver_rx": {"demand": 1.0, "bound": 1.0}}},
    ]
    prof = profile_from_dict(doc)
    result, _ = simulate(prof, "single-lock", proofs=1, concurrency=1, partition_workers=4)
    ends = sorted(r.t for r in result.records if r.event == "stage_end" and r.fields["stage"] == "synthesis")
    starts = sorted(
        r.t for r in result.records if r.event == "stage_start" and r.fields["stage"] == "synthesis"
    )
    assert len(ends) == prof.workload().partitions >= 2
    assert ends[-1] - starts[0] == pytest.approx(1.0 + 0.1 * len(ends))


def test_a_share_of_the_interpreter_can_change_with_size():
    from conftest import tiny_profile

    share = {"law": "512/n"}
    prof = tiny_profile(
        **{
            "stages.kernels": {
                "uses": {
                    "gpu": {"demand": 1.0, "bound": {"law": "1 - 512/n"}},
                    "gil": {"demand": share, "bound": share},
                }
            }
        }
    )
    small = prof.resolve(1024).stages["kernels"].phases[0].uses
    big = prof.resolve(8192).stages["kernels"].phases[0].uses
    assert small["gil"].bound == pytest.approx(0.5) and big["gil"].bound == pytest.approx(1 / 16)
    assert small["gpu"].bound + small["gil"].bound == pytest.approx(1.0)
    # Below the sizes the laws were meant for, the GPU's share would be negative: that is
    # an error naming the law, not a share quietly clamped to 0.
    with pytest.raises(UserError, match=r"uses.gpu.bound: law '1 - 512/n' gives -1 at n=256"):
        prof.resolve(256)
    with pytest.raises(UserError, match="add up to more than 1"):
        tiny_profile(**{"stages.kernels": {"uses": {"gpu": {"bound": 0.8}, "gil": {"bound": 0.3}}}})


def test_seed_profile_reproduces_the_published_contention(tmp_path):
    """The sheet: synthesis 35.5 s with 10 at once -> 46-49 s with 20; b_g2_msm 0.38 s
    alone -> 0.48 s under 10 syntheses; prep 1.7 -> 1.9 s."""
    from conftest import seed_profile

    prof = seed_profile()
    st = prof.resolve(prof.workload().constraints).stages
    cap = {"membw": prof.hardware.membw_gbps, "cores": float(prof.hardware.cpu_cores)}

    def uses(name):
        return tuple((r, u.demand, u.bound) for r, u in st[name].phases[0].uses.items())

    syn, t_syn = uses("synthesis"), st["synthesis"].seconds
    ten = finish_times([(0, t_syn, syn)] * 10, cap)[0]
    twenty = finish_times([(0, t_syn, syn)] * 20, cap)[0]
    assert 46 / 35.5 <= twenty / ten <= 49 / 35.5
    loaded = finish_times([(0, t_syn, syn)] * 10 + [(0, st["b_g2_msm"].seconds, uses("b_g2_msm"))], cap)[-1]
    assert loaded == pytest.approx(0.48, rel=0.03)
    loaded = finish_times([(0, t_syn, syn)] * 10 + [(0, st["prep"].seconds, uses("prep"))], cap)[-1]
    assert loaded == pytest.approx(1.9, rel=0.03)
