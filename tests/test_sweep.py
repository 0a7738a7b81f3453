"""Sweeps on a real Dask LocalCluster (2 worker processes): the same numbers as a loop of
predict() calls, the grid's syntax and its errors, the outputs, and the price fields."""

from __future__ import annotations

import csv
import json
import socket
import sys
import time

import pytest

from simgpu.cli import main
from simgpu.config import PipelineConfig, load_config
from simgpu.errors import UserError
from simgpu.model.montecarlo import predict
from simgpu.profile import find_profile
from simgpu.sched.registry import resolve_design
from simgpu.sweep.grid import MAX_POINTS, build_grid, parse_axis
from simgpu.sweep.point import ProfileSpec, run_rows
from simgpu.sweep.results import SAFE_RISK, SweepResult

G = 1 << 30


@pytest.fixture(scope="module")
def cluster():
    """A LocalCluster of 2 worker processes, as CI's 2 cores run it."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as lc:
        with Client(lc, set_as_default=False) as client:
            yield client


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------ the grid


def test_ranges_and_lists():
    assert parse_axis("vram", "8G..20G:4G").values == (8 * G, 12 * G, 16 * G, 20 * G)
    assert parse_axis("vram", "8G..20G:4G").span == (8 * G, 20 * G, 4 * G)
    # a range whose step does not land on its end stops before it
    assert parse_axis("vram", "8G..18G:4G").values == (8 * G, 12 * G, 16 * G)
    assert parse_axis("gpu_workers", "1..4").values == (1, 2, 3, 4)
    assert parse_axis("gpu_workers", "1..7:3").values == (1, 4, 7)
    lst = parse_axis("concurrency", "1,2,4,2")
    assert lst.values == (1, 2, 4) and lst.span is None
    mixed = parse_axis("host_ram", "256G..512G:128G,755GiB")
    assert mixed.values == (256 * G, 384 * G, 512 * G, 755 * G) and mixed.span is None
    assert parse_axis("design", "all").values[:2] == ("serial", "single-lock")
    assert parse_axis("design", "two-lock, single-lock").values == ("two-lock", "single-lock")


@pytest.mark.parametrize(
    ("axis", "text", "message"),
    [
        ("vram", "8G..", "a range is low..high"),
        ("vram", "8G..48G:", "a range is low..high"),
        ("vram", "8G..48G", "a size range needs a step"),
        ("vram", "48G..8G:4G", "runs backwards"),
        ("vram", "8G..48G:0", "the step must be positive"),
        ("vram", "banana", "cannot parse 'banana'"),
        ("vram", "16G,,24G", "an empty value"),
        ("gpu_workers", "0..3", "at least 1"),
        ("gpu_workers", "2.5", "expected a whole number"),
        ("concurrency", "1..1000000", "the grid limit is"),
        ("design", "single-lock,nope", "unknown design 'nope'"),
        ("banana", "1", "unknown axis 'banana'"),
    ],
)
def test_a_bad_axis_is_a_user_error(axis, text, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace("^", r"\^")):
        parse_axis(axis, text)


def test_axes_not_given_hold_the_base_values():
    base = PipelineConfig(gpu_workers_per_device=3, concurrency=2, vram=24 * G)
    grid = build_grid({"partition_workers": "4,8"}, base, 16 * G, 755 * G, "two-lock")
    points = list(grid.points())
    assert grid.size == len(points) == 2 and grid.varying() == ["partition_workers"]
    assert {(p.design, p.gpu_workers, p.vram, p.host_ram, p.concurrency) for p in points} == {
        ("two-lock", 3, 24 * G, 755 * G, 2)
    }
    assert [p.partition_workers for p in points] == [4, 8]
    with pytest.raises(UserError, match=f"limit is {MAX_POINTS:,}"):
        build_grid({"gpu_workers": "1..300", "concurrency": "1..300"}, base, 16 * G, 755 * G, "two-lock")


# ------------------------------------------------------------------ the same as serial


def _serial(spec, base, wl, points, runs):
    """What the sweep must equal: predict() point by point, in this process."""
    prof = spec.load()
    out = []
    for p in points:
        try:
            pred = predict(prof, p.config(base), wl, resolve_design(p.design), runs=runs)
        except UserError as e:
            out.append((None, [], str(e)))
            continue
        out.append((pred.aggregate(), run_rows(pred.summaries), None))
    return out


def test_a_sweep_on_the_cluster_equals_predict_point_by_point(cluster):
    from simgpu.sweep.cluster import PointRunner

    spec = ProfileSpec.read(find_profile("seed-rtx5070ti"))
    prof = spec.load()
    base = PipelineConfig(seed=7)
    wl = prof.workload()
    # A point that cannot be built (12G), OOMs (two-lock at 16G), host-RAM OOMs (300G), and
    # safe ones.
    grid = build_grid(
        {
            "design": "two-lock,single-lock",
            "vram": "12G,16G,24G",
            "host_ram": "300G,755G",
            "gpu_workers": "1,3",
        },
        base,
        prof.hardware.vram,
        prof.hardware.host_ram,
        "single-lock",
    )
    points = list(grid.points())
    runs = 2
    got = PointRunner(cluster, spec, base, wl, runs).run(points)
    want = _serial(spec, base, wl, points, runs)
    assert [r.point for r in got] == points
    for r, (agg, rows, error) in zip(got, want, strict=True):
        assert r.error == error, r.point
        assert r.aggregate == agg, r.point  # every field: throughput, latencies, peaks, stages, OOM risk
        assert r.runs == rows, r.point
        if agg is not None:
            assert [row["seed"] for row in r.runs] == [7, 8]
    kinds = {
        (r.error is not None, r.oom_risk > 0, bool(r.aggregate and r.aggregate["host"]["oom"])) for r in got
    }
    assert (True, True, False) in kinds  # cannot be built
    assert (False, True, True) in kinds  # host RAM OOM at 300G
    assert (False, False, False) in kinds  # safe
    assert any(r.ok and r.oom_risk == 1.0 and not r.aggregate["host"]["oom"] for r in got)  # VRAM OOM

    sweep = SweepResult(grid, got, prof.name, wl, base, runs)
    rows = sweep.rows()
    safe = [row for row in rows if row["safe"]]
    assert safe and all(row["oom_risk"] <= SAFE_RISK and row["throughput_s_per_proof"] for row in safe)
    best = sweep.best()
    assert rows[best]["proofs_per_hour"] == max(row["proofs_per_hour"] for row in safe)
    for entry in sweep.safe_minima():
        mine = [row for row in safe if row["design"] == entry["design"]]
        assert entry["vram"]["bytes"] == min(row["vram"] for row in mine)
        assert entry["host_ram"]["bytes"] == min(row["host_ram"] for row in mine)
    two_lock = next(e for e in sweep.safe_minima() if e["design"] == "two-lock")
    # one GPU worker never races for VRAM, and cuzk's budget keeps 300G safe
    assert two_lock["host_ram"]["bytes"] == 300 * G and two_lock["vram"]["bytes"] == 16 * G


# ------------------------------------------------------------------ the command


def _sweep_json(capsys, *args: str) -> dict:
    code = main(["sweep", *args, "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def test_the_command_on_a_running_scheduler(cluster, capsys):
    doc = _sweep_json(
        capsys,
        "--scheduler",
        cluster.scheduler.address,
        "-d",
        "single-lock,two-lock",
        "--vram",
        "16G..24G:8G",
        "--gpu-workers",
        "1,3",
        "--runs",
        "2",
        "--price-per-hour",
        "3.6",
    )
    assert doc["schema"] == "simgpu.sweep/1" and doc["mode"] == "sweep"
    assert doc["runs"] == 2 and doc["seeds"] == [0, 1] and doc["price_per_hour"] == 3.6
    assert doc["axes"]["vram"] == [16 * G, 24 * G] and doc["axes"]["gpu_workers"] == [1, 3]
    assert len(doc["points"]) == 8 and [p["index"] for p in doc["points"]] == list(range(8))
    for p in doc["points"]:
        if p["throughput_s_per_proof"]:
            assert p["proofs_per_hour"] == pytest.approx(3600 / p["throughput_s_per_proof"])
            assert p["price_per_proof"] == pytest.approx(3.6 / p["proofs_per_hour"])
    # two-lock with 3 GPU workers on 16 GiB is the Phase 10 OOM
    p = next(
        p for p in doc["points"] if (p["design"], p["gpu_workers"], p["vram"]) == ("two-lock", 3, 16 * G)
    )
    assert p["oom_risk"] > 0 and not p["safe"]
    best = doc["points"][doc["best"]]
    assert best["safe"] and best["proofs_per_hour"] == max(
        q["proofs_per_hour"] for q in doc["points"] if q["safe"]
    )
    assert {e["design"] for e in doc["safe_minimum"]} == {"single-lock", "two-lock"}

    # The same points one at a time with predict give the same throughput.
    for p in doc["points"][:2]:
        code = main(
            [
                "predict",
                "--json",
                "-d",
                p["design"],
                "--vram",
                str(p["vram"]),
                "--gpu-workers",
                str(p["gpu_workers"]),
            ]
            + ["--runs", "2", "--price-per-hour", "3.6"]
        )
        one = json.loads(capsys.readouterr().out)
        assert code == 0
        assert one["throughput_s_per_proof"] == p["throughput_s_per_proof"]
        assert (
            one["proofs_per_hour"] == p["proofs_per_hour"] and one["price_per_proof"] == p["price_per_proof"]
        )
        assert one["oom_risk"]["ci95"][1] == p["oom_risk_ci95_hi"]


def test_the_default_local_cluster_writes_every_output(cluster, tmp_path, capsys):
    import pyarrow.parquet as pq

    args = ["-d", "two-lock", "--vram", "12G,16G,20G", "--gpu-workers", "1,2", "--runs", "2"]
    # The default: a LocalCluster started (and stopped) by the command itself.
    code = main(
        [
            "sweep",
            *args,
            "--workers",
            "2",
            "--out",
            str(tmp_path / "p.parquet"),
            "--plot",
            str(tmp_path / "m.png"),
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "smallest safe VRAM for two-lock: 16.00 GiB" in out.out
    assert "cannot be built" in out.out  # 12G cannot hold one partition
    assert (tmp_path / "m.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = pq.read_table(tmp_path / "p.parquet").to_pylist()
    assert len(table) == 6 and table[0]["status"] == "invalid" and table[0]["throughput_s_per_proof"] is None

    # The same grid on another cluster, written as CSV and JSON: the same rows.
    on = ["--scheduler", cluster.scheduler.address, "--no-progress"]
    assert main(["sweep", *args, *on, "--out", str(tmp_path / "p.csv")]) == 0
    assert main(["sweep", *args, *on, "--out", str(tmp_path / "p.json")]) == 0
    capsys.readouterr()
    with (tmp_path / "p.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [r["vram"] for r in rows] == [str(t["vram"]) for t in table]
    assert [r["proofs_per_hour"] for r in rows] == [
        "" if t["proofs_per_hour"] is None else repr(t["proofs_per_hour"]) for t in table
    ]
    doc = json.loads((tmp_path / "p.json").read_text())
    assert doc["points"] == table


def test_progress_goes_to_stderr_and_json_stays_clean(cluster, capsys):
    code = main(
        ["sweep", "--scheduler", cluster.scheduler.address, "--gpu-workers", "1,2", "--runs", "1", "--json"]
    )
    out = capsys.readouterr()
    assert code == 0
    json.loads(out.out)  # nothing but the document on stdout
    assert "sweep: 2 points" in out.err


def test_a_grid_none_of_whose_points_can_be_built_writes_them_and_exits_2(cluster, tmp_path, capsys):
    """Every point too small for one partition: the points are still written, each with
    its reason, and the command ends as bad input does, one line and exit 2, rather than
    a table of nothing that reads as success."""
    on = ["--scheduler", cluster.scheduler.address, "--no-progress", "--runs", "1"]
    code = main(["sweep", *on, "--vram", "4G,8G", "--out", str(tmp_path / "p.json")])
    out = capsys.readouterr()
    assert code == 2
    assert out.out.count("cannot be built:") == 2  # the table's reasons, one per point
    (line,) = out.err.strip().splitlines()
    assert line.startswith("error: no point of the grid can be built: a partition of")
    assert "circuit too big for this profile" in line
    points = json.loads((tmp_path / "p.json").read_text())
    assert len(points["points"]) == 2 and all(p["status"] == "invalid" for p in points["points"])
    code = main(["sweep", *on, "--vram", "4G,16G"])  # one point that runs: a result
    assert code == 0, capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--vram", "8G..48G"], "a size range needs a step"),
        (["--gpu-workers", "1..x"], "expected a whole number"),
        (["--concurrency", "0,1"], "at least 1"),
        (["-d", "nope"], "unknown design 'nope'"),
        (["--x", "banana"], "--x 'banana': unknown axis"),
        (["--x", "vram", "--y", "vram"], "pick two different axes"),
        (["--price-per-hour", "-2"], "--price-per-hour: must be a non-negative number"),
        (["--runs", "0"], "--runs: must be in 1.."),
        (["--out", "points.xlsx"], "write .parquet, .csv or .json"),
        (["--scheduler", "banana"], "cannot reach the Dask scheduler at banana"),
        (["--workers", "0"], "--workers: must be in 1.."),
        (["--workers", "2", "--scheduler", "tcp://127.0.0.1:1"], "--workers sizes the LocalCluster"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message, capsys):
    code = main(["sweep", *args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_an_unreachable_scheduler_times_out_in_seconds(capsys):
    address = f"tcp://127.0.0.1:{_free_port()}"
    t0 = time.perf_counter()
    code = main(["sweep", "--scheduler", address, "--runs", "1"])
    err = capsys.readouterr().err
    assert code == 2 and f"cannot reach the Dask scheduler at {address}" in err
    assert len(err.strip().splitlines()) == 1
    assert time.perf_counter() - t0 < 20


def test_without_the_extra_the_command_says_how_to_install(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` now fails
    assert main(["sweep"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'simgpu[sweep]'" in err and len(err.strip().splitlines()) == 1
    monkeypatch.undo()
    monkeypatch.setitem(sys.modules, "optuna", None)
    assert main(["tune", "--gpu-workers", "1..2", "--max-oom-risk", "0.5"]) == 2
    assert "needs optuna" in capsys.readouterr().err


def test_without_matplotlib_the_plot_says_how_to_get_it(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["sweep", "--plot", str(tmp_path / "m.png")]) == 2
    assert "--plot needs matplotlib: pip install 'simgpu[plot]'" in capsys.readouterr().err


# ------------------------------------------------------------------ predict: host RAM and price


def test_predict_takes_host_ram_and_a_price(tmp_path, capsys):
    # a budget beyond the RAM admits more partitions than it holds: the host runs out
    over = ["--memory-budget", "1T", "-n", "6", "-j", "6"]
    assert main(["predict", "--json", "--host-ram", "300G", "--price-per-hour", "2", *over]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["host"]["ram_bytes"] == 300 * G and doc["config"]["host_ram"] == 300 * G
    assert doc["host"]["oom"] and doc["host"]["peak_rss_bytes"] <= 300 * G
    assert doc["price_per_hour"] == 2.0
    assert doc["proofs_per_hour"] == pytest.approx(3600 / doc["throughput_s_per_proof"])
    assert doc["price_per_proof"] == pytest.approx(2 / doc["proofs_per_hour"])
    f = tmp_path / "cuzk.toml"
    f.write_text('[hardware]\nhost_ram = "300GiB"\n')
    assert load_config(f).host_ram == 300 * G
    assert main(["predict", "--json", "--config", str(f), "--price-per-hour", "2", *over]) == 0
    assert json.loads(capsys.readouterr().out)["throughput_s_per_proof"] == doc["throughput_s_per_proof"]
    # the table shows them too; without a price the document has no price fields
    assert main(["predict", "--price-per-hour", "2"]) == 0
    assert "proofs per hour" in capsys.readouterr().out
    assert main(["predict", "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert "price_per_hour" not in plain and "host_ram" not in plain["config"]
