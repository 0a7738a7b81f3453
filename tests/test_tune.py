"""Tuning with Optuna on a real Dask LocalCluster (2 worker processes): reproducible, the
constraints as the issue states them, and a TOML that `predict --config` reads back to
the same numbers."""

from __future__ import annotations

import json
import tomllib
from dataclasses import fields

import pytest

from simgpu.cli import main
from simgpu.config import PipelineConfig, load_config
from simgpu.errors import UserError
from simgpu.profile import find_profile
from simgpu.report.metrics import wilson_interval
from simgpu.sweep.cuzk_toml import KEYS, config_toml
from simgpu.sweep.grid import build_grid
from simgpu.sweep.point import ProfileSpec
from simgpu.sweep.tune import min_runs, tune

G = 1 << 30


@pytest.fixture(scope="module")
def cluster():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as lc:
        with Client(lc, set_as_default=False) as client:
            yield client


@pytest.mark.parametrize("p", [0.5, 0.2, 0.05, 0.01])
def test_min_runs_is_the_fewest_that_can_show_the_bound(p):
    n = min_runs(p)
    assert wilson_interval(0, n)[1] <= p < wilson_interval(0, n - 1)[1]


def test_min_runs_refuses_a_risk_outside_0_1():
    for p in (0.0, 1.0, -0.1):
        with pytest.raises(UserError, match="--max-oom-risk"):
            min_runs(p)


def _space():
    spec = ProfileSpec.read(find_profile("seed-rtx5070ti"))
    prof = spec.load()
    base = PipelineConfig()
    grid = build_grid(
        {
            "design": "two-lock,single-lock",
            "gpu_workers": "1..3",
            "vram": "12G,16G,24G",
            "concurrency": "1..3",
        },
        base,
        prof.hardware.vram,
        prof.hardware.host_ram,
        "single-lock",
    )
    return spec, prof, base, grid


def test_tune_is_reproducible_and_keeps_to_its_constraints(cluster):
    from simgpu.sweep.cluster import PointRunner

    spec, prof, base, grid = _space()
    runs = min_runs(0.5)
    runner = PointRunner(cluster, spec, base, prof.workload(), runs)
    first = tune(runner, grid, 16, max_oom_risk=0.5, sampler_seed=3, batch=4)
    again = tune(runner, grid, 16, max_oom_risk=0.5, sampler_seed=3, batch=4)
    assert [(t.point, t.proofs_per_hour, t.feasible) for t in first.trials] == [
        (t.point, t.proofs_per_hour, t.feasible) for t in again.trials
    ]
    assert len(first.trials) == 16 and first.evaluated <= 16
    assert first.best == again.best and first.best_trial is not None
    for t in first.trials:
        r = t.result
        if r.error is not None:  # 12G cannot hold one partition: an OOM, so infeasible
            assert not t.feasible and "cannot be built" in t.why
        elif t.feasible:
            assert r.oom_upper <= 0.5 and r.throughput is not None
        else:
            assert r.oom_upper > 0.5 or r.throughput is None
    best = first.best_trial
    assert best.feasible
    assert best.proofs_per_hour == max(t.proofs_per_hour for t in first.trials if t.feasible)
    assert any(not t.feasible for t in first.trials)

    # A limit on host RAM below what the fastest configurations hold changes the answer.
    limit = int(best.result.peak_rss * 0.9)
    capped = tune(runner, grid, 16, max_oom_risk=0.5, max_host_ram=limit, sampler_seed=3, batch=4)
    assert all(t.result.peak_rss <= limit for t in capped.trials if t.feasible)
    assert any("peak host RSS" in t.why for t in capped.trials)


def test_best_toml_reads_back_to_the_same_prediction(cluster, tmp_path, capsys):
    best = tmp_path / "best.toml"
    args = [
        "-d",
        "two-lock,single-lock",
        "--gpu-workers",
        "1..3",
        "--vram",
        "12G,16G,24G",
        "--concurrency",
        "1..3",
    ]
    args += ["--max-oom-risk", "0.3", "--trials", "10", "--batch", "5", "--sampler-seed", "1", "--seed", "4"]
    args += [
        "--price-per-hour",
        "2.5",
        "--out",
        str(best),
        "--scheduler",
        cluster.scheduler.address,
        "--json",
    ]
    code = main(["tune", *args])
    out = capsys.readouterr()
    assert code == 0, out.err
    doc = json.loads(out.out)
    assert (
        doc["schema"] == "simgpu.tune/1"
        and doc["runs"] == min_runs(0.3)
        and doc["seeds"] == [4, 4 + doc["runs"] - 1]
    )
    b = doc["best"]
    assert b["feasible"] and b["oom_risk"]["ci95"][1] <= 0.3
    assert b["price_per_proof"] == pytest.approx(2.5 / b["proofs_per_hour"])
    assert tomllib.loads(best.read_text())["gpus"]["gpu_workers_per_device"] == b["gpu_workers"]

    code = main(
        ["predict", "--json", "--config", str(best), "--design", b["design"], "--runs", str(doc["runs"])]
        + ["--price-per-hour", "2.5"]
    )
    again = json.loads(capsys.readouterr().out)
    assert code == 0
    assert again["throughput_s_per_proof"] == b["throughput_s_per_proof"]
    assert (
        again["proofs_per_hour"] == b["proofs_per_hour"] and again["price_per_proof"] == b["price_per_proof"]
    )
    assert again["oom_risk"] == b["oom_risk"]
    assert again["config"]["vram"] == b["vram"] and again["config"]["concurrency"] == b["concurrency"]
    assert b["reproduce"] in best.read_text()


def test_the_table_names_the_best_and_the_file(cluster, tmp_path, capsys):
    best = tmp_path / "best.toml"
    code = main(
        ["tune", "--gpu-workers", "1..2", "--max-oom-risk", "0.5", "--trials", "4", "--out", str(best)]
        + ["--scheduler", cluster.scheduler.address, "--price-per-hour", "1"]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "best configuration" in out.out and f"wrote {best}" in out.out and "$ per proof" in out.out
    assert "tune: 4 trials" in out.err  # the progress bar, on stderr


def test_no_feasible_trial_is_exit_1_and_no_file(cluster, tmp_path, capsys):
    best = tmp_path / "best.toml"
    code = main(
        ["tune", "-d", "two-lock", "--vram", "12G,16G", "--gpu-workers", "2..3", "--max-oom-risk", "0.5"]
        # 12G cannot hold a partition; 16G can, but one proof alone peaks near 200 GiB of host RSS
        + ["--max-host-ram", "100G"]
        + ["--trials", "4", "--out", str(best), "--scheduler", cluster.scheduler.address, "--no-progress"]
    )
    out = capsys.readouterr()
    assert code == 1 and "no trial met the constraints" in out.err
    assert "infeasible" in out.out and not best.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpu-workers", "1..2", "--runs", "5"], "takes at least 73 runs"),
        (["--gpu-workers", "1..2", "--max-oom-risk", "0"], "--max-oom-risk: must be between 0 and 1"),
        (["--max-oom-risk", "0.5"], "nothing to tune"),
        (["--gpu-workers", "1..2", "--max-oom-risk", "0.5", "--trials", "0"], "--trials: must be in 1.."),
        (["--gpu-workers", "1..2", "--max-host-ram", "lots"], "--max-host-ram: cannot parse"),
        (["--gpu-workers", "1..2", "--out", "/nonexistent/dir/best.toml"], "does not exist"),
        (["--gpu-workers", "0..2"], "at least 1"),
        (["--gpu-workers", "1..2", "--price-per-hour", "-1"], "--price-per-hour"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message, capsys):
    code = main(["tune", *args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_every_config_field_round_trips_through_the_toml(tmp_path):
    cfg = PipelineConfig(
        devices=2,
        gpu_workers_per_device=3,
        partition_workers=12,
        max_gpu_queue_depth=5,
        total_budget=300 * G,
        safety_margin=3 * G + 5,  # not whole MiB: written as bytes
        vram=24 * G,
        host_ram=512 * G,
        workload="porep-32g",
        partitions=4,
        constraints=1 << 20,
        proofs=7,
        concurrency=2,
        arrival_rate=0.25,
        seed=9,
        retries=2,
        retry_backoff=0.5,
    )
    assert {f.name for f in fields(cfg)} == set(KEYS)
    for c in (cfg, PipelineConfig()):
        f = tmp_path / "c.toml"
        f.write_text(config_toml(c, header="a header\nof two lines"))
        assert load_config(f) == c
