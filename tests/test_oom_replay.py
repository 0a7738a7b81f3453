"""The model replayed at a real run's stage times (experiments/oom_replay.py): every stage
of every partition takes as long as the card's span of it, contention off."""

from __future__ import annotations

import tomllib

import pytest
from conftest import DATA, load_experiment

from simgpu.config import PipelineConfig
from simgpu.profile import profile_from_dict
from simgpu.report.trace import stage_rows
from simgpu.sched.registry import resolve_design

load_experiment("gpu_validation")  # what oom_replay imports from beside it
oom_replay = load_experiment("oom_replay")


def test_each_replayed_stage_lasts_its_real_span_and_the_rest_keep_the_models_time():
    doc = oom_replay.without_contention(tomllib.loads((DATA / "tiny.toml").read_text()))
    prof = profile_from_dict(doc, "tiny")
    wl = prof.workload()
    cfg = PipelineConfig(proofs=2, concurrency=1)
    # the card's spans: every stage of proof 0, partition 0 three times the model's, as
    # if the card were slower there; proof 1 not given (a lost proof: model's times)
    plain = {
        (p, i, st): t1 - t0
        for p, i, st, _, t0, t1 in stage_rows(
            oom_replay.SimRuntime(prof, cfg, wl, seed=0).run(resolve_design("single-lock").fn).records
        )
    }
    real = {k: 3 * v for k, v in plain.items() if k[:2] == (0, 0)}
    rt = oom_replay.ReplayRuntime(prof, cfg, wl, seed=0, real=real)
    got = {
        (p, i, st): t1 - t0
        for p, i, st, _, t0, t1 in stage_rows(rt.run(resolve_design("single-lock").fn).records)
    }
    assert rt.replayed == len(real) > 0
    for key, seconds in real.items():
        assert got[key] == pytest.approx(seconds, rel=1e-6), key
    for key in got:
        if key[0] == 1:
            assert got[key] == pytest.approx(plain[key], rel=1e-6), key


def test_without_contention_no_stage_leans_on_anything():
    doc = oom_replay.without_contention(
        {"stages": {"kernels": {"uses": {"gpu": {}}, "phases": [{"uses": {}}]}}, "contention": {"gpu": {}}}
    )
    assert doc == {"stages": {"kernels": {"phases": [{}]}}}


def test_without_contention_of_some_stages_leaves_the_others_sharing():
    """--stages: only the stages whose spans come from the card stop leaning on shared
    resources; the others, and the laws they share by, stay as the model has them."""
    b_g2 = {"uses": {"gpu": {}}, "phases": [{"uses": {}}]}
    doc = {"stages": {"kernels": {"uses": {"gpu": {}}}, "b_g2_msm": b_g2}, "contention": {"gpu": {}}}
    got = oom_replay.without_contention(doc, {"b_g2_msm"})
    assert got == {
        "stages": {"kernels": {"uses": {"gpu": {}}}, "b_g2_msm": {"phases": [{}]}},
        "contention": {"gpu": {}},
    }
