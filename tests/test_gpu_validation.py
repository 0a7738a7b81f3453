"""How `experiments/gpu_validation.py predict` reads a lease's stored grid: every run of
the configurations asked for, predicted with the shipped profile, lined up with what the
card measured (docs/validation.md quotes these tables)."""

from __future__ import annotations

import sys

import pytest
from conftest import DATA, ROOT, load_experiment

gpu_validation = load_experiment("gpu_validation")
GRID = ROOT / "docs" / "data" / "h200-2026-12-06r" / "call1" / "grid-A-G.json.gz"


def predict(monkeypatch, tmp_path, *args: str) -> str:
    out = tmp_path / "validation.md"
    argv = ["gpu_validation.py", "predict", "--json", str(GRID), "--out", str(out), "--runs", "2", *args]
    monkeypatch.setattr(sys, "argv", argv)
    gpu_validation.main()
    return out.read_text()


def test_predict_reads_only_the_configurations_asked_for(monkeypatch, tmp_path):
    """A (one GPU worker) and D (serial) at 2^22: their rows and stage rows only, between
    the markers of a file that had none; their runs on the card all completed."""
    text = predict(monkeypatch, tmp_path, "--only", "A", "D")
    block = text.split("<!-- gpu-validation -->")[1].split("<!-- /gpu-validation -->")[0]
    rows = [line.split("|")[1].strip() for line in block.splitlines() if line.startswith("| ")]
    assert sorted(set(rows) - {"cfg"}) == ["A", "D"]
    assert "| A | 2^22 | single-lock | 1 |" in block and "| D | 2^22 | serial | 2 |" in block
    assert "OOM outcome right in 2 of 2 configurations" in block
    assert "Stage means within 10%" in block


def test_predict_says_when_no_run_matches(monkeypatch, tmp_path):
    with pytest.raises(SystemExit, match="no run of Z"):
        predict(monkeypatch, tmp_path, "--only", "Z")


alloc_order = load_experiment("alloc_order")


def test_a_stages_calls_are_timed_to_the_request_that_ran_out():
    """Two calls of b_g2_msm on a finalizer thread, each opening with its 200-byte bases:
    the first asks for its 300-byte temporaries 20 ms in with 500 bytes in arrays; the
    second 90 ms in, beside the other worker's 400 bytes, and is refused (no address).
    A kernels row on another thread is not the stage's."""
    rows = [
        (0.000, "w0.fin", "b_g2_msm", "malloc", 200, 1, 200, 1000),
        (0.005, "w1", "kernels.h_msm", "malloc", 100, 2, 300, 1000),
        (0.020, "w0.fin", "b_g2_msm", "malloc", 300, 3, 800, 1000),
        (0.100, "w0.fin", "b_g2_msm", "malloc", 200, 4, 500, 1000),
        (0.150, "w1", "kernels.h_msm", "malloc", 400, 5, 900, 1000),
        (0.190, "w0.fin", "b_g2_msm", "malloc", 300, 0, 900, 1000),
    ]
    first, second = alloc_order.calls(rows, "b_g2_msm", target=300)
    assert (first.thread, round(first.delay_s, 3), first.in_arrays_before, first.refused) == (
        "w0.fin",
        0.02,
        500,
        False,
    )
    assert (round(second.delay_s, 3), second.in_arrays_before, second.refused) == (0.09, 900, True)
    assert alloc_order.refused_size([{"alloc_trace": rows}], "b_g2_msm") == 300
    assert alloc_order.refused_size([{"alloc_trace": rows[:3]}], "b_g2_msm") is None


def test_a_workers_cycles_are_read_from_its_prestage_to_each_kernels_phase():
    """Worker w1 pre-stages at 0 s (two buffers), reaches its NTT at 30 ms and its H MSM
    at 36 ms, then its next cycle's prestage opens at 200 ms and reaches its NTT 60 ms
    later; the finalizer's rows and frees belong to no cycle."""
    rows = [
        (0.000, "w1", "prestage", "malloc", 128, 1, 128, 1000),
        (0.008, "w1", "prestage", "malloc", 256, 2, 384, 1000),
        (0.010, "w0.fin", "b_g2_msm", "malloc", 192, 3, 576, 1000),
        (0.030, "w1", "kernels.ntt", "malloc", 24, 4, 600, 1000),
        (0.031, "w1", "kernels.ntt", "free", 256, 2, 344, 1000),
        (0.036, "w1", "kernels.h_msm", "malloc", 384, 5, 728, 1000),
        (0.040, "w1", "kernels.h_msm", "malloc", 256, 6, 984, 1000),
        (0.200, "w1", "prestage", "malloc", 128, 7, 500, 1000),
        (0.208, "w1", "prestage", "malloc", 256, 8, 756, 1000),
        (0.260, "w1", "kernels.ntt", "malloc", 24, 9, 780, 1000),
    ]
    first, second = alloc_order.cycles(rows)
    assert (first.thread, first.start) == ("w1", 0.0)
    assert {k: round(v, 3) for k, v in first.phases.items()} == {"ntt": 0.03, "h_msm": 0.036}
    assert second.start == 0.2 and round(second.phases["ntt"], 3) == 0.06


def test_the_first_cycle_is_read_from_the_first_b_g2_msm_call():
    """The first b_g2_msm (w0) asks for its 193-unit bases at 1.000 s; w1's prestage
    follows 0.5 ms later; w0's 2-unit index is passed over (under min_bytes) and its
    98-unit gathered points come 18 ms in; w1's H MSM staging 40 ms in: the second
    array came between the two.  A later b_g2_msm call is not the first."""
    rows = [
        (1.0000, "w0", "b_g2_msm", "malloc", 193, 1, 0, 0),
        (1.0005, "w1", "prestage", "malloc", 128, 2, 0, 0),
        (1.0007, "w1", "prestage", "malloc", 256, 3, 0, 0),
        (1.0100, "w0", "b_g2_msm", "malloc", 2, 4, 0, 0),
        (1.0180, "w0", "b_g2_msm", "malloc", 98, 5, 0, 0),
        (1.0400, "w1", "kernels.h_msm", "malloc", 384, 6, 0, 0),
        (1.3000, "w1", "b_g2_msm", "malloc", 193, 7, 0, 0),
    ]
    c = alloc_order.first_cycle(rows, min_bytes=20)
    assert (round(c.second_array, 4), round(c.prestage, 4), round(c.h_msm, 4)) == (0.018, 0.0005, 0.04)
    assert c.prestage < c.second_array < c.h_msm
    assert alloc_order.first_cycle(rows[1:3]) is None


def test_the_first_cycles_table_counts_each_order_beside_its_outcome(capsys):
    """Two runs of the trace above in MiB: one as it is (the points between, out of
    memory), one with the points asked after the H MSM (completed)."""
    from pathlib import Path

    mib = 1 << 20

    def run(points_at: float, oom: bool) -> dict:
        rows = [
            (1.0000, "w0", "b_g2_msm", "malloc", 193 * mib, 1, 0, 0),
            (1.0005, "w1", "prestage", "malloc", 128 * mib, 2, 0, 0),
            (points_at, "w0", "b_g2_msm", "malloc", 98 * mib, 5, 0, 0),
            (1.0400, "w1", "kernels.h_msm", "malloc", 384 * mib, 6, 0, 0),
        ]
        rows.sort()
        measured = {"oom_events": [{}] if oom else []}
        return {"label": "I", "repeat": 1, "vram_cap": 2176 * mib, "alloc_trace": rows, "measured": measured}

    other_cap = dict(run(1.045, True), vram_cap=2080 * mib)
    alloc_order.print_first_cycles(
        [(Path("a.json"), run(1.018, True)), (Path("b.json"), run(1.045, False)), (Path("c.json"), other_cap)]
    )
    out = capsys.readouterr().out
    assert "| I1 (a.json) | 2176 | yes | 18.0 | 0.5 | 40.0 | yes |" in out
    assert "| I1 (b.json) | 2176 | no | 45.0 | 0.5 | 40.0 | no |" in out
    assert out.rstrip().endswith(
        "At 2080 MiB, second array between the two: 0 runs, 0 out of memory; "
        "after: 1 runs, 1 out of memory.\n"
        "At 2176 MiB, second array between the two: 1 runs, 1 out of memory; after: 1 runs, 0 out of memory."
    )


def test_the_model_is_read_as_the_card_is():
    """--model reads the model's runs of a record's configuration as the card's trace is
    read: on the tiny profile, one GPU worker alone, each cycle reaches the H MSM's
    scratch (its "msm" phase) the prestage's 0.25 s and the NTT's 0.5 s after its
    prestage's first allocation; its b_g2_msm runs on the CPU and asks for nothing."""
    from simgpu.profile import load_profile

    prof = load_profile(DATA / "tiny.toml")
    run = {"constraints": 1024, "gpu_workers": 1, "concurrency": 1, "vram_cap": None, "design": "single-lock"}
    got = alloc_order.model_reading(prof, run, "b_g2_msm", runs=2)
    assert (got.runs, got.out_of_memory, got.delays) == (2, 0, [])
    assert len(got.cycles) == 2 * 6 * 2  # two runs of six proofs of two partitions
    assert all(c == pytest.approx({"msm": 0.75}) for c in got.cycles)
    assert got.first_cycles == [alloc_order.FirstCycle(None, None, None)] * 2


def test_the_anchors_are_read_against_the_profiles_time_alone():
    """`measure --anchor` times every driver stage of one partition alone before each run;
    predict sets the median over a size's runs beside the profile's time alone: here the
    grid's host ran prep 1.3x as long as calibrate's (the median of 1.5x and 1.1x)."""
    from simgpu.profile import load_profile

    prof = load_profile(ROOT / "simgpu" / "profile" / "profiles" / "h200-cupy.toml")
    n = 1 << 20
    alone = sum(p.seconds for p in prof.resolve(n).stages["prep"].phases)
    table = [
        ({"constraints": n, "anchor_s": {"prep": 1.5 * alone}}, {}),
        ({"constraints": n, "anchor_s": {"prep": 1.1 * alone}}, {}),
        ({"constraints": n}, {}),  # a run measured without anchors
    ]
    (line, _) = gpu_validation._anchors(table, prof)
    assert "2^20 (2 runs): prep 1.30x." in line
    assert gpu_validation._anchors(table[2:], prof) == []  # none anchored: nothing said


def test_an_anchored_run_is_predicted_with_the_host_its_anchor_met():
    """`predict --anchored` gives each anchored run the profile with every driver stage's
    time alone as its anchor read it: prep timed at twice the profile's alone takes twice
    as long in the variant, the trip back (synthesis's transfer phase) by its own ratio,
    synthesis's compute and every other stage as calibrated."""
    from simgpu.calibrate.chain import TRIP
    from simgpu.profile import load_profile

    prof = load_profile(ROOT / "simgpu" / "profile" / "profiles" / "h200-cupy.toml")
    n = 1 << 20
    res = prof.resolve(n)
    prep = sum(p.seconds for p in res.stages["prep"].phases)
    compute, trip = (p.seconds for p in res.stages["synthesis"].phases)
    ratios = gpu_validation.anchor_ratios(prof, n, {"prep": 2 * prep, TRIP: 1.5 * trip})
    assert ratios == {"prep": pytest.approx(2.0), TRIP: pytest.approx(1.5)}
    got = gpu_validation.on_anchor(prof, ratios).resolve(n)
    assert sum(p.seconds for p in got.stages["prep"].phases) == pytest.approx(2 * prep)
    assert [p.seconds for p in got.stages["synthesis"].phases] == pytest.approx([compute, 1.5 * trip])
    kernels = [p.seconds for p in res.stages["kernels"].phases]
    assert [p.seconds for p in got.stages["kernels"].phases] == pytest.approx(kernels)


def test_a_profile_and_runs_that_uploaded_a_b_c_differently_are_told_apart():
    note = gpu_validation.upload_note
    old = [{"label": "B"}]  # runs from before the pins counted nothing: the staging
    pinned = [{"abc_uploads": {"pinned": 24, "staged": 0}}]
    assert note("staged", old) == "" and note("pinned", pinned) == "" and note(None, pinned) == ""
    assert "measured a, b and c staged, the runs pinned" in note("staged", pinned)
    assert "the runs mixed" in note("pinned", [*pinned, {"abc_uploads": {"pinned": 0, "staged": 3}}])


def test_a_profile_calibrated_on_a_drifting_host_says_so():
    note = gpu_validation.drift_note
    assert note({}) == "" and note({"host_drift": 1.179}) == ""  # the shipped h200-cupy's
    assert "moved 1.95x over its sizes" in note({"host_drift": 1.949})  # the 53rd lease's


def test_the_stored_grid_is_read_as_the_pinned_prover_it_was(monkeypatch, tmp_path):
    # the shipped profile and its lease's grid both pinned a, b and c: no note
    assert "measured a, b and c" not in predict(monkeypatch, tmp_path, "--only", "B")


def test_where_the_models_runs_peak_at_different_heights_each_card_peak_is_set_beside_them():
    """The table's predicted peak is the model runs' highest; where they differ, each of
    the card's peaks is put beside the heights the model's runs reach (within 2%)."""

    def row(card: float, model: list[float]) -> tuple[dict, dict]:
        return {}, {"peak VRAM (MiB)": {"measured": card, "runs": model}}

    one_height = {"A": [row(1000.0, [1000.0, 1000.2])]}
    assert gpu_validation._peak_states(one_height) == []
    model = [934.0] * 6 + [1030.0] * 3 + [998.0]
    (head, _, line, _) = gpu_validation._peak_states({"P": [row(998.0, model), row(900.0, model)]})
    assert head.startswith("Peak VRAM where the model's runs peak at different heights")
    assert line == (
        "- P: the model's runs peak at 934 MiB (6 of 10), 1030 MiB (3 of 10), 998 MiB (1 of 10); "
        "the card's at 998, 900 MiB, 1 of 2 within 2% of a height the model's runs reach "
        "(in 1, 0 of 10 runs)."
    )


def test_a_run_with_retries_is_predicted_with_them_in_a_row_of_its_own(monkeypatch, tmp_path):
    """`measure --retries 1` records the run's retries; predict then gives that run its
    own row ('A/r1'), predicted with the partition re-queued after VramExhausted as on
    the card, beside the grid's A (cuzk's 0)."""
    import json

    runs = [r for r in gpu_validation.read_runs(GRID) if r["label"] == "A"]
    again = [dict(runs[0], retries=1)]
    more = tmp_path / "retried.json"
    more.write_text(json.dumps(again))
    text = predict(monkeypatch, tmp_path, "--only", "A", "--more-json", str(more))
    block = text.split("<!-- gpu-validation -->")[1].split("<!-- /gpu-validation -->")[0]
    rows = [line.split("|")[1].strip() for line in block.splitlines() if line.startswith("| ")]
    assert "A" in rows and "A/r1" in rows
    assert "| A/r1 | 2^22 | single-lock | 1 |" in block and "| 1 | " in block.split("| A/r1 |")[1]
    assert "Runs with retries" in block
    assert "| A/r1 | card | 1 | 1 | 0.00 / 0 | 0.00 / 0 of 1 | yes |" in block
    ns = gpu_validation.argparse.Namespace(proofs=6, partition_workers=8, retries=0)
    assert gpu_validation.config_of(ns, 2, 3, None, 1).retries == 1
    assert gpu_validation.config_of(ns, 2, 3, None).retries == 0


def test_the_retried_runs_are_judged_by_the_share_of_runs_that_lost_a_proof():
    """The model's runs lost 0, 0, 0, 6 proofs (a share of 0.25 losing any): one card run of
    two losing proofs is likely enough; where the model never loses one, a card run that
    did is a miss."""
    mib = 1 << 20

    def entry(model: list[int], lost: int) -> tuple[dict, dict]:
        r = {"label": "J/r3", "retries": 3, "vram_cap": 2096 * mib}
        c = {
            "proofs failed": {"runs": model, "measured": lost},
            "throughput (s/proof)": {"predicted": 2.6, "measured": 2.5 if lost < 6 else None},
        }
        return r, c

    rows = gpu_validation._retried([entry([0, 0, 0, 6], 2), entry([0, 0, 0, 6], 0)])
    assert rows[-1] == "| J/r3 | 2096 | 3 | 2 | 1.50 / 2, 0 | 0.25 / 1 of 2 | yes | 2.60 / 2.50 |"
    rows = gpu_validation._retried([entry([0, 0, 0, 0], 1)])
    assert rows[-1] == "| J/r3 | 2096 | 3 | 1 | 0.00 / 1 | 0.00 / 1 of 1 | **no** | 2.60 / 2.50 |"
    assert gpu_validation._retried([({"label": "J", "retries": 0}, {})]) == []  # the grid's own


def test_a_runs_pace_tests_the_model_only_where_both_expect_every_proof_done():
    """A run that lost a proof, or one of a configuration the model expects to run out of
    memory (as with retries at a cap the model refuses), says nothing of its pace."""

    def run(lost: int, p: float) -> dict:
        return {"proofs failed": {"measured": lost}, "OOM": {"p": p}}

    assert gpu_validation._tested(run(0, 0.04))
    assert not gpu_validation._tested(run(1, 0.04))
    assert not gpu_validation._tested(run(0, 1.0))
