"""experiments/refit_uses.py: a lease's calibration refitted with today's fits, from its
fastest calls or with another size's device pairings (docs/validation-log.md, the
twenty-seventh lease, compares them)."""

from __future__ import annotations

import json
import sys
import tomllib

from conftest import ROOT, load_experiment

refit_uses = load_experiment("refit_uses")
LEASE = ROOT / "docs" / "data" / "h100-2026-12-05f"


def refit(monkeypatch, tmp_path, *args: str) -> dict:
    out = tmp_path / "refit.toml"
    profile = LEASE / "call1" / "h100-cupy-key.toml"
    argv = ["refit_uses.py", "--profile", str(profile), "--out", str(out), *args]
    monkeypatch.setattr(sys, "argv", argv)
    refit_uses.main()
    return tomllib.loads(out.read_text())


def pressure(doc: dict, stage: str) -> float:
    return doc["stages"][stage]["uses"]["pressure"]["bound"]


def test_the_fastest_calls_read_the_kernels_pressure_from_one_mixed_pair(monkeypatch, tmp_path):
    """The lease's kernels: pairs of calls back to back read 1.21x beside eight syntheses
    on 16 cores (b = 0.42); the fastest call beside came from the pair whose call alone
    ran slow, and against the fastest alone reads 1.09x (b = 0.18)."""
    pairs = refit(monkeypatch, tmp_path)
    fastest = refit(monkeypatch, tmp_path, "--pressure-fastest")
    assert round(pressure(pairs, "kernels"), 2) == 0.42
    assert round(pressure(fastest, "kernels"), 2) == 0.18
    assert "pressure_pairs" not in fastest["calibration"]["contention"]
    assert pairs["stages"]["prep"]["uses"]["cores"] == fastest["stages"]["prep"]["uses"]["cores"]


def test_another_sizes_device_pairings_replace_calibrates(monkeypatch, tmp_path):
    """At 2^22 a prestage beside the other worker's kernels lost more of its time to the
    device than at 2^20, calibrate's size: its device share under the exclusive law goes
    from 0.11 to 0.32, the rest of it the link's."""
    queue = LEASE / "call4" / "queue-22.json"
    doc = refit(monkeypatch, tmp_path, "--device-queue", str(queue))
    uses = doc["stages"]["prestage"]["uses"]
    assert round(uses["gpu"]["bound"], 2) == 0.32 and round(uses["h2d"]["bound"], 2) == 0.68
    want = json.loads(queue.read_text())["device_queue"]["prestage beside kernel_load"]
    assert doc["calibration"]["device_queue"]["prestage_beside_kernel_load"] == want
