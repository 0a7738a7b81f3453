"""Pinned uploads cross the link in the order they were queued, each whole (the copy
lane, simgpu.model.interpreter.on_link), where the prover sends every pinned copy down
the one stream the workers share.  A scene worked out by hand on tests/data/tiny.toml
(h2d 10 GB/s, no noise): one worker's b_g2_msm stages 2 GB of bases as two arrays
(1.5 GB, then 0.5 GB: 0.15 s and 0.05 s) before its 0.3 s of work; the other worker's
prestage (0.25 s of copies of a, b and c, page-locked where they lie) is queued 0.05 s
into the first array."""

from __future__ import annotations

import pytest
from conftest import tiny_profile

from simgpu.config import PipelineConfig, Workload
from simgpu.model.sim import SimRuntime
from simgpu.profile.resolve import STAGE, array_bytes
from simgpu.sched.work import Partition, Proof

GB = 1_000_000_000
#: prestage leans on the link and on the stream (Resolved.upload_gpu): its copies go the
#: way every pinned copy goes, so the lane applies
PRESTAGE_USES = {"h2d": {"demand": 10.0, "bound": 0.8}, "gpu": {"demand": 1.0, "bound": 0.2}}


#: a, b and c page-locked where they lie (free here): the prestage's thread queues all of
#: its copies at once, so they queue in the lane as one
FREE_PINS = {"lock_s_per_gib": 0.0, "unlock_s_per_gib": 0.0, "lock_stall": 0.0, "unlock_stall": 0.0}


def profile(prestage_uses=PRESTAGE_USES, pins=FREE_PINS):
    return tiny_profile(
        **({"pins": pins} if pins else {}),
        buffers={"bases": 2 * GB},
        buffer_arrays={"bases": [3, 1]},
        stages={
            "prestage": {
                "on": "gpu",
                "time": 0.25,
                "vram_out": ["d_a", "d_bc"],
                "host_release": ["host_abc"],
                "uses": prestage_uses,
            },
            "b_g2_msm": {
                "on": "gpu",
                "uses": {"gpu": {"demand": 1.0, "bound": 1.0}},
                "phases": [{"name": "msm", "time": 0.5, "staging": ["bases"]}],
            },
        },
    )


def scene(prof, prestage_at: float = 0.05, prestage_device: int = 0) -> dict[str, tuple[float, float]]:
    """b_g2_msm started at 0 on device 0, prestage at `prestage_at` on `prestage_device`:
    their spans."""
    wl = prof.workload()
    cfg = PipelineConfig().with_overrides(proofs=1, concurrency=1, devices=prestage_device + 1)
    rt = SimRuntime(prof, cfg, Workload(wl.name, 2, 1024))
    proof = Proof(0, 2, 1024)
    spans: dict[str, tuple[float, float]] = {}

    def run(name: str, at: float, index: int, device: int):
        yield rt.env.timeout(at)
        start = rt.env.now
        yield rt.stage(name, Partition(proof, index, 1024), device)
        spans[name] = (start, rt.env.now)

    rt.env.process(run("b_g2_msm", 0.0, 0, 0))
    rt.env.process(run("prestage", prestage_at, 1, prestage_device))
    rt.env.run()
    return spans


def test_a_prestage_queued_behind_a_staging_array_waits_for_it_then_crosses_alone():
    """The first array crosses 0-0.15 s alone; the prestage, queued at 0.05, goes next
    (0.15-0.40), before the second array, asked for at 0.15 (0.40-0.45); b_g2_msm's
    work then runs 0.45-0.75."""
    spans = scene(profile())
    assert spans["prestage"] == pytest.approx((0.05, 0.40))
    assert spans["b_g2_msm"] == pytest.approx((0.0, 0.75))


def test_copies_asked_for_at_one_instant_cross_in_the_order_asked():
    """Both stages start at 0; b_g2_msm's process asks first, so its first array crosses
    first (0-0.15), the prestage next (0.15-0.40), the second array last (0.40-0.45)."""
    spans = scene(profile(), prestage_at=0.0)
    assert spans["prestage"] == pytest.approx((0.0, 0.40))
    assert spans["b_g2_msm"] == pytest.approx((0.0, 0.75))


def test_without_the_one_stream_uploads_share_the_link_as_before():
    """A prestage that leans on the link alone (no `gpu` use: its copies do not go the
    one way) queues in no lane: from 0.05 it shares the link with the first array, both
    at half speed, until the array's last 0.1 s of work is done at 0.25; the prestage has
    done 0.1 of its 0.25 s then, shares again with the second array (0.25-0.35: 0.05 of
    work each) and ends alone (0.35-0.45): later than behind the lane's first array."""
    spans = scene(profile({"h2d": {"demand": 10.0, "bound": 1.0}}))
    assert spans["prestage"] == pytest.approx((0.05, 0.45))
    # the arrays end at 0.25 and 0.35; the work (0.3 s) at 0.65
    assert spans["b_g2_msm"] == pytest.approx((0.0, 0.65))


def test_a_staging_is_uploaded_array_by_array():
    prof = profile()
    plan = prof.resolve(1024).plan("b_g2_msm")
    assert [s.nbytes for s in plan.steps if s.op == STAGE] == [1_500_000_000, 500_000_000]
    assert array_bytes(10, (1, 1, 1)) == (3, 4, 3) and sum(array_bytes(7, (0.2, 0.8))) == 7
    assert array_bytes(5, ()) == (5,)


def test_a_prestage_that_packs_its_copies_block_by_block_shares_the_link():
    """Without [pins] the prover packs a, b and c through staging blocks, whose copies
    leave one at a time between the other worker's: the prestage holds no lane.  Beside
    each array both run at half speed (link and stream each carry two demands): the
    first array's last 0.1 s of work ends at 0.25, the second's 0.05 at 0.35, the
    prestage's 0.15 done by then.  Its last 0.1 s runs beside b_g2_msm's work, its
    stream share (0.2) at half speed: 0.8 + 0.2 x 2 = 1.2, so 0.12 s, ending at 0.47;
    the work does 0.06 s meanwhile and ends at 0.47 + 0.24 = 0.71."""
    spans = scene(profile(pins=None))
    assert spans["prestage"] == pytest.approx((0.05, 0.47))
    assert spans["b_g2_msm"] == pytest.approx((0.0, 0.71))


def test_each_device_has_its_own_lane():
    """The prestage on a second device queues behind nothing the first one carries: it
    takes its 0.25 s at once (0.05-0.30), and b_g2_msm on the first runs alone (0-0.5)."""
    spans = scene(profile(), prestage_device=1)
    assert spans["prestage"] == pytest.approx((0.05, 0.30))
    assert spans["b_g2_msm"] == pytest.approx((0.0, 0.5))
