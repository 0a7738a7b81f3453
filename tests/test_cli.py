"""The command line through typer's test runner: the main job, the JSON schema, bad input."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from simgpu.cli import app, main

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def predict_json(*args: str) -> dict:
    r = invoke("predict", "--json", *args)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_the_readme_command_predicts_the_phase_10_oom():
    r = invoke("predict", "--design", "two-lock", "--vram", "16G", "--gpu-workers", "3", "--runs", "40")
    assert r.exit_code == 0, r.output
    assert "OOM event" in r.stdout and "OOM risk" in r.stdout
    assert "stage kernels, worker gpu0.w" in r.stdout
    assert "requested 4.00 GiB for d_a, free 3.50 GiB" in r.stdout


def test_json_schema():
    doc = predict_json("--design", "two-lock", "--gpu-workers", "3", "--runs", "3")
    assert doc["schema"] == "simgpu.report/1" and doc["mode"] == "predict"
    assert doc["design"] == "two-lock" and doc["profile"] == "seed-rtx5070ti"
    assert doc["workload"] == {"name": "porep-32g", "partitions": 10, "constraints": 130278869}
    assert set(doc["proofs"]) == {"submitted", "completed", "failed", "not_started"}
    assert doc["proofs"]["submitted"] == 9 and doc["proofs"]["failed"] >= 1
    assert set(doc["latency_s"]) >= {"p50", "p95"}
    (dev,) = doc["devices"]
    assert set(dev) >= {"device", "busy_frac", "peak_vram_bytes", "oom_events", "vram_bytes"}
    assert dev["vram_bytes"] == 16 << 30 and dev["oom_events"] >= 1
    assert set(doc["host"]) >= {"peak_rss_bytes", "oom", "ram_bytes"}
    risk = doc["oom_risk"]
    assert risk["runs"] == 3 and 0 < risk["p"] < 1 and len(risk["ci95"]) == 2
    oom = doc["oom_events"][0]
    assert set(oom) >= {"stage", "worker", "buffer", "requested_bytes", "free_bytes", "pool", "t"}
    assert len(doc["runs"]) == 3 and doc["deadlock"] is None
    assert "gpu0/mem" in doc["locks"] and "gpu0/compute" in doc["locks"]


def test_single_lock_json_has_a_throughput():
    """cuzk-bench -c 3 -j 1: at least one proof's 35.5 s synthesis plus ten 1.82 s GPU
    passes (docs/validation.md: the sheet's 32.1 s/proof is not kept)."""
    doc = predict_json("--design", "single-lock", "--proofs", "3", "--concurrency", "1", "--gpu-workers", "1")
    assert doc["proofs"]["failed"] == 0
    assert 35.5 + 10 * 1.82 < doc["throughput_s_per_proof"] < 62


def test_flags_override_the_config_file(tmp_path):
    f = tmp_path / "cuzk.toml"
    f.write_text("[gpus]\ngpu_workers_per_device = 1\n[run]\nproofs = 2\nconcurrency = 1\n")
    doc = predict_json("--config", str(f), "--proofs", "4")
    assert doc["config"]["gpu_workers_per_device"] == 1
    assert doc["proofs"]["submitted"] == 4


def test_a_users_design_file(tmp_path):
    f = tmp_path / "mine.py"
    f.write_text(
        "def everything_locked(rt, worker, part):\n"
        "    '''My design: like serial, but written by me.'''\n"
        "    lock = rt.lock('all', worker.device)\n"
        "    yield lock.acquire()\n"
        "    try:\n"
        "        h = yield rt.stage('prestage', part, worker.device)\n"
        "        yield rt.stage('kernels', part, worker.device, buffers=h)\n"
        "        rt.free(h)\n"
        "        yield rt.stage('b_g2_msm', part, worker.device)\n"
        "        part.complete((yield rt.stage('epilogue', part, worker.device)))\n"
        "    finally:\n"
        "        lock.release()\n"
    )
    doc = predict_json("--design", f"{f}:everything_locked")
    assert doc["proofs"]["failed"] == 0 and "gpu0/all" in doc["locks"]


def test_trace_and_plot(tmp_path):
    trace, plot = tmp_path / "t.json", tmp_path / "p.png"
    r = invoke(
        "predict", "--design", "two-lock", "--gpu-workers", "3", "--trace", str(trace), "--plot", str(plot)
    )
    assert r.exit_code == 0, r.output
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"gpu0.w0", "gpu0.w1", "gpu0/mem", "gpu0/compute"} <= names
    assert any(e["ph"] == "C" and e["name"] == "VRAM GiB" for e in events)
    assert any(e["ph"] == "C" and e["name"] == "host RSS GiB" for e in events)
    oom = next(e for e in events if e["ph"] == "i" and e["name"] == "OOM")
    # who held the rest: the other worker's pre-staged buffers, waiting for compute
    held = {(h["buffer"], h["stage"], h["waits_for"]) for h in oom["args"]["holders"]}
    assert held == {("d_a", "prestage", "gpu0/compute"), ("d_bc", "prestage", "gpu0/compute")}
    assert {e["name"] for e in events if e["ph"] == "X"} >= {
        "prestage",
        "kernels",
        "synthesis",
        "membw oversubscribed",
    }
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_designs_lists_one_line_each():
    r = invoke("designs")
    lines = r.stdout.strip().splitlines()
    assert [line.split()[0] for line in lines] == [
        "serial",
        "single-lock",
        "two-lock",
        "two-lock-reserve",
        "split-finalizer",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--vram", "banana"], "--vram: cannot parse 'banana'"),
        (["--vram", "-16G"], "must not be negative"),
        (["--vram", "256M"], "resident on the device"),
        (["--design", "nope"], "unknown design 'nope'"),
        (["--design", "missing.py:d"], "design file not found"),
        (["--gpu-workers", "0"], "must be a whole number in 1.."),
        (["--partition-workers", "0"], "must be a whole number in 1.."),
        (["--constraints", "2^40"], "no NTT domain beyond 2^32"),
        (["--constraints", "2^31"], "circuit too big for this profile"),
        (["--profile", "nope"], "profile 'nope' not found"),
        (["--runs", "0"], "--runs"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message, capsys):
    code = main(["predict", *args])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_malformed_toml_is_one_line(tmp_path, capsys):
    f = tmp_path / "bad.toml"
    f.write_text("[gpus\nx=")
    assert main(["predict", "--config", str(f)]) == 2
    err = capsys.readouterr().err
    assert "is not valid TOML" in err and len(err.strip().splitlines()) == 1
    assert main(["predict", "--profile", str(f)]) == 2


def test_unknown_option_is_one_line(capsys):
    assert main(["predict", "--bogus"]) == 2
    err = capsys.readouterr().err
    assert "No such option" in err and len(err.strip().splitlines()) == 1
