"""experiments/paired_grid.py pairs two ways of running a grid, configuration by
configuration, on hand-made measure documents."""

from __future__ import annotations

import gzip
import json

import pytest
from conftest import load_experiment

grid = load_experiment("paired_grid")


def run(label: str, way: str, s_per_proof: float, failed: int = 0) -> dict:
    proofs = {"submitted": 6, "completed": 6 - failed, "failed": failed, "not_started": 0}
    return {
        "label": label,
        "mapping": way,
        "measured": {"throughput_s_per_proof": s_per_proof, "proofs": proofs},
    }


RUNS = [
    run("A", "one call", 1.2),
    run("A", "in steps", 1.0),
    run("A", "in steps", 1.1),
    run("B", "one call", 0.9),
    run("B", "in steps", 0.9),
    run("B", "in steps", 2.0, failed=2),  # lost proofs: left out, counted
]


def test_each_configuration_is_paired_and_runs_that_lost_a_proof_are_left_out(tmp_path):
    path = tmp_path / "grid.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(RUNS, f)
    ways, got, lost = grid.pair(grid.load([str(path)]), "mapping")
    assert ways == ["one call", "in steps"]
    assert got["A"] == {"one call": [1.2], "in steps": [1.0, 1.1]} and got["B"]["in steps"] == [0.9]
    assert lost == {"in steps": 1}
    text = grid.table(ways, got, lost, base="in steps")
    assert "| A | 1.050 (1.000-1.100, 2) | 1.200 (1.200-1.200, 1) | 1.143 |" in text  # 1.2 / 1.05
    assert "| B | 0.900 (0.900-0.900, 1) | 0.900 (0.900-0.900, 1) | 1.000 |" in text
    assert "median 1.071, 1.000-1.143 over 2 configurations" in text
    assert "in steps 1, one call 0" in text


def test_a_base_the_runs_do_not_have_is_refused():
    ways, got, lost = grid.pair(RUNS, "mapping")
    with pytest.raises(SystemExit, match="the runs' ways are"):
        grid.table(ways, got, lost, base="pinned")
