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
