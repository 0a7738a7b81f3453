"""An MSM phase's footprint in two steps: its staging (the bases batch and the gathered
tails, uploaded first), then its temporaries.  Timelines on tests/data/tiny.toml, worked
out by hand: synthesis 0-1 s, prep -1.5, prestage -1.75, kernels' ntt -2.25 (d_bc freed
at its end) and msm -2.75, b_g2_msm -3.25, epilogue -3.5; h2d 10 GB/s, 1 GiB resident.
"""

from __future__ import annotations

import copy

import pytest
from conftest import tiny_profile

from simgpu.calibrate.refit import restage_footprints
from simgpu.config import PipelineConfig, Workload
from simgpu.errors import UserError
from simgpu.model.sim import SimRuntime
from simgpu.prover.circuits import circuit_spec
from simgpu.prover.memory_plan import ProverShape, prover_plan, stage_peak
from simgpu.report.metrics import summarize
from simgpu.sched.registry import resolve_design

GiB = 1 << 30
STAGED = 2_000_000_000  # bytes: 0.2 s over the 10 GB/s link


def staged_msm(**hardware):
    """tiny, its msm phase staging 2 GB of bases before its 1 GiB of scratch."""
    return tiny_profile(
        buffers={"bases": STAGED},
        hardware=hardware,
        stages={
            "kernels": {
                "on": "gpu",
                "vram_in": ["d_a", "d_bc"],
                "phases": [
                    {"name": "ntt", "time": 0.5, "release": ["d_bc"]},
                    {"name": "msm", "time": 0.5, "staging": ["bases"], "transient": ["scratch"]},
                ],
            }
        },
    )


def run_one(profile):
    """One partition through single-lock on the model: (the runtime, its metrics)."""
    cfg = PipelineConfig().with_overrides(proofs=1, concurrency=1, partitions=1)
    wl = profile.workload()
    rt = SimRuntime(profile, cfg, Workload(wl.name, 1, wl.constraints))
    return rt, summarize(rt.run(resolve_design("single-lock").fn))


def test_the_staging_is_uploaded_before_the_temporaries_are_allocated_and_the_phase_keeps_its_time():
    rt, s = run_one(staged_msm())
    used = {round(t, 9): b for t, b in rt.vram[0].history}  # time -> bytes in use from then on
    resident = GiB
    assert used[1.5] == resident + 3 * GiB  # prestage: d_a and d_bc
    assert used[2.25] == resident + GiB + STAGED  # ntt over, d_bc freed, the bases in
    assert used[2.45] == resident + GiB + STAGED + GiB  # 2 GB at 10 GB/s later: scratch
    assert s.completed == 1 and s.makespan == pytest.approx(3.5)  # the upload is part of the phase's 0.5 s


def test_the_peak_counts_staging_and_temporaries_together():
    """d_a (1 GiB), the bases (1.86 GiB) and the scratch (1 GiB) are live at once: 3.86
    GiB, which a card with 3.5 GiB free cannot hold (refused up front), one with 4 can."""
    with pytest.raises(UserError, match="3.9 GiB of VRAM at its peak"):
        run_one(staged_msm(vram="4.5GiB"))
    rt, s = run_one(staged_msm(vram="5GiB"))
    assert s.completed == 1 and max(u for _, u in rt.vram[0].history) == 2 * GiB + STAGED + GiB


def test_staging_belongs_to_device_stages_and_names_known_buffers():
    with pytest.raises(UserError, match="runs on the cpu"):
        tiny_profile(
            stages={"prep": {"on": "cpu", "phases": [{"name": "p", "time": 0.5, "staging": ["d_a"]}]}}
        )
    with pytest.raises(UserError, match="staging"):
        tiny_profile(
            stages={"kernels": {"on": "gpu", "phases": [{"name": "m", "time": 0.5, "staging": ["nope"]}]}}
        )


@pytest.mark.parametrize("log_n", [12, 18, 20])
@pytest.mark.parametrize("b_g2_on", ["cpu", "gpu"])
def test_the_plan_splits_every_msm_peak_into_its_staging_and_temporaries(log_n, b_g2_on):
    plan = prover_plan(
        ProverShape.estimate(circuit_spec("porep", 1 << log_n)), stream_batch=1 << 16, b_g2_on=b_g2_on
    )
    bufs = plan["buffers"]
    phases = [
        ph for st in plan["stages"].values() for ph in st.get("phases", []) if ph["name"].endswith("_msm")
    ]
    assert len(phases) == (5 if b_g2_on == "gpu" else 4)
    for ph in phases:
        name = ph["name"]
        assert ph["staging"] == [f"{name}_staging"]
        assert bufs[f"{name}_staging"] + bufs[name] == sum(plan["detail"][name].values())
    # the peak is the same walk as before the split: both parts are live during the work
    kernels_peak = stage_peak(plan, "kernels") - sum(bufs[x] for x in plan["resident"]["vram"])
    assert (
        kernels_peak
        == bufs["d_a"] + max(bufs[f"{q}_msm_staging"] + bufs[f"{q}_msm"] for q in ("h", "l", "a", "b1"))
        or kernels_peak == bufs["d_a"] + bufs["d_bc"] + bufs["ntt_scratch"]
    )


def _unsplit_doc(b_g2_on: str = "gpu") -> dict:
    """A profile document as calibrate wrote it before the split: each MSM phase's whole
    peak as one transient, measured 1% above the plan's (a measurement, not the plan)."""
    sizes = [1 << 16, 1 << 18]
    plans = {
        n: prover_plan(ProverShape.estimate(circuit_spec("porep", n)), stream_batch=1 << 22, b_g2_on=b_g2_on)
        for n in sizes
    }
    names = ["h_msm", "l_msm", "a_msm", "b1_msm", "b_g2_msm"]
    buffers = {
        name: {"points": [[n, int(1.01 * sum(plans[n]["detail"][name].values()))] for n in sizes]}
        for name in names
    }
    phases = [{"name": name, "time": 0.01, "transient": [name], "release": []} for name in names[:4]]
    return {
        "calibration": {"circuit": "porep", "b_g2_on": b_g2_on},
        "buffers": buffers,
        "stages": {
            "kernels": {"on": "gpu", "phases": phases},
            "b_g2_msm": {
                "on": "gpu",
                "phases": [{"name": "b_g2_msm", "time": 0.01, "transient": ["b_g2_msm"]}],
            },
        },
        "_plans": plans,
    }


def test_restaging_an_old_profile_keeps_each_measured_peak_and_takes_the_plans_staging():
    doc = _unsplit_doc()
    plans = doc.pop("_plans")
    before = copy.deepcopy(doc["buffers"])
    assert restage_footprints(doc) == ["h_msm", "l_msm", "a_msm", "b1_msm", "b_g2_msm"]
    for name, old in before.items():
        staged = dict(map(tuple, doc["buffers"][f"{name}_staging"]["points"]))
        temps = dict(map(tuple, doc["buffers"][name]["points"]))
        for n, peak in old["points"]:
            assert staged[n] == plans[n]["buffers"][f"{name}_staging"]
            assert staged[n] + temps[n] == peak
    assert all(ph["staging"] == [f"{ph['name']}_staging"] for ph in doc["stages"]["kernels"]["phases"])
    assert restage_footprints(doc) == []  # split once only
