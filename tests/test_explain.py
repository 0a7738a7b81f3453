"""`simgpu explain`: the seed's Phase 10 OOM told as its engineer told it, from the JSON
document and from the event records alike; causes grouped by what failed, never by the
design's name; bad input is one line and exit 2."""

from __future__ import annotations

import copy
import json
import re

import pytest
from conftest import simulate, tiny_profile

from simgpu.cli import main
from simgpu.report.explain import causes, signature

PHASE_10 = ["predict", "-d", "two-lock", "--vram", "16G", "--gpu-workers", "3"]


def run_cli(args, capsys):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def phase10(tmp_path_factory):
    """The seed's two-lock Phase 10 prediction over 20 runs, as --json and --records."""
    import contextlib
    import io

    d = tmp_path_factory.mktemp("phase10")
    doc, rec = d / "p10.json", d / "p10.jsonl"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main([*PHASE_10, "--runs", "20", "--json", "--records", str(rec)]) == 0
    doc.write_text(buf.getvalue())
    return doc, rec


ACCOUNT = re.compile(
    r"worker (gpu0\.w\d)'s d_a/d_bc \(12\.00 GiB, proof \d+ partition \d+, from its prestage under "
    r"gpu0/mem\) were live since t=[\d.]+ s, held outside any lock \(between gpu0/mem and gpu0/compute\), "
    r"when worker (gpu0\.w\d) in gpu0/compute asked for 4\.00 GiB for d_a \(stage kernels, proof \d+ "
    r"partition \d+, with nothing of its own on gpu0\): 3\.50 GiB free of 16\.00 GiB"
)


def test_the_seeds_phase_10_explains_as_its_engineer_did(phase10, capsys):
    doc, _ = phase10
    n = len(json.loads(doc.read_text())["oom_events"])
    assert n >= 3  # the race: about a third of the runs
    code, out, err = run_cli(["explain", str(doc)], capsys)
    assert code == 0, err
    # every OOM of the 20 runs failed the same way: one cause, counted
    assert f"{n} OOM event(s)" in out and "1 distinct cause(s)" in out
    assert f"Cause 1: {n} OOM event(s) in" in out
    m = ACCOUNT.search(out)
    assert m, out
    holder, failing = m.groups()
    assert holder != failing
    # which step let both happen: the holder let go of `mem` keeping its bytes, and the
    # failing worker, queued for `compute` before it, took `compute` first
    step = re.search(r"What let both happen: (.*)", out).group(1)
    assert step.startswith(f"{holder} let go of gpu0/mem at t=")
    assert f"still holding its 12.00 GiB and waited for gpu0/compute, which {failing} (waiting for it" in step
    assert "no lock covered" in step
    # and what bounded progress: not the locks
    assert re.search(r"The locks: gpu0/compute 0\.0 %, gpu0/mem 0\.0 %", out)


def test_the_records_tell_the_same_story_as_the_document(phase10, capsys):
    doc, rec = phase10
    _, from_doc, _ = run_cli(["explain", "--json", str(doc)], capsys)
    code, from_rec, err = run_cli(["explain", "--json", str(rec)], capsys)
    assert code == 0, err
    d, r = json.loads(from_doc), json.loads(from_rec)
    assert r["source"] == "records" and r["runs"] == 1
    # the records are run 0's: its first OOM is told word for word as the document tells it
    first = next(c for c in d["causes"] if 0 in c["run_seeds"])
    ooms_of_run0 = [o for o in json.loads(doc.read_text())["oom_events"] if o["run_seed"] == 0]
    assert r["oom_events"] == len(ooms_of_run0)
    assert first["first"]["run_seed"] == 0  # the document lists run 0's events first
    assert r["causes"][0]["account"] == first["account"]
    assert ACCOUNT.search(r["causes"][0]["account"][0])


def _two_lock_skip_oom():
    # tiny, 4.5 GiB, two-lock: the other worker keeps d_a through its b_g2_msm, outside
    # both locks (tests/test_holders.py works it out)
    _, s = simulate(tiny_profile(hardware={"vram": "4.5GiB"}), "two-lock", proofs=1, concurrency=1)
    return s.oom_events[0]


def test_runs_that_fail_alike_are_one_cause_and_another_failure_is_another(phase10):
    seed_ooms = json.loads(phase10[0].read_text())["oom_events"]
    tiny = _two_lock_skip_oom()
    # who, which proof, when and how many bytes do not make another cause...
    moved = copy.deepcopy(tiny)
    moved.update(worker="gpu3.w7", proof=41, partition=2, t=1234.5)
    for h in moved["holders"]:
        own = (h["proof"], h["partition"]) == (tiny["proof"], tiny["partition"])
        h.update(proof=41 if own else 40, partition=2 if own else 9, t=1000.0, bytes=h["bytes"] * 2)
    assert signature(moved) == signature(tiny)
    # ... what the holder was waiting for does
    other = copy.deepcopy(tiny)
    other["holders"][0]["waits_for"] = "gpu0/compute"
    assert signature(other) != signature(tiny)
    grouped = causes([*seed_ooms, tiny, moved])
    assert [len(c.events) for c in grouped] == [len(seed_ooms), 2]


def test_a_holder_that_kept_its_buffers_past_its_last_lock_is_told_so(capsys, tmp_path):
    from simgpu.report.explain import tell

    lines = tell(_two_lock_skip_oom())
    assert lines[0].startswith(
        "worker gpu0.w0's d_a (1.00 GiB, proof 0 partition 0, from its prestage under gpu0/mem) were live "
        "since t=1.500 s, held outside any lock (since it let go of gpu0/compute at t=2.750 s), while it "
        "was in stage b_g2_msm"
    )
    assert "when worker gpu0.w1 in gpu0/compute asked for 2.00 GiB for d_bc" in lines[0]
    assert "beside 1.00 GiB of its own (d_a)): 1.50 GiB free of 4.50 GiB (1.00 GiB resident)" in lines[0]
    assert lines[1] == (
        "What let both happen: gpu0.w0 let go of gpu0/compute at t=2.750 s still holding its 1.00 GiB; "
        "no lock covered its buffers after that."
    )


def test_a_run_without_oom_says_what_bounded_it(tmp_path, capsys):
    code, out, _ = run_cli(["predict", "-d", "single-lock", "-n", "10", "-j", "10", "--json"], capsys)
    f = tmp_path / "p9.json"
    f.write_text(out)
    code, out, err = run_cli(["explain", str(f)], capsys)
    assert code == 0, err
    assert out.startswith("No OOM in predict of single-lock")
    assert "Progress was bounded by (share of the makespan): host memory bandwidth" in out
    assert re.search(r"host memory bandwidth \d+ %, gpu0 \d+ %", out)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not JSON"),
        ("[profile]\nname = 'x'\n", "not JSON"),
        ('{"a": 1}', "not a simgpu document"),
        ('{"schema": "simgpu.sweep/1", "points": []}', "a simgpu.sweep/1 document"),
        ('{"schema": "simgpu.report/1", "oom_events": 3}', "not a list of events"),
        (
            '{"schema": "simgpu.report/1", "oom_events": [{"t": 1, "kind": "VRAM", "pool": "gpu0"}]}',
            "carry no holders",
        ),
        ('{"schema": "simgpu.records/1"}\n{"t": "x", "event": 1}\n', ":2: not an event record"),
        ("", "not JSON"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(content, message, tmp_path, capsys):
    f = tmp_path / "in.json"
    f.write_text(content)
    code, out, err = run_cli(["explain", str(f)], capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert "Traceback" not in err


def test_a_missing_file_is_one_line_and_exit_2(tmp_path, capsys):
    code, _, err = run_cli(["explain", str(tmp_path / "nope.json")], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "cannot be read" in err


def test_a_host_oom_names_the_partitions_holding_host_memory():
    from simgpu.report.explain import tell

    # tiny with 13 GiB of RAM, 10 resident, a budget beyond it: p0 synthesises into 2 GiB
    # (host_abc + host_aux) at 0; p1's host_abc takes the last GiB, its host_aux does not fit
    _, s = simulate(
        tiny_profile(), "single-lock", proofs=1, concurrency=1, host_ram=13 * 2**30, total_budget=2**40
    )
    (oom,) = s.oom_events
    assert oom["kind"] == "host RAM"
    first, step = tell(oom)
    assert first.startswith(
        "proof 0 partition 0's host_abc/host_aux (2.00 GiB, from its synthesis) were live since t=0.000 s, "
        "held outside any lock, while it was in stage synthesis, when proof 0 partition 1 outside any lock "
        "asked for 1.00 GiB for host_aux (stage synthesis, proof 0 partition 1, beside 1.00 GiB of its own "
        "(host_abc)): 0 B free of 13.00 GiB (10.00 GiB resident), 1.00 GiB short."
    ), first
    assert step == (
        "What let both happen: proof 0 partition 0 and proof 0 partition 1 both allocated outside any "
        "lock: no lock kept the two apart."
    )
