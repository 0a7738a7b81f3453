"""The all-core host watcher (experiments/host_modes.py), how a validation reads each
run's stretch of it against calibrate's (gpu_validation.predict --host-watch,
--host-scaled), and how a stage's time follows its core's speed
(experiments/host_sensitivity.py)."""

from __future__ import annotations

import gzip
import math
import os

import pytest
from conftest import load_experiment, tiny_profile

host_modes = load_experiment("host_modes")
gpu_validation = load_experiment("gpu_validation")


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity"),
    reason="the watcher pins a probe to each core: os.sched_setaffinity is Linux-only",
)
def test_a_watch_writes_every_cores_samples_as_it_takes_them(tmp_path):
    out = tmp_path / "host.csv"
    host_modes.watch(out, seconds=1.0, gap=0.1, cores=2)
    rows = host_modes.read(out)
    assert {core for _, core, _ in rows} == {0, 1}
    assert all(ms > 0 for _, _, ms in rows)
    # a gzipped file reads the same, and a line cut short by a stopped watcher is skipped
    gz = tmp_path / "host.csv.gz"
    gz.write_bytes(gzip.compress(out.read_bytes() + b"1796487000.1,0"))
    assert host_modes.read(gz) == rows
    assert "host mean factor" in host_modes.summary(rows)


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity"),
    reason="the watcher pins a probe to each core: os.sched_setaffinity is Linux-only",
)
def test_a_killed_watch_stops_its_probes(tmp_path):
    import subprocess
    import sys
    import time

    out = tmp_path / "host.csv"
    script = host_modes.__file__
    err = tmp_path / "watch.err"
    with err.open("w") as stderr:
        w = subprocess.Popen(
            [sys.executable, script, "watch", str(out), "--seconds", "60", "--cores", "2"], stderr=stderr
        )
        deadline = time.time() + 30
        while (not out.exists() or out.stat().st_size == 0) and time.time() < deadline:
            time.sleep(0.1)
        w.terminate()
        assert w.wait(timeout=10) == 0
    assert out.exists(), f"no sample in 30 s; the watcher said: {err.read_text()[-2000:]}"
    size = out.stat().st_size
    time.sleep(1.0)  # nothing writes after the watcher is gone
    assert out.stat().st_size == size > 0


def test_the_mean_factor_is_every_sample_over_the_fastest():
    # one core at full speed, one in the slow mode: the host runs at 1.5x on average
    rows = [(0.0, 0, 1.0), (0.0, 1, 2.0), (0.25, 0, 1.0), (0.25, 1, 2.0)]
    assert host_modes.mean_factor(rows, fastest=1.0) == pytest.approx(1.5)


def _run(t0: float, t1: float, measured: float, predicted: float) -> tuple[dict, dict]:
    return (
        {"wall_s": [t0, t1]},
        {
            "throughput (s/proof)": {"measured": measured, "predicted": predicted},
            "proofs failed": {"measured": 0},
            "OOM": {"p": 0.0},  # the model expects every proof done
        },
    )


def test_each_run_is_binned_by_the_host_during_it_against_calibrates(tmp_path):
    watch = tmp_path / "host.csv"
    lines = []
    for t in range(0, 30):  # calibrate (0-9 s) and the first run (10-19 s) at 1.2 ms, the second at 1.8
        ms = 1.8 if t >= 20 else 1.2
        lines += [f"{t + 0.5:.3f},{c},{ms}" for c in range(4)]
    lines.append("0.1,0,1.0")  # the fastest sample
    watch.write_text("\n".join(lines) + "\n")
    table = [_run(10, 19.9, 1.0, 0.95), _run(20, 29.9, 1.0, 0.90)]
    text = " ".join(gpu_validation._error_by_host_factor(table, [str(watch)], "0,9.9"))
    assert "during calibrate 1.195" in text  # 40 samples of 1.2 and the one of 1.0: 49/41
    assert "within 10% of calibrate's: 1 runs (host 1.00-1.00x calibrate's), median -5.0%" in text
    assert "over 30% slower: 1 runs (host 1.51-1.51x calibrate's), median -10.0%" in text
    # without the watcher's files or calibrate's span it says nothing
    assert gpu_validation._error_by_host_factor(table, [], "0,9.9") == []


def test_a_profile_on_a_slower_host_takes_longer_in_its_cpu_stages_only():
    """gpu_validation.on_host: the CPU stages' phases take the factor times as long; the
    GPU stages, their uses and the buffers stay as calibrated."""
    prof = tiny_profile()
    slow = gpu_validation.on_host(prof, 1.25)
    n = 1 << 12
    before, after = prof.resolve(n), slow.resolve(n)
    assert {s.on for s in before.stages.values()} == {"cpu", "gpu"}
    for name, st in before.stages.items():
        want = 1.25 if st.on == "cpu" else 1.0
        for a, b in zip(st.phases, after.stages[name].phases, strict=True):
            assert b.seconds == pytest.approx(want * a.seconds)
            assert b.uses == a.uses
    assert after.buffers == before.buffers


host_sensitivity = load_experiment("host_sensitivity")


def test_a_stages_elasticity_is_how_its_time_follows_its_cores_speed():
    """experiments/host_sensitivity.py: a stage whose time is a fixed device part plus a
    host part that scales with the reference loop reads the host part's share (at the
    references' middle) as its elasticity; a sample whose core changed mode during the
    stage (its two references disagree) is left out."""
    device, host = 0.030, 0.020  # seconds at reference 1.0 ms
    rows = []
    for ref in (1.0, 1.1, 1.2, 1.6, 1.8, 1.9):
        rows.append([ref * 1e-3, device + host * ref, ref * 1e-3])
    rows.append([1.0e-3, 0.5, 1.9e-3])  # a mode change mid-stage: not kept
    got = host_sensitivity.summarize({"kernels": rows})["kernels"]
    assert (got["kept"], got["of"]) == (6, 7)
    assert got["ref_spread"] == pytest.approx(1.9)
    mid = 1.4  # the log-slope of device + host * r is host * r / (device + host * r)
    assert got["elasticity"] == pytest.approx(host * mid / (device + host * mid), abs=0.03)
    assert got["r2"] > 0.99
    # no spread in the references: nothing to read
    assert math.isnan(host_sensitivity.elasticity([(1.0, 2.0), (1.0, 2.0), (1.0, 3.0)])[0])
    assert host_sensitivity.elasticity([(1.0, 2.0), (2.0, 4.0), (4.0, 8.0)])[0] == pytest.approx(1.0)


def test_a_stage_follows_a_slower_host_by_its_elasticity(tmp_path):
    """on_host with measured elasticities (experiments/host_sensitivity.py's JSON, read
    at the nearest measured size): factor ** e for the stages it names; CPU stages it
    does not name follow wholly, GPU stages not at all."""
    import json

    prof = tiny_profile()
    n = 1 << 12
    measured = {
        str(1 << 11): {
            "summary": {
                "prep": {"elasticity": 0.5, "median_s": 0.01},
                "kernels": {"elasticity": float("nan"), "median_s": 0.01},
            }
        }
    }
    path = tmp_path / "hs.json"
    path.write_text(json.dumps(measured))
    e = gpu_validation.read_elasticity([str(path)], n)
    assert e == {"prep": 0.5}  # a stage the samples could not read is left to the default
    before, after = prof.resolve(n), gpu_validation.on_host(prof, 4.0, e).resolve(n)
    for name, st in before.stages.items():
        want = {"prep": 2.0}.get(name, 4.0 if st.on == "cpu" else 1.0)
        for a, b in zip(st.phases, after.stages[name].phases, strict=True):
            assert b.seconds == pytest.approx(want * a.seconds), name


def test_the_trip_backs_elasticity_is_its_steps_weighted_by_their_times(tmp_path):
    """read_elasticity: synthesis's phase "transfer" (the hand-off in the worker, then the
    driver's receive) takes their elasticities weighted by their median times, and a
    phase's elasticity wins over its stage's in on_host."""
    import json

    steps = {
        "synthesis.compute": {"elasticity": 0.5, "median_s": 0.1},
        "synthesis.hand_off": {"elasticity": 0.2, "median_s": 0.3},
        "synthesis.receive": {"elasticity": 0.8, "median_s": 0.1},
    }
    path = tmp_path / "synth.json"
    path.write_text(json.dumps({str(1 << 12): {"summary": steps}}))
    e = gpu_validation.read_elasticity([str(path)], 1 << 12)
    assert e["synthesis.transfer"] == pytest.approx((0.2 * 0.3 + 0.8 * 0.1) / 0.4)
    prof = tiny_profile()
    before = prof.resolve(1 << 12).stages["synthesis"]
    after = gpu_validation.on_host(prof, 4.0, e).resolve(1 << 12).stages["synthesis"]
    assert len(before.phases) > 0
    for a, b in zip(before.phases, after.phases, strict=True):
        want = 4.0 ** e.get(f"synthesis.{a.name}", 1.0)
        assert b.seconds == pytest.approx(want * a.seconds), a.name


def test_stage_means_on_the_runs_hosts_count_within_the_target_and_name_the_rest():
    """With every run predicted for its host, a stage's error is the mean of its runs'
    predictions against the mean of their measurements: A's kernels (two runs, predicted
    4% and 12% slow: +8% together) count as within 10%, B's (+30%) as missed."""
    got = {
        "A": {"kernels": [(0.104, 0.100), (0.112, 0.100)], "prestage": [(0.050, 0.040)]},
        "B": {"kernels": [(0.130, 0.100)]},
    }
    (line, blank) = gpu_validation._stages_on_host(got)
    assert blank == ""
    assert "kernels 1 of 2" in line and "prestage 0 of 1" in line
    assert "kernels B +30.0%" in line and "prestage A +25.0%" in line
    assert "synthesis" not in line  # a stage no run measured is not counted
    assert gpu_validation._stages_on_host({}) == []
