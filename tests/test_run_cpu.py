"""The same scheduler code drives the real prover (CPU backend: small circuits, VRAM as a
capped ledger) and the model; both must tell the same story per partition."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ROOT, SPEC, make_executor, sim_run

from simgpu.config import PipelineConfig, Workload
from simgpu.events import partition_sequence
from simgpu.real.runtime import RealRuntime
from simgpu.report.metrics import summarize
from simgpu.sched.registry import resolve_design

DESIGNS = ["serial", "single-lock", "two-lock", "two-lock-reserve", "split-finalizer"]
OOM_DESIGN = f"{Path(__file__).parent / 'designs' / 'oom_recover.py'}:kernels_beside_a_prestage"


@pytest.fixture(scope="module")
def keys_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("keys")


@pytest.fixture(scope="module")
def executor(keys_dir):
    ex = make_executor(keys_dir)
    yield ex
    ex.close()


def real_run(ex, design, **config):
    cfg = PipelineConfig(proofs=2, concurrency=2, partition_workers=2).with_overrides(**config)
    rt = RealRuntime(ex, cfg, Workload("w", 2, SPEC.constraints))
    return rt.run(resolve_design(design).fn)


@pytest.mark.parametrize("design", DESIGNS)
def test_every_design_proves_and_verifies_for_real(executor, design):
    result = real_run(executor, design)
    s = summarize(result)
    assert (s.completed, s.failed) == (2, 0), s.failures
    assert all(executor.verified[(p, i)] for p in range(2) for i in range(2))
    assert executor.vram_used(0) == executor.baseline[0]
    assert not result.leaks and s.deadlock is None


def test_a_run_on_a_reused_executor_reports_its_own_vram_peak(executor):
    """gpu_validation reuses one prover across configurations: a run's peak must not be
    the largest of every run before it."""
    first = summarize(real_run(executor, "serial")).peak_vram[0]
    big = executor.backends[0]
    # a peak above it
    executor._on_device(0, "kernels", lambda b: b.free(b.alloc("big", (first // 32 + 1, 8))))
    assert executor.vram_peak(0) > first
    again = summarize(real_run(executor, "serial")).peak_vram[0]
    assert again == first
    assert big.used() == executor.baseline[0]


def test_validation_runs_on_a_backend_without_a_pool_have_none_to_give_back(executor):
    """gpu_validation gives each run a fresh pool (tests/test_pool_replay_gpu.py on the
    card); the CPU backend's VRAM is a ledger with nothing cached, so it records none."""
    from conftest import load_experiment

    assert load_experiment("gpu_validation")._fresh_pools(executor) == []
    assert summarize(real_run(executor, "serial")).completed == 2


@pytest.mark.parametrize("design", ["serial", "single-lock", "two-lock-reserve", "split-finalizer"])
def test_sim_and_real_emit_the_same_events_per_partition(executor, design):
    real = real_run(executor, design)
    sim = sim_run(executor, design)
    for proof in range(2):
        for part in range(2):
            r = partition_sequence(real.records, proof, part)
            m = partition_sequence(sim.records, proof, part)
            assert r == m, (proof, part)
            assert r[:2] == [("partition_admitted", ""), ("stage_start", "synthesis")]
            assert r[-1] == ("partition_completed", "")


@pytest.fixture(scope="module")
def capped(keys_dir, executor):
    """The prover on a card with room for one partition's kernels plus a little, not for
    another's pre-stage beside it: (executor, cap)."""
    one = executor.vram_estimate(None, ("prestage", "kernels"))
    pre = executor.vram_estimate(None, ("prestage",))
    cap = executor.baseline[0] + one + pre // 2
    ex = make_executor(keys_dir, vram_limit=cap)
    yield ex, cap
    ex.close()


def test_oom_and_recover_on_a_capped_card(capped):
    ex, cap = capped
    # one proof at a time: the design pairs the two partitions of a proof, which
    # needs both on a worker at once
    result = real_run(ex, OOM_DESIGN, concurrency=1, retries=1, retry_backoff=0.0)
    s = summarize(result)
    assert (s.completed, s.failed) == (2, 0)
    assert len(s.oom_events) == 2  # partition 1 of each proof, once
    assert {o["stage"] for o in s.oom_events} == {"kernels"}
    assert ex.vram_used(0) == ex.baseline[0]  # every failed allocation gave its bytes back
    # the model of the same card tells the same story, partition by partition
    sim = sim_run(ex, OOM_DESIGN, vram=cap, concurrency=1, retries=1, retry_backoff=0.0)
    assert len(summarize(sim).oom_events) == 2
    for proof in range(2):
        for part in range(2):
            assert partition_sequence(result.records, proof, part) == partition_sequence(
                sim.records, proof, part
            )


def test_a_real_oom_lists_the_provers_own_live_buffers_and_explains_from_them(capped, tmp_path):
    from simgpu.report.document import build_document, meta_of, write_json
    from simgpu.report.explain import load, report
    from simgpu.report.metrics import aggregate
    from simgpu.report.records import write_records

    ex, cap = capped
    result = real_run(ex, OOM_DESIGN, concurrency=1, retries=1, retry_backoff=0.0)
    s = summarize(result)
    for o in s.oom_events:
        # every allocation live on the CPU device (its ledger has nothing resident): what
        # the holders list plus what was free is the whole card, to the byte
        assert sum(h["bytes"] for h in o["holders"]) + o["free_bytes"] == cap
        mine = (o["proof"], o["partition"])
        other = [h for h in o["holders"] if h["proof"] is not None and (h["proof"], h["partition"]) != mine]
        # partition 0's pre-staged buffers, its worker parked on the design's event
        assert {h["buffer"] for h in other} == {"d_a", "d_bc"}
        assert all(h["stage"] == "prestage" and 0 < h["t"] < o["t"] for h in other)
        assert {h["doing"] for h in other} == {"waiting for a partition to finish"}
        # the prover's own names, from its allocations inside the kernels stage, and what
        # it allocated at set-up (no partition's): no model books these
        own = {h["buffer"] for h in o["holders"] if (h["proof"], h["partition"]) == mine}
        assert "h_msm_bases_batch" in own
        assert {h["buffer"] for h in o["holders"] if h["proof"] is None} >= {"ntt_tables"}
    meta = meta_of("run", "oom_recover", "real cpu", cap, Workload("w", 2, SPEC.constraints), result.config)
    doc, rec = tmp_path / "run.json", tmp_path / "run.jsonl"
    write_json(build_document(meta, aggregate([s]), [s]), doc)
    write_records(rec, result, meta)
    for path in (doc, rec):
        text = report(load(path))
        assert "2 OOM event(s) in 1 of 1 run(s)" in text and "1 distinct cause(s)" in text
        assert re.search(
            r"worker gpu0\.w\d's d_a/d_bc \([\d.]+ KiB, proof \d partition 0, from its prestage\) were live "
            r"since t=[\d.]+ s, held outside any lock, while it was waiting for a partition to finish, when "
            r"worker gpu0\.w\d outside any lock asked for [\d.]+ KiB for h_msm_temporaries \(stage kernels",
            text,
        ), text
        assert "no lock kept the two apart" in text
        assert "Host memory bandwidth is not measured in a real run." in text


def test_without_retries_the_proof_fails_with_the_reason_and_nothing_leaks(capped):
    ex, _ = capped
    s = summarize(real_run(ex, OOM_DESIGN, concurrency=1))
    assert s.failed == 2 and s.completed == 0
    assert all("VRAM exhausted on gpu0 in stage kernels" in f["reason"] for f in s.failures)
    assert ex.vram_used(0) == ex.baseline[0]


def test_simgpu_run_reports_like_predict_plus_verification(keys_dir):
    import json

    from typer.testing import CliRunner

    from simgpu.cli import app

    r = CliRunner().invoke(
        app,
        [
            "run",
            "--backend",
            "cpu",
            "--constraints",
            "2^6",
            "--design",
            "split-finalizer",
            "--keys-dir",
            str(keys_dir),
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["schema"] == "simgpu.report/1" and doc["mode"] == "run"
    assert doc["proofs"] == {"submitted": 2, "completed": 2, "failed": 0, "not_started": 0}
    assert doc["verification"] == {"partitions_verified": 4, "partitions_rejected": 0, "proofs_verified": 2}


def test_validate_lines_up_prediction_and_measurement(keys_dir, tmp_path):
    import json

    from typer.testing import CliRunner

    from simgpu.cli import app

    prof = tmp_path / "cpu.toml"
    r = CliRunner().invoke(
        app,
        [
            "calibrate",
            "--out",
            str(prof),
            "--backend",
            "cpu",
            "--sizes",
            "2^6",
            "--repeats",
            "1",
            "--b-g2-threads",
            "1",
            "--keys-dir",
            str(keys_dir),
        ],
    )
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(
        app,
        [
            "validate",
            "--profile",
            str(prof),
            "--backend",
            "cpu",
            "--proofs",
            "2",
            "--partition-workers",
            "2",
            "--runs",
            "2",
            "--b-g2-threads",
            "2",
            "--keys-dir",
            str(keys_dir),
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    # the profile's b_g2_msm times hold for the split it was calibrated with: a run that
    # splits it otherwise is told so
    assert "hold for --b-g2-threads 1" in r.stderr
    doc = json.loads(r.stdout)
    rows = {c["metric"]: c for c in doc["comparison"]}
    assert rows["OOM"]["predicted"] is False and rows["OOM"]["measured"] is False
    # footprints come from the same memory plan: the peak matches to the byte on the CPU backend
    assert rows["peak VRAM (MiB)"]["predicted"] == pytest.approx(rows["peak VRAM (MiB)"]["measured"])
    assert doc["measured"]["verification"]["proofs_verified"] == 2
    assert doc["machine_differences"] == []  # calibrated on this very machine
    # every stage's mean duration, predicted beside measured: where a model is wrong
    stages = {m.removesuffix(" mean (s)") for m in rows if m.endswith(" mean (s)")}
    assert stages == {"synthesis", "prep", "prestage", "kernels", "b_g2_msm", "epilogue"}
    assert all(rows[f"{s} mean (s)"]["measured"] > 0 for s in stages)


def test_validate_says_when_the_profile_is_of_another_machine():
    from simgpu.profile import load_profile
    from simgpu.report.compare import machine_differences

    h200 = load_profile(ROOT / "simgpu" / "profile" / "profiles" / "h200-cupy.toml").hardware
    assert machine_differences(h200, "NVIDIA H200", 16) == []
    assert machine_differences(h200, "NVIDIA GeForce RTX 5070 Ti", 8) == [
        "the GPU is NVIDIA GeForce RTX 5070 Ti, not NVIDIA H200",
        "the host has 8 cores, not 16",
    ]


def test_validate_exits_3_when_the_real_run_deadlocks(keys_dir):
    """As run does: a real run that stops on a deadlock is exit 3, with its cycle."""
    from typer.testing import CliRunner

    from simgpu.cli import app

    crossed = ROOT / "tests" / "designs" / "crossed.py"
    args = ["validate", "--backend", "cpu", "--constraints", "2^8", "--partitions", "2", "--proofs", "1"]
    args += ["-j", "1", "--runs", "1", "--gpu-workers", "2", "--keys-dir", str(keys_dir)]
    r = CliRunner().invoke(app, [*args, "-d", f"{crossed}:crossed_locks"])
    assert r.exit_code == 3, r.output
    assert "the real run is stuck (deadlock): gpu0.w0 -> gpu0.w1" in r.output


def test_the_prover_is_set_up_as_its_profile_was_calibrated() -> None:
    """ProverSettings.as_calibrated: where b_g2_msm ran and over how many cores, the
    circuit and how the G2 MSM sized its arrays come from the profile's [calibration];
    what the caller gives wins, and a profile that does not say leaves the defaults."""
    import tomllib

    from simgpu.profile import find_profile, load_profile, profile_from_dict
    from simgpu.real.executor import ProverSettings

    shipped = ProverSettings.as_calibrated(load_profile(find_profile("h200-cupy")), backend="cpu")
    assert (shipped.backend, shipped.b_g2_on, shipped.b_g2_threads) == ("cpu", "gpu", 8)
    assert (shipped.circuit, shipped.msm_capacity) == ("porep", "key")
    assert (
        ProverSettings.as_calibrated(load_profile(find_profile("h200-cupy")), b_g2_on="cpu").b_g2_on == "cpu"
    )
    seed = ProverSettings.as_calibrated(load_profile(find_profile("seed-rtx5070ti")))
    assert seed == ProverSettings()  # the seed was not calibrated: nothing to carry
    # a, b, c: pinned where they land, as the shipped profile's prover did
    assert shipped.abc_upload == "pinned" and seed.abc_upload == "pinned"
    older = tomllib.loads(
        (ROOT / "docs" / "data" / "h200-2026-12-05e" / "call1" / "h200-cupy-key.toml").read_text()
    )
    # the twenty-sixth lease's calibration predates the pins: its runs stage them as it did
    assert ProverSettings.as_calibrated(profile_from_dict(older)).abc_upload == "staged"


def test_a_run_uploads_a_b_c_the_way_its_profile_measured():
    import tomllib

    from typer.testing import CliRunner

    from simgpu.cli import app
    from simgpu.errors import UserError
    from simgpu.profile import find_profile, load_profile, profile_from_dict
    from simgpu.real.executor import ProverSettings

    doc = tomllib.loads(find_profile("h200-cupy").read_text())
    for recorded, run in (("pinned", "pinned"), ("staged", "staged"), ("mixed", "pinned")):
        prof = profile_from_dict(doc | {"calibration": doc["calibration"] | {"abc_upload": recorded}})
        assert ProverSettings.as_calibrated(prof).abc_upload == run, recorded
    assert load_profile(find_profile("h200-cupy")).calibrated_abc_upload == "pinned"
    with pytest.raises(UserError, match="--abc-upload 'banana': must be pinned or staged"):
        ProverSettings(backend="cpu", abc_upload="banana").check(1 << 10)
    r = CliRunner().invoke(app, ["run", "--backend", "cpu", "--abc-upload", "banana"])
    assert r.exit_code == 2 and r.output.strip().splitlines() == [
        "error: --abc-upload 'banana': must be pinned or staged"
    ], r.output
