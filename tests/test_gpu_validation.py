"""How `experiments/gpu_validation.py predict` reads a lease's stored grid: every run of
the configurations asked for, predicted with the shipped profile, lined up with what the
card measured (docs/validation.md quotes these tables)."""

from __future__ import annotations

import sys

import pytest
from conftest import ROOT, load_experiment

gpu_validation = load_experiment("gpu_validation")
GRID = ROOT / "docs" / "data" / "h200-2026-12-05e" / "call1" / "grid-A-G.json"


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
