"""How `experiments/stage_noise.py` reads each stage's spread under load: every call of
the completed runs on the card, the model's calls in the same configurations, and a
profile rewritten with the card's spread for a what-if."""

from __future__ import annotations

import sys

import pytest
from conftest import DATA, ROOT, load_experiment

from simgpu.profile import load_profile

load_experiment("gpu_validation")  # what stage_noise imports from beside it
stage_noise = load_experiment("stage_noise")
LEASE = ROOT / "docs" / "data" / "h100-2026-12-07b" / "call1" / "traced-2176-1.json.gz"
PROFILE = ROOT / "docs" / "data" / "h100-2026-12-07" / "call3" / "h100-cupy-key.toml"
SHAPE = {
    "constraints": 1 << 22,
    "design": "single-lock",
    "gpu_workers": 3,
    "concurrency": 3,
    "vram_cap": None,
}


def test_a_runs_calls_are_pooled_by_stage_and_a_run_out_of_memory_is_left_out():
    done = {
        "measured": {"oom_events": []},
        "stage_spans": [[0, 0, "prep", None, 1.0, 1.2], [0, 1, "prep", None, 2.0, 2.6]],
    }
    refused = {"measured": {"oom_events": [{}]}, "stage_spans": [[0, 0, "prep", None, 1.0, 9.0]]}
    calls = stage_noise.card_calls([dict(done, **SHAPE), dict(refused, **SHAPE)])
    assert calls == {"prep": {tuple(SHAPE.values()): pytest.approx([0.2, 0.6])}}
    assert stage_noise.within(calls["prep"]) == (pytest.approx(0.5), 2)  # sd 0.2 over a mean of 0.4


def test_a_spread_is_read_within_each_configuration():
    """Two configurations whose calls do not spread at all, at 1 s and 3 s: no spread,
    however far apart their means."""
    by = {("a",): [1.0, 1.0], ("b",): [3.0, 3.0, 3.0]}
    assert stage_noise.within(by) == (0.0, 5)
    by[("b",)] = [2.0, 4.0]  # 2/3 and 4/3 of their mean, beside 1 and 1
    assert stage_noise.within(by) == (pytest.approx(0.2357, abs=1e-4), 4)


def test_the_profile_is_rewritten_with_the_spread_asked_and_nothing_else(tmp_path):
    text = (DATA / "tiny.toml").read_text()
    out = stage_noise.with_noise(text, {"synthesis": 0.25, "epilogue": 0.125})

    def without_noise(t: str) -> list[str]:
        return [line for line in t.splitlines() if not line.startswith("noise_cv")]

    assert without_noise(out) == without_noise(text)  # every other line as it was
    path = tmp_path / "p.toml"
    path.write_text(out)
    prof, tiny = load_profile(path), load_profile(DATA / "tiny.toml")
    assert prof.stages["synthesis"].noise_cv == 0.25 and prof.stages["epilogue"].noise_cv == 0.125
    assert prof.stages["prep"].noise_cv == tiny.stages["prep"].noise_cv
    with pytest.raises(SystemExit, match="no \\[stages.gather\\]"):
        stage_noise.with_noise(text, {"gather": 0.1})


def test_a_stages_times_are_scaled_phase_by_phase_and_nothing_else(tmp_path):
    """Every time law of a stage, its own or its phases', f times as long at every size;
    the other stages as they were."""
    text = (DATA / "tiny.toml").read_text()
    path = tmp_path / "p.toml"
    path.write_text(stage_noise.with_times(text, {"kernels": 0.5, "prep": 1.25}))
    prof, tiny = load_profile(path), load_profile(DATA / "tiny.toml")
    for n in (1 << 10, 1 << 16, 1 << 22):
        got, was = prof.resolve(n).stages, tiny.resolve(n).stages
        assert got["kernels"].seconds == pytest.approx(0.5 * was["kernels"].seconds)
        assert got["prep"].seconds == pytest.approx(1.25 * was["prep"].seconds)
        assert got["synthesis"].seconds == pytest.approx(was["synthesis"].seconds)
    with pytest.raises(SystemExit, match="no time law for stage gather"):
        stage_noise.with_times(text, {"gather": 2.0})


def test_a_points_table_and_its_law_beyond_scale_alike():
    law = {"points": [[1024, 0.5], [4096, 2.0]], "beyond": {"law": "a + b*n", "a": 0.1, "b": 1e-3}}
    got = stage_noise.scaled_time(law, 2.0)
    assert got == {"points": [[1024, 1.0], [4096, 4.0]], "beyond": {"law": "a + b*n", "a": 0.2, "b": 2e-3}}


def test_the_card_means_are_read_over_the_model_configuration_by_configuration():
    """The median over configurations of the card's mean over the model's; a
    configuration the model did not run is left out."""
    card = {"kernels": {("B",): [0.9, 1.1], ("C",): [3.0], ("D",): [2.0]}}
    model = {"kernels": {("B",): [2.0], ("C",): [2.0, 2.0], ("E",): [1.0]}}
    assert stage_noise.mean_ratios(card, model, ["kernels"]) == {"kernels": pytest.approx(1.0)}  # 0.5, 1.5
    with pytest.raises(SystemExit, match="ran prep"):
        stage_noise.mean_ratios(card, model, ["prep"])


def test_a_lease_is_read_against_the_model_and_a_what_if_profile_written(monkeypatch, tmp_path, capsys):
    """I, J, K at 2^22 capped at 2176 MiB on the fifty-second lease's H100: the host
    stages spread wider on the card than calibrate's alone reading (the profile's
    noise_cv); the what-if profile carries the card's spread for synthesis."""
    out = tmp_path / "p.toml"
    argv = [
        "stage_noise.py",
        str(LEASE),
        "--profile",
        str(PROFILE),
        "--runs",
        "2",
        "--as-card",
        "synthesis",
        "--out",
        str(out),
    ]
    monkeypatch.setattr(sys, "argv", argv)
    stage_noise.main()
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if line.startswith("| synthesis |"))
    card_cv = float(row.split("|")[2].split()[0])
    noise = float(row.split("|")[4])
    assert card_cv > 1.5 * noise  # wider under load than alone
    assert load_profile(out).stages["synthesis"].noise_cv == pytest.approx(card_cv, abs=1e-3)


def test_calibrates_syntheses_at_once_are_read_as_their_spread(tmp_path):
    """A profile whose calibrate kept each call of its k syntheses at once says their
    spread beside the card's; one calibrated before says nothing."""
    text = (DATA / "tiny.toml").read_text()
    path = tmp_path / "p.toml"
    path.write_text(
        text
        + "\n[calibration.contention]\nconstraints = 1024\ncores = 8\nmembw_gbps = 50.0\n"
        + "synthesis_at_once = { 1 = 0.2, 8 = 0.4 }\n"
        + "synthesis_at_once_calls = { 1 = [0.2, 0.2], 8 = [0.2, 0.6, 0.4, 0.4] }\n"
    )
    (line,) = stage_noise.at_once_spread(path)
    assert line.endswith("1 at once 0.000 (2), 8 at once 0.354 (4)")  # sd 0.141 over 0.4
    assert stage_noise.at_once_spread(DATA / "tiny.toml") == []
