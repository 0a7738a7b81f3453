"""Fluid sharing of host memory bandwidth, cores and GPUs (model.contention)."""

from __future__ import annotations

import pytest
import simpy
from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from simgpu.errors import UserError
from simgpu.model.contention import FluidShare, Thrash, shared_factor


def finish_times(jobs, capacity, bursty=frozenset(), scaling=frozenset(), **laws):
    """jobs: (start, work, uses).  Returns each job's finish time.  `laws`: FluidShare's
    through / thrash / conserved."""
    env = simpy.Environment()
    share = FluidShare(env, capacity, bursty=frozenset(bursty), scaling=frozenset(scaling), **laws)
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
    # the proportional law: 30% memory-bound, bandwidth oversubscribed 2x: 0.7 + 0.3 * 2 = 1.3
    mem = ("membw", 100.0, 0.3)
    t = finish_times([(0, 1.0, (mem,)), (0, 1.0, (mem,))], {"membw": 100.0})
    assert t == pytest.approx([1.3, 1.3])


def test_a_conserved_resource_delivers_its_capacity_and_no_more():
    """The same two jobs under the conserved law: each draws 100 GB/s at full speed from
    a 100 GB/s system, so together they can only run at half speed: 200 GB of work at
    100 GB/s is 2 s, however small their bound fraction (f solves 2*100/(0.7+0.3f) = 100,
    f = 13/3, stretch 0.7 + 0.3 * 13/3 = 2)."""
    mem = ("membw", 100.0, 0.3)
    t = finish_times([(0, 1.0, (mem,))] * 2, {"membw": 100.0}, conserved=frozenset({"membw"}))
    assert t == pytest.approx([2.0, 2.0])
    # below capacity nothing changes
    light = ("membw", 40.0, 0.3)
    t = finish_times([(0, 1.0, (light,))] * 2, {"membw": 100.0}, conserved=frozenset({"membw"}))
    assert t == pytest.approx([1.0, 1.0])


def test_conserved_sharing_draws_exactly_the_capacity_whatever_the_bounds():
    """Jobs with different bound fractions stretch by one common factor f, at which what
    they draw (demand x speed) adds up to the capacity: sum d / (1 - m + m f) = C."""
    draws = [(50.0, 1.0), (75.0, 0.5), (30.0, 0.2)]
    f = shared_factor(draws, 100.0)
    assert sum(d / (1 - m + m * f) for d, m in draws) == pytest.approx(100.0)
    # 50/f + 150/(1 + f) = 100 without the third job: f^2 - f - 1/2 = 0, f = (1 + sqrt 3) / 2
    assert shared_factor(draws[:2], 100.0) == pytest.approx((1 + 3**0.5) / 2)
    # a job bound by nothing still draws: it leaves less room for the others
    assert shared_factor([(50.0, 1.0), (50.0, 0.0)], 80.0) == pytest.approx(50 / 30)


def test_past_saturation_aggregate_throughput_flattens_then_falls():
    """k fully bandwidth-bound jobs of demand 50 on 100 GB/s, 1 s of work each.  Conserved:
    the makespan is 0.5 k s past saturation (k >= 2), throughput 2 jobs/s, flat.  With a
    thrashing loss of 0.5 past a knee at the capacity: at k = 4 the load is 2x, the
    effective capacity 100 / (1 + 0.5 * (2 - 1)) = 66.7 GB/s, so 4 jobs take 200/66.7 = 3 s:
    throughput falls from 2 to 4/3 jobs/s."""
    job = ("membw", 50.0, 1.0)
    cons = frozenset({"membw"})
    assert finish_times([(0, 1.0, (job,))] * 2, {"membw": 100.0}, conserved=cons)[0] == pytest.approx(1.0)
    assert finish_times([(0, 1.0, (job,))] * 4, {"membw": 100.0}, conserved=cons)[0] == pytest.approx(2.0)
    thrash = {"membw": Thrash(knee=1.0, loss=0.5)}
    t2 = finish_times([(0, 1.0, (job,))] * 2, {"membw": 100.0}, conserved=cons, thrash=thrash)[0]
    t4 = finish_times([(0, 1.0, (job,))] * 4, {"membw": 100.0}, conserved=cons, thrash=thrash)[0]
    assert t2 == pytest.approx(1.0)  # at the knee: no loss yet
    assert t4 == pytest.approx(3.0)
    assert 4 / t4 < 2 / t2
    # the same loss past a knee at twice the capacity leaves k = 4 alone
    late = {"membw": Thrash(knee=2.0, loss=0.5)}
    assert finish_times([(0, 1.0, (job,))] * 4, {"membw": 100.0}, conserved=cons, thrash=late)[
        0
    ] == pytest.approx(2.0)


def test_a_copy_runs_at_the_slower_of_its_link_and_host_memory():
    """A 1 s copy drawing 10 GB/s over a 20 GB/s link, out of a 100 GB/s host memory that
    a synthesis (190 GB/s, fully bound) already oversubscribes: the host memory runs at
    (190 + 10) / 100 = 2x, the link has room, so the copy takes 2 s.  Without the link's
    draw on host memory (no `through`) it would not notice the synthesis at all."""
    cap = {"membw": 100.0, ("h2d", 0): 20.0}
    copy = (("h2d", 0), 10.0, 1.0)
    syn = ("membw", 190.0, 1.0)
    jobs = [(0, 1.0, (copy,)), (0, 10.0, (syn,))]
    through = {("h2d", 0): "membw"}
    t = finish_times(jobs, cap, through=through, conserved=frozenset(cap))
    assert t[0] == pytest.approx(2.0)
    assert finish_times(jobs, cap)[0] == pytest.approx(1.0)


def test_no_slowdown_below_capacity():
    mem = ("membw", 40.0, 0.9)
    assert finish_times([(0, 2.0, (mem,)), (0, 1.0, (mem,))], {"membw": 100.0}) == pytest.approx([2.0, 1.0])


def test_the_interpreter_lock_is_handed_over_ask_by_ask():
    """A launch loop asks for the lock back 10 times a millisecond, and beside a stage
    of pure Python each ask waits 5 ms (that stage lets go only when made to): while the
    Python stage runs (0.1 s) the loop goes at 1 / (1 + 10 x 5) = 1/51 of its pace, then
    alone.  The Python stage, asking almost never, is not slowed by the loop's
    microsecond holds.  Two launch loops, each making the other's asks wait 2 us, slow
    each other by 1 + 10 x 0.002 = 1.02."""
    gil = {"gil": 1.0}  # ms
    loop = ("gil", 0.002, 10.0)  # (resource, the wait it makes others' asks meet in ms, asks a ms)
    python = ("gil", 5.0, 0.0)
    t_loop, t_python = finish_times([(0, 1.0, (loop,)), (0, 0.1, (python,))], gil, scaling={"gil"})
    assert t_python == pytest.approx(0.1)
    assert t_loop == pytest.approx(0.1 + (1.0 - 0.1 / 51))
    assert finish_times([(0, 1.0, (loop,))] * 2, gil, scaling={"gil"}) == pytest.approx([1.02, 1.02])
    # a stage alone never waits for its own holds
    assert finish_times([(0, 1.0, (loop,))], gil, scaling={"gil"}) == pytest.approx([1.0])


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


def test_a_use_can_change_with_size():
    from conftest import tiny_profile

    share = {"law": "512/n"}
    prof = tiny_profile(
        **{
            "stages.kernels": {
                "uses": {
                    "gpu": {"demand": 1.0, "bound": {"law": "1 - 512/n"}},
                    "cores": {"demand": 1.0, "bound": share},
                    # the interpreter lock's asks a millisecond: a rate, not a share
                    "gil": {"demand": 0.01, "bound": {"law": "n/512"}},
                }
            }
        }
    )
    small = prof.resolve(1024).stages["kernels"].phases[0].uses
    big = prof.resolve(8192).stages["kernels"].phases[0].uses
    assert small["cores"].bound == pytest.approx(0.5) and big["cores"].bound == pytest.approx(1 / 16)
    assert small["gpu"].bound + small["cores"].bound == pytest.approx(1.0)
    assert small["gil"].bound == pytest.approx(2.0) and big["gil"].bound == pytest.approx(16.0)
    # Below the sizes the laws were meant for, the GPU's share would be negative: that is
    # an error naming the law, not a share quietly clamped to 0.
    with pytest.raises(UserError, match=r"uses.gpu.bound: law '1 - 512/n' gives -1 at n=256"):
        prof.resolve(256)
    with pytest.raises(UserError, match="add up to more than 1"):
        tiny_profile(**{"stages.kernels": {"uses": {"gpu": {"bound": 0.8}, "cores": {"bound": 0.3}}}})
    # asks a millisecond may pass 1; a share may not
    tiny_profile(**{"stages.kernels": {"uses": {"gil": {"demand": 0.01, "bound": 3.0}}}})
    with pytest.raises(UserError, match=r"cores: demand >= 0 and 0 <= bound <= 1 required"):
        tiny_profile(**{"stages.kernels": {"uses": {"cores": {"demand": 1.0, "bound": 3.0}}}})


def test_seed_profile_reproduces_the_published_contention():
    """The sheet: 10 syntheses at once take 35.5 s, 1.34x one alone (synthesis slows by
    30-38% with 10 workers); b_g2_msm 0.38 s alone -> 0.48 s beside them; prep 1.7 -> 1.9 s.
    The seed profile shares host memory by the conserved law, which these are solved in."""
    from conftest import seed_profile

    from simgpu.model import hostmem

    prof = seed_profile()
    st = prof.resolve(prof.workload().constraints).stages
    cap = {"membw": prof.hardware.membw_gbps}
    laws = dict(conserved=hostmem.shared_by(prof, 1, "conserved"), thrash=hostmem.thrashing(prof, 1))

    def uses(name):
        return tuple((r, u.demand, u.bound) for r, u in st[name].phases[0].uses.items())

    syn, t_syn = uses("synthesis"), st["synthesis"].seconds
    assert finish_times([(0, t_syn, syn)], cap, **laws)[0] == pytest.approx(t_syn)
    ten = finish_times([(0, t_syn, syn)] * 10, cap, **laws)[0]
    assert ten == pytest.approx(35.5, rel=0.01) and ten / t_syn == pytest.approx(1.34, rel=0.01)
    loaded = finish_times(
        [(0, t_syn, syn)] * 10 + [(0, st["b_g2_msm"].seconds, uses("b_g2_msm"))], cap, **laws
    )
    assert loaded[-1] == pytest.approx(0.48, rel=0.01)
    loaded = finish_times([(0, t_syn, syn)] * 10 + [(0, st["prep"].seconds, uses("prep"))], cap, **laws)
    assert loaded[-1] == pytest.approx(1.9, rel=0.01)


def test_busy_cores_press_on_each_other_below_saturation():
    """The tiny profile's two syntheses of a proof, each keeping a core of 8 busy and 0.5
    sensitive to the others' (``pressure``): together each takes 1 + 0.5 * 1 / 8 of its
    1 s, though 2 busy cores are far below the 8 there are; alone, 1 s."""
    from conftest import simulate, tiny_profile

    prof = tiny_profile(**{"stages.synthesis": {"uses": {"pressure": {"demand": 1.0, "bound": 0.5}}}})
    for workers, want in ((2, 1.0625), (1, 1.0)):
        result, _ = simulate(prof, "single-lock", proofs=1, concurrency=1, partition_workers=workers)
        got = [
            r.fields["seconds"]
            for r in result.records
            if r.event == "stage_end" and r.fields["stage"] == "synthesis"
        ]
        assert got == pytest.approx([want, want]), workers


def test_pressure_scales_a_gpu_bound_job_instead_of_taking_a_share_of_it():
    """Two launch loops wholly bound to one GPU (bound 1 each), each also 0.5 sensitive to
    busy cores, beside a load keeping 8 of 16 cores busy: the GPU halves their speed and
    the pressure slows what is left by 1 + 0.5 * (8 + 1) / 16 (the others: the load and
    the other loop's core), so each 1 s takes 2 * 1.28125 s.  Were the sensitivity a
    share of the time, it would have had to squeeze the GPU's bound to 0.5."""
    cap = {("gpu", 0): 1.0, "pressure": 16.0}
    loop = (("gpu", 0), 1.0, 1.0), ("pressure", 1.0, 0.5)
    load = (("pressure", 8.0, 0.0),)
    laws = dict(bursty={"pressure"}, scaling=frozenset({"pressure"}))
    got = finish_times([(0, 1.0, loop), (0, 1.0, loop), (0, 10.0, load)], cap, **laws)
    assert got[:2] == pytest.approx([2 * 1.28125] * 2)
    alone = finish_times([(0, 1.0, loop)], cap, **laws)
    assert alone == pytest.approx([1.0])


def test_a_result_coming_back_slows_the_driver_stages_while_it_is_on_its_way():
    """`handoff` (capacity 1) follows the pressure law: a kernels stage wholly bound to
    the GPU (1 s of work), 0.5 sensitive to results coming back, started with one
    result's 0.5 s way back (demand 1, bound 0: results do not slow each other here, the
    driver's reader does that).  While it is on its way the kernels run at 1 / 1.5: a
    third of their work by 0.5 s, the rest alone, done at 0.5 + 2/3 s.  Two results at
    once slow them twice as much, 1 / (1 + 0.5 * 2); the results themselves never slow."""
    cap = {("gpu", 0): 1.0, "handoff": 1.0}
    kernels = (("gpu", 0), 1.0, 1.0), ("handoff", 0.0, 0.5)
    trip = (("handoff", 1.0, 0.0),)
    laws = dict(bursty={"handoff"}, scaling=frozenset({"handoff"}))
    got = finish_times([(0, 1.0, kernels), (0, 0.5, trip)], cap, **laws)
    assert got == pytest.approx([0.5 + 2 / 3, 0.5])
    got = finish_times([(0, 1.0, kernels), (0, 0.5, trip), (0, 0.5, trip)], cap, **laws)
    assert got == pytest.approx([0.5 + 0.75, 0.5, 0.5])  # a quarter done by 0.5 s
    assert finish_times([(0, 1.0, kernels)], cap, **laws) == pytest.approx([1.0])


_use = st.tuples(st.floats(0.0, 4.0), st.floats(0.0, 1.0))


@settings(max_examples=200, deadline=None)
@given(
    gpu=_use,
    sensitivity=st.floats(0.0, 1.0),
    own=st.floats(0.0, 4.0),
    others=st.floats(0.0, 32.0),
    more=st.floats(0.0, 32.0),
    factor=st.floats(1.0, 10.0),
)
def test_pressure_never_speeds_a_job_and_grows_with_load(gpu, sensitivity, own, others, more, factor):
    """Whatever else stretches a job, busy cores around it never make it faster: its
    stretch is at least the stretch without pressure, and more busy cores never shrink
    it.  Pressure takes nothing from the job's other bounds (free_fraction)."""
    from simgpu.model.contention import free_fraction, job_stretch

    cap = {"gpu": 1.0, "pressure": 16.0}
    uses = (("gpu", gpu[0], gpu[1]), ("pressure", own, sensitivity))
    free = free_fraction(uses, {"pressure"})
    assert free == pytest.approx(1.0 - gpu[1])

    def stretch(load_p: float) -> float:
        load = {"gpu": gpu[0], "pressure": own + load_p}
        return job_stretch(free, uses, {"gpu": factor}, load, cap, {"pressure"}, None, {"pressure"})

    without = free + gpu[1] * factor
    assert stretch(0.0) == pytest.approx(without)
    assert stretch(others) >= without - 1e-12
    assert stretch(others + more) >= stretch(others) - 1e-12


def test_on_one_in_order_stream_each_job_waits_for_the_others_claim_not_its_own():
    """The in-order law ([contention.gpu] law = "in-order"): the gpu shared as the bursts
    are.  A kernels stage that claims twice a G2 MSM's share of the stream (demand 2)
    and the MSM, both wholly bound to it, 1 s of work each, started together: while both
    run the MSM stretches by 1 + 2 = 3 and the kernels by 1 + 1 = 2.  The kernels finish
    at 2 s, the MSM has done 2/3 of its work by then and the last third alone: 2 1/3 s.
    The proportional law would stretch both by the sum, 3 (both at 3 s less what the
    first to finish leaves).  Alone, a demand of 2 slows nobody: its own claim is not a
    wait."""
    gpu = ("gpu", 0)
    kernels, msm = (gpu, 2.0, 1.0), (gpu, 1.0, 1.0)
    t = finish_times([(0, 1.0, (kernels,)), (0, 1.0, (msm,))], {gpu: 1.0}, bursty={gpu})
    assert t == pytest.approx([2.0, 2.0 + 1 / 3])
    assert finish_times([(0, 1.0, (kernels,))], {gpu: 1.0}, bursty={gpu}) == pytest.approx([1.0])
    assert finish_times([(0, 1.0, (kernels,)), (0, 1.0, (msm,))], {gpu: 1.0}) == pytest.approx([3.0, 3.0])


def test_a_profile_shares_its_gpu_in_order_only_where_it_says_so(tmp_path):
    from simgpu.model import hostmem
    from simgpu.profile import load_profile

    base = (ROOT / "tests" / "data" / "tiny.toml").read_text()
    plain = load_profile(ROOT / "tests" / "data" / "tiny.toml")
    assert hostmem.shared_by(plain, 2, "in-order") == frozenset()
    assert ("gpu", 0) not in hostmem.bursty(plain, 2)
    p = tmp_path / "in-order.toml"
    p.write_text(base + '\n[contention.gpu]\nlaw = "in-order"\n')
    assert hostmem.shared_by(load_profile(p), 2, "in-order") == {("gpu", 0), ("gpu", 1)}
    assert {("gpu", 0), ("gpu", 1), "gil"} <= hostmem.bursty(load_profile(p), 2)
    p.write_text(base + '\n[contention.membw]\nlaw = "in-order"\n')
    with pytest.raises(UserError, match="only the gpu is shared in order"):
        load_profile(p)
