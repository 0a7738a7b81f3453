"""Regression tests for the bad inputs and faults of issue #12: each gives the right answer,
or one clear line naming the bad value with exit code 2, within seconds; a run that cannot
finish ends with a report and exit code 3; Ctrl-C stops a real run cleanly with 130."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import gpu_available, tiny_profile

from simgpu.cli import main
from simgpu.config import PipelineConfig, Workload
from simgpu.errors import DesignError
from simgpu.model.sim import SimRuntime
from simgpu.real.null_executor import NullExecutor
from simgpu.real.runtime import RealRuntime
from simgpu.report.metrics import summarize
from simgpu.sched.registry import resolve_design

DESIGNS = Path(__file__).parent / "designs"
MISBEHAVING = DESIGNS / "misbehaving.py"
CROSSED = DESIGNS / "crossed.py"


def cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line_error(code: int, err: str, expected: int = 2) -> None:
    assert code == expected, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err


def cli_in_subprocess(args: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    """A command in its own process, killed if it hangs (a hang fails the test)."""
    return subprocess.run(
        [sys.executable, "-m", "simgpu.cli", *args], capture_output=True, text=True, timeout=timeout
    )


# ------------------------------------------------------------------ wrong answers


TINY = str(Path(__file__).parent / "data" / "tiny.toml")
#: On the tiny profile, two-lock with three workers at 4.5 GiB runs out of VRAM in every
#: proof (worked out: two pre-staged partitions leave no room for a third's kernels).
OOMING = ["-p", TINY, "-d", "two-lock", "--vram", "4.5G", "--gpu-workers", "3", "-n", "3", "-j", "3"]


def test_a_failed_allocation_strands_nothing(capsys):
    """Every buffer booked before the one that did not fit is given back: nothing leaks,
    and no proof completes on bytes stranded by another's failure."""
    code, out, _ = cli(["predict", *OOMING, "--runs", "5", "--json"], capsys)
    doc = json.loads(out)
    assert code == 0 and doc["oom_events"]
    assert doc["leaks"] == []
    assert doc["proofs"]["completed"] == 0 and doc["proofs"]["failed"] == 15


# ------------------------------------------------------------------ hangs


@pytest.mark.parametrize(
    "args",
    [
        ["--arrival-rate", "1e-7"],
        ["--arrival-rate", "1e-6", "--proofs", "30"],
    ],
)
def test_runs_far_into_simulated_time_end(args):
    r = cli_in_subprocess(["predict", "--json", *args])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["proofs"]["completed"] == doc["proofs"]["submitted"] > 0


def test_a_huge_retry_backoff_ends_and_an_infinite_one_is_refused(tmp_path):
    cfg = tmp_path / "cuzk.toml"
    cfg.write_text("[run]\nretries = 2\nretry_backoff = 1e8\n")
    r = cli_in_subprocess(["predict", *OOMING, "--config", str(cfg), "--json"])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["proofs"]["submitted"] == doc["proofs"]["completed"] + doc["proofs"]["failed"] == 3
    assert doc["runs"][0]["makespan_s"] > 1e8  # the retries did wait out their backoff
    cfg.write_text("[run]\nretries = 2\nretry_backoff = inf\n")
    r = cli_in_subprocess(["predict", *OOMING, "--config", str(cfg)])
    assert r.returncode == 2 and "retry_backoff" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("args", [["--partitions", "100000"], ["-n", "20000", "-j", "20000"]])
def test_a_run_too_large_to_simulate_is_refused_at_once(args):
    """300,000 or 200,000 partitions would take minutes and gigabytes: one line, exit 2."""
    t = time.perf_counter()
    r = cli_in_subprocess(["predict", *args])
    assert time.perf_counter() - t < 30
    one_line_error(r.returncode, r.stderr)
    assert "partitions in one simulated run" in r.stderr


def test_a_large_closed_loop_is_not_a_livelock(monkeypatch):
    """Each client wakes once at the start without recording anything: with more clients
    than the stall budget alone allows, the run still ends, every proof completed."""
    from simgpu.model import sim

    monkeypatch.setattr(sim, "STALL_EVENTS", 50)
    cfg = PipelineConfig(proofs=400, concurrency=400, partition_workers=8)
    rt = SimRuntime(tiny_profile(), cfg, Workload("w", 1, 1 << 12))
    result = rt.run(resolve_design("single-lock").fn)
    assert result.deadlock is None
    s = summarize(result)
    assert (s.submitted, s.completed, s.failed) == (400, 400, 0)


def test_a_design_that_never_ends_is_a_livelock_in_the_model(capsys):
    code, out, err = cli(["predict", "-d", f"{MISBEHAVING}:forever", "-n", "1", "-j", "1", "--json"], capsys)
    assert code == 3, err
    doc = json.loads(out)
    assert doc["deadlock"]["kind"] == "livelock"
    assert "recorded nothing" in doc["deadlock"]["cause"]
    # the proof in flight ends failed, with the reason
    assert doc["proofs"] == {"submitted": 1, "completed": 0, "failed": 1, "not_started": 0}
    assert "cannot finish (livelock)" in doc["failures"][0]["reason"]


def test_a_design_that_never_ends_is_a_livelock_on_threads():
    cfg = PipelineConfig(proofs=1, concurrency=1)
    rt = RealRuntime(NullExecutor(), cfg, Workload("w", 1, 16), stall_seconds=1.0)
    t = time.perf_counter()
    result = rt.run(resolve_design(f"{MISBEHAVING}:forever").fn)
    assert time.perf_counter() - t < 10
    assert result.deadlock is not None and result.deadlock.kind == "livelock"
    s = summarize(result)
    assert (s.submitted, s.completed, s.failed) == (1, 0, 1)


# ------------------------------------------------------------------ outside the protocol


@pytest.mark.parametrize(("name", "shown"), [("yields_42", "42"), ("yields_none", "None")])
def test_yielding_outside_the_protocol_is_a_design_error(name, shown, capsys):
    code, _, err = cli(["predict", "-d", f"{MISBEHAVING}:{name}"], capsys)
    one_line_error(code, err)
    assert f"a task yielded {shown}, which is not a runtime waitable" in err
    cfg = PipelineConfig(proofs=1, concurrency=1)
    rt = RealRuntime(NullExecutor(), cfg, Workload("w", 1, 16))
    with pytest.raises(DesignError, match=f"yielded {shown}, which is not a runtime waitable"):
        rt.run(resolve_design(f"{MISBEHAVING}:{name}").fn)


# ------------------------------------------------------------------ Ctrl-C


def test_ctrl_c_stops_a_real_run_cleanly(tmp_path):
    keys = tmp_path / "keys"
    base = ["run", "--backend", "cpu", "--constraints", "2^8", "--partitions", "2", "--keys-dir", str(keys)]
    rec = tmp_path / "records.jsonl"
    warm = cli_in_subprocess([*base, "--proofs", "1", "-j", "1", "--json"], timeout=300)  # caches the keys
    assert warm.returncode == 0, warm.stderr
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "simgpu.cli",
            *base,
            "--proofs",
            "2000",
            "-j",
            "2",
            "--json",
            "--records",
            str(rec),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # Ctrl-C reaches the whole group, workers included
    )
    lines: list[str] = []
    for line in proc.stderr:  # wait until the prover is set up and proving
        lines.append(line)
        if line.startswith("proving "):
            break
    time.sleep(4)
    os.killpg(proc.pid, signal.SIGINT)
    out, rest = proc.communicate(timeout=120)
    err = "".join(lines) + rest
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    doc = json.loads(out)
    p = doc["proofs"]
    assert doc["interrupted"] == "interrupted by Ctrl-C"
    assert p["submitted"] + p["not_started"] == 2000
    assert p["submitted"] == p["completed"] + p["failed"]
    assert p["completed"] >= 1 and p["not_started"] > 0
    assert all(f["reason"] for f in doc["failures"])
    # Each client proves every j-th proof, so the submitted ids need not be 0..n-1: check
    # against the records that every proof that ended was submitted, and every submitted
    # one ended, once.
    events = [json.loads(line) for line in rec.read_text().splitlines()[1:]]
    ids = {
        ev: [r["proof"] for r in events if r["event"] == ev]
        for ev in ("proof_submitted", "proof_completed", "proof_failed")
    }
    submitted = set(ids["proof_submitted"])
    assert len(submitted) == len(ids["proof_submitted"]) == p["submitted"]
    ended = ids["proof_completed"] + ids["proof_failed"]
    assert sorted(ended) == sorted(submitted)
    assert sorted(f["proof"] for f in doc["failures"]) == sorted(ids["proof_failed"])
    assert doc["verification"]["proofs_verified"] == p["completed"]
    assert 0.0 <= doc["devices"][0]["busy_frac"] <= 1.0


# ------------------------------------------------------------------ zero partitions


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--backend", "cpu", "--partitions", "0"],
        ["calibrate", "--backend", "cpu", "--out", "x.toml", "--partitions", "0"],
        ["validate", "--backend", "cpu", "--partitions", "0"],
    ],
)
def test_zero_partitions_is_refused(args, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(args, capsys)
    one_line_error(code, err)
    assert "partitions" in err


# ------------------------------------------------------------------ output paths


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--trace", "/nonexistent/x.json", "does not exist"),
        ("--trace", "{dir}", "is a directory"),
        ("--trace", "", "is a directory"),  # typer reads "" as the current directory
        ("--plot", "r.xyz", "ending in .png"),
        ("--plot", "{dir}", "is a directory"),
    ],
)
@pytest.mark.parametrize("command", ["predict", "run"])
def test_output_paths_are_checked_before_any_work(command, flag, value, message, capsys, tmp_path):
    extra = ["--backend", "cpu"] if command == "run" else []
    t = time.perf_counter()
    code, _, err = cli([command, *extra, flag, value.format(dir=tmp_path)], capsys)
    one_line_error(code, err)
    assert message in err
    assert time.perf_counter() - t < 5  # refused before the prover is set up


def test_calibrate_checks_its_output_first(capsys, tmp_path):
    code, _, err = cli(["calibrate", "--backend", "cpu", "--out", str(tmp_path)], capsys)
    one_line_error(code, err)
    assert "is a directory" in err


@pytest.mark.skipif(gpu_available(), reason="checks the message on a machine without a GPU")
def test_calibrate_without_a_gpu_says_so(capsys, tmp_path):
    code, _, err = cli(["calibrate", "--out", str(tmp_path / "mybox.toml")], capsys)
    one_line_error(code, err)
    assert "no usable CUDA device" in err and "--backend cpu" in err


# ------------------------------------------------------------------ values accepted silently


@pytest.mark.parametrize(
    ("section", "values", "message"),
    [
        ("stages.prep", {"time": -1.5}, "[stages.prep].time: -1.5 must be a finite number >= 0"),
        ("stages.prep", {"time": {"law": "a*n", "a": -0.001}}, "gives -1.024 at n=1,024"),
        ("buffers", {"scratch": "-3*GiB"}, "[buffers] scratch"),
    ],
)
def test_negative_profile_values_are_errors_not_zeros(section, values, message, capsys, tmp_path):
    import tomllib

    raw = tomllib.loads((Path(__file__).parent / "data" / "tiny.toml").read_text())
    target = raw
    for part in section.split("."):
        target = target[part]
    target.update(values)
    from simgpu.profile.tomlwrite import dumps

    path = tmp_path / "bad.toml"
    path.write_text(dumps(raw, "bad profile"))
    code, _, err = cli(["predict", "-p", str(path)], capsys)
    one_line_error(code, err)
    assert message in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--backend", "cpu", "--b-g2-threads", "0"], "--b-g2-threads"),
        (["run", "--backend", "cpu", "--b-g2-threads", "-3"], "--b-g2-threads"),
        (["predict", "--constraints", "1.5"], "whole number"),
        (["run", "--backend", "cpu", "--constraints", "1.5"], "whole number"),
    ],
)
def test_silently_accepted_values_are_refused(args, message, capsys):
    code, _, err = cli(args, capsys)
    one_line_error(code, err)
    assert message in err


# ------------------------------------------------------------------ tracebacks and blame


def test_tracebacks_become_one_line(capsys, tmp_path):
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(b"[run]\nproofs = 3 # caf\xe9\n")
    pow_profile = tmp_path / "pow.toml"
    pow_profile.write_text(
        (Path(__file__).parent / "data" / "tiny.toml")
        .read_text()
        .replace("time = 0.5\n", 'time = "2^2^40"\n', 1)
    )
    cases = [
        (["predict", "--vram", "1e999"], "too large"),
        (["predict", "--config", str(bad)], "not UTF-8"),
        (["validate", "--backend", "cpu", "--runs", "0"], "--runs"),
        (["predict", "-p", str(pow_profile)], "2^2^40"),
        (["predict", "--proofs", "99999999999999999999"], "proofs"),
        (["run", "--backend", "cpu", "--constraints", "2^27"], "the CPU backend proves at most"),
        (["validate", "--backend", "cpu", "--constraints", "2^40"], "no NTT domain beyond 2^32"),
        (["run", "--backend", "cpu", "--seed", "-1"], "seed"),
    ]
    for args, message in cases:
        t = time.perf_counter()
        code, _, err = cli(args, capsys)
        one_line_error(code, err)
        assert message in err, (args, err)
        assert "design" not in err.split(":")[0]  # blamed on the right value, not the design
        assert time.perf_counter() - t < 10, args


# ------------------------------------------------------------------ wrong output


def test_json_never_carries_infinity(capsys):
    code, _, err = cli(["predict", "--arrival-rate", "inf", "--json"], capsys)
    one_line_error(code, err)
    assert "arrival_rate" in err


def test_negative_seeds_are_refused_so_seeds_never_alias(capsys):
    code, _, err = cli(["predict", "--seed", "-1", "--runs", "3"], capsys)
    one_line_error(code, err)
    assert "seed" in err


def test_a_deadlock_exits_3_and_leads_with_its_cycle(capsys):
    code, out, _ = cli(["predict", "-d", f"{CROSSED}:crossed_locks", "-n", "1", "-j", "1"], capsys)
    assert code == 3
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if "DEADLOCK" in line)
    assert "cycle" in lines[at + 1]
    assert "gpu0.w0 waits for lock gpu0/b (held by gpu0.w1)" in lines[at + 2] + lines[at + 3]
    prof = tiny_profile()
    rt = SimRuntime(prof, PipelineConfig(proofs=1, concurrency=1), prof.workload())
    dl = rt.run(resolve_design(f"{CROSSED}:crossed_locks").fn).deadlock
    assert sorted(dl.cycle) == ["gpu0.w0", "gpu0.w1"] and dl.roots == []


def test_a_configuration_built_in_python_is_checked_as_a_flag_would_be():
    """The runtimes take a PipelineConfig from Python too (an API user, a sweep): a value
    the command line would refuse is refused with the same one line, before anything runs."""
    from simgpu.config import PipelineConfig
    from simgpu.errors import UserError
    from simgpu.model.sim import SimRuntime

    prof = tiny_profile()
    with pytest.raises(UserError, match="placement: unknown policy 'least-loaded'"):
        SimRuntime(prof, PipelineConfig(placement="least-loaded"), prof.workload())
    with pytest.raises(UserError, match="gpu_workers_per_device"):
        SimRuntime(prof, PipelineConfig(gpu_workers_per_device=0), prof.workload())
