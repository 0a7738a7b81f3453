"""Host memory as cuzk keeps it, on tests/data/tiny.toml: timelines worked out by hand.

tiny: synthesis 1.0 s, prep 0.5, prestage 0.25, kernels 0.5 + 0.5, b_g2_msm 0.5, epilogue
0.25; host_abc 1 GiB + host_aux 1 GiB per partition; host RAM 100 GiB, 10 resident.
"""

from __future__ import annotations

import pytest
import simpy
from conftest import simulate, tiny_profile

from simgpu.errors import UserError
from simgpu.model.contention import FluidShare
from simgpu.model.hostmem import link_upload
from simgpu.profile import find_profile, load_profile
from simgpu.profile.resolve import Use

GiB = 1 << 30


def stage_times(result, stage, event="stage_start"):
    return sorted(
        (r.t, r.partition) for r in result.records if r.event == event and r.fields.get("stage") == stage
    )


def first_span(result, stage):
    """(start, end) of the first run of `stage`."""
    return stage_times(result, stage)[0][0], stage_times(result, stage, "stage_end")[0][0]


def test_a_partition_gives_back_its_abc_share_when_its_gpu_work_starts():
    """3 partitions, 3 synthesis slots, one GPU worker; the budget leaves 4.5 GiB for
    partitions (total_budget 14.5 GiB - 10 resident) and each reserves 2 GiB, so only two
    start at t = 0.  Both are synthesised and prepped by 1.5 s; the worker takes the first
    and its GPU work starts: it gives back 1.5 of its 2 GiB, so the third fits (0.5 + 2 +
    2 <= 4.5) and starts synthesis at 1.5 s.  Released in one step, the third would wait
    for the first to finish: prestage 1.5-1.75, kernels 1.75-2.75, b_g2_msm 2.75-3.25,
    epilogue 3.25-3.5."""
    two_step = tiny_profile(memory={"partition_estimate": "2GiB", "release_at_gpu_start": "1.5GiB"})
    one_step = tiny_profile(memory={"partition_estimate": "2GiB"})
    cfg = dict(proofs=1, concurrency=1, partitions=3, partition_workers=3, gpu_workers_per_device=1)
    budget = int(14.5 * GiB)
    result, s = simulate(two_step, "single-lock", total_budget=budget, **cfg)
    assert [t for t, _ in stage_times(result, "synthesis")] == pytest.approx([0.0, 0.0, 1.5])
    assert s.completed == 1 and not s.oom_events
    result, _ = simulate(one_step, "single-lock", total_budget=budget, **cfg)
    assert [t for t, _ in stage_times(result, "synthesis")] == pytest.approx([0.0, 0.0, 3.5])


def flaky(rt, worker, part):
    """Single-lock, but every partition's first attempt runs out of VRAM at once."""
    from simgpu.errors import VramExhausted
    from simgpu.sched.designs import single_lock

    if part.attempts == 1:
        raise VramExhausted(f"gpu{worker.device}", GiB, 0, GiB, buffer="d_a", stage="prestage")
    yield from single_lock(rt, worker, part)


def test_a_retried_partition_is_synthesised_again_within_what_it_still_holds(monkeypatch):
    """Budget for one partition (2 GiB); each gives back 1.5 GiB at its GPU start.
    Partition 0's first attempt fails at its GPU start (t = 1.5, after synthesis and prep):
    it holds 0.5 GiB, and partition 1 (2 GiB) cannot start.  Partition 0 is synthesised
    again at once within its 0.5 GiB (taking the 1.5 back would queue it behind partition
    1, which waits for partition 0 to end: a deadlock) and proves: synthesis 1.5-2.5, prep
    -3.0, prestage -3.25, kernels -4.25, b_g2_msm -4.75, epilogue -5.0.  Partition 1 starts
    at 5.0, fails at 6.5, is synthesised again at 6.5 and ends at 10.0."""
    from simgpu.sched import registry

    monkeypatch.setitem(registry.BUILTIN, "flaky", flaky)
    prof = tiny_profile(memory={"partition_estimate": "2GiB", "release_at_gpu_start": "1.5GiB"})
    result, s = simulate(
        prof,
        "flaky",
        proofs=1,
        concurrency=1,
        partitions=2,
        gpu_workers_per_device=1,
        retries=1,
        retry_backoff=0.0,
        total_budget=12 * GiB,
    )
    assert s.deadlock is None and s.completed == 1
    starts = [t for t, _ in stage_times(result, "synthesis")]
    assert starts == pytest.approx([0.0, 1.5, 5.0, 6.5])
    assert result.end_time == pytest.approx(10.0)


def test_the_ledger_not_the_budget_decides_a_host_oom():
    """The daemon reserves 1 GiB per partition, a partition holds 2 GiB (host_abc +
    host_aux): an estimate below the real footprint.  Host RAM leaves 4 GiB beside the
    10 resident and the budget admits 4 partitions, so three syntheses start at once and
    the third's host_abc does not fit: HostRamExhausted in synthesis, 1 GiB asked, 0 free."""
    prof = tiny_profile(hardware={"host_ram": "14GiB"}, memory={"partition_estimate": "1GiB"})
    _, s = simulate(
        prof, "single-lock", proofs=1, concurrency=1, partitions=3, partition_workers=3, total_budget=14 * GiB
    )
    assert s.host_oom and s.failed == 1
    oom = s.oom_events[0]
    assert (oom["kind"], oom["stage"], oom["buffer"]) == ("host RAM", "synthesis", "host_abc")
    assert (oom["requested_bytes"], oom["free_bytes"]) == (GiB, 0)
    # an estimate that covers the footprint gates the third partition instead
    fair = tiny_profile(hardware={"host_ram": "14GiB"}, memory={"partition_estimate": "2GiB"})
    _, s = simulate(
        fair, "single-lock", proofs=1, concurrency=1, partitions=3, partition_workers=3, total_budget=14 * GiB
    )
    assert not s.oom_events and s.completed == 1


def no_prestage(rt, worker, part):
    """Kernels with nothing pre-staged: they allocate and fill their own inputs."""
    yield rt.stage("kernels", part, worker.device)
    part.complete((yield rt.stage("epilogue", part, worker.device)))


def test_kernels_that_fill_their_own_inputs_copy_them_from_pageable_memory(monkeypatch):
    """Nothing pre-staged: the kernels allocate d_a + d_bc (3 GiB), do the pre-stage's own
    work (0.25 s) and, with h2d_pageable_gbps = 1, copy the 3 GiB through a bounce buffer
    at 1 GB/s (3.221 s) before their 1.0 s of phases: 4.471 s.  Without the key the copy is
    taken as pinned and overlapped, as before: 1.25 s."""
    from simgpu.sched import registry

    monkeypatch.setitem(registry.BUILTIN, "no-prestage", no_prestage)
    slow = tiny_profile(hardware={"h2d_pageable_gbps": 1.0})
    result, s = simulate(slow, "no-prestage", proofs=1, concurrency=1, partitions=1)
    t0, t1 = first_span(result, "kernels")
    assert s.completed == 1
    assert t1 - t0 == pytest.approx(0.25 + 3 * GiB / 1e9 + 1.0)
    result, _ = simulate(tiny_profile(), "no-prestage", proofs=1, concurrency=1, partitions=1)
    t0, t1 = first_span(result, "kernels")
    assert t1 - t0 == pytest.approx(1.25)


def test_a_gpu_copy_slows_when_synthesis_fills_host_memory():
    """The pre-stage copies 1 GiB-ish at 10 GB/s (its whole 0.25 s); synthesis draws 95 of
    the host's 100 GB/s.  Alone, the copy takes 0.25 s; while a synthesis runs, host
    memory is asked for 95 + 10 = 105 GB/s and, shared by the conserved law with everything
    fully bound, runs at 105/100: the copy takes 0.2625 s.  The link itself has room."""
    uses_copy = {"h2d": {"demand": 10.0, "bound": 1.0}}
    prof = tiny_profile(
        contention={"membw": {"law": "conserved"}},
        **{
            "stages.prestage": {"uses": uses_copy},
            "stages.synthesis": {"uses": {"membw": {"demand": 95.0, "bound": 1.0}}},
        },
    )
    # one partition alone: no synthesis runs during its pre-stage
    result, _ = simulate(prof, "single-lock", proofs=1, concurrency=1, partitions=1)
    t0, t1 = first_span(result, "prestage")
    assert t1 - t0 == pytest.approx(0.25)
    # two partitions, one synthesis slot: the second synthesises while the first pre-stages
    result, _ = simulate(prof, "single-lock", proofs=1, concurrency=1, partitions=2, partition_workers=1)
    t0, t1 = first_span(result, "prestage")
    assert t1 - t0 == pytest.approx(0.25 * 105 / 100)


@pytest.mark.parametrize(
    ("contention", "match"),
    [
        ({"gil": {"law": "conserved"}}, "can thrash"),
        ({"membw": {"law": "fair"}}, "law must be one of"),
        ({"membw": {"knee": 0.5, "loss": 1.0}}, "knee >= 1"),
        ({"membw": {"loss": "lots"}}, "must be numbers"),
        ({"membw": {"loss": 1.0, "banana": 2}}, "expected"),
    ],
)
def test_bad_contention_tables_are_one_line_errors(contention, match):
    with pytest.raises(UserError, match=match):
        tiny_profile(contention=contention)


def test_the_memory_table_refuses_unknown_keys():
    with pytest.raises(UserError, match=r"\[memory\] takes"):
        tiny_profile(memory={"partition_budget": "2GiB"})


def test_a_staging_upload_holds_the_one_stream_as_prestage_does():
    """A phase's staging goes the way prestage's copies go (simgpu.gpu.transfer), so it
    shares the device as prestage's `gpu` use says: here half of its time waits on the
    stream, the other half on the link.  2 GB over a 10 GB/s link is 0.2 s of work; a
    kernel (1 s, wholly on the device) starts with it.  The device carries two demands:
    the upload's bound half runs at half speed, so it takes 0.5 * 0.2 + 0.5 * 0.2 * 2 =
    0.3 s; the kernel runs at half speed meanwhile (0.15 s done), then alone: 1.15 s.
    Without the stream's share (by the link alone, as a pageable copy is modelled) the
    upload takes its 0.2 s and the kernel its 1 s."""

    def finish(on_stream):
        env = simpy.Environment()
        share = FluidShare(env, {("gpu", 0): 1.0, ("h2d", 0): 10.0})
        work, uses = link_upload(2_000_000_000, 10.0, 0, on_stream)
        done = {}

        def job(name, w, u):
            yield share.submit(w, u, name)
            done[name] = env.now

        env.process(job("upload", work, uses))
        env.process(job("kernel", 1.0, ((("gpu", 0), 1.0, 1.0),)))
        env.run()
        return done["upload"], done["kernel"]

    assert finish(Use(demand=1.0, bound=0.5)) == pytest.approx((0.3, 1.15))
    assert finish(None) == pytest.approx((0.2, 1.0))


def test_the_profile_says_how_an_upload_shares_the_device_where_prestage_leans_on_it():
    """Resolved.upload_gpu: the uploading stage's (prestage's) `gpu` use, else None; the
    shipped H200 profile's prestage leans on the stream, the seed's declares no uses."""
    uses = {"h2d": {"demand": 10.0, "bound": 0.7}, "gpu": {"demand": 1.0, "bound": 0.3}}
    leaning = tiny_profile(
        stages={"prestage": {"on": "gpu", "time": 0.25, "vram_out": ["d_a", "d_bc"], "uses": uses}}
    )
    got = leaning.resolve(1024).upload_gpu
    assert (got.demand, got.bound) == (1.0, 0.3)
    assert tiny_profile().resolve(1024).upload_gpu is None
    h200 = load_profile(find_profile("h200-cupy"))
    assert h200.resolve(1 << 22).upload_gpu.bound == pytest.approx(0.421)
    seed = load_profile(find_profile("seed-rtx5070ti"))
    assert seed.resolve(seed.workload().constraints).upload_gpu is None
