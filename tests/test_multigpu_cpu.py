"""Two devices for real on the CPU backend (each its own capped ledger, its own locks),
beside the model of the same prover: the same per-partition story, the same per-device
peaks, the same placements."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SPEC

from simgpu.config import PipelineConfig, Workload
from simgpu.events import partition_sequence
from simgpu.model.sim import SimRuntime
from simgpu.profile import profile_from_dict
from simgpu.prover.memory_plan import prover_profile_dict
from simgpu.real.executor import ProverExecutor, ProverSettings
from simgpu.real.runtime import RealRuntime
from simgpu.report.metrics import summarize
from simgpu.sched.registry import resolve_design

ALL_ON_GPU0 = f"{Path(__file__).parent / 'designs' / 'all_on_gpu0.py'}:all_on_gpu0"
GPU_STAGES = ("prestage", "kernels")
#: One proof at a time, one synthesis at a time: partitions reach the GPU in one order.
ORDERED = {"proofs": 2, "concurrency": 1, "partition_workers": 1, "devices": 2, "gpu_workers_per_device": 1}


def caps_for(baseline: int, need: int) -> tuple[int, int]:
    """Mixed cards: gpu0 holds two partitions at their peak, gpu1 three."""
    return baseline + 2 * need + 4096, baseline + 3 * need


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    """The prover's baseline and one partition's need, measured on an uncapped device."""
    keys = tmp_path_factory.mktemp("keys")
    ex = ProverExecutor(
        SPEC, ProverSettings(backend="cpu", partition_workers=1, b_g2_threads=1, keys_dir=keys)
    )
    try:
        yield keys, ex.baseline[0], ex.vram_estimate(None, GPU_STAGES)
    finally:
        ex.close()


@pytest.fixture(scope="module")
def executor(probe):
    keys, baseline, need = probe
    ex = ProverExecutor(
        SPEC,
        ProverSettings(
            backend="cpu",
            devices=2,
            vram_limit=caps_for(baseline, need),
            partition_workers=1,
            b_g2_threads=1,
            keys_dir=keys,
        ),
    )
    yield ex
    ex.close()


def config(ex: ProverExecutor, **overrides) -> PipelineConfig:
    caps = tuple(ex.vram_capacity(d) for d in range(2))
    return PipelineConfig(vram=caps).with_overrides(**(ORDERED | overrides))


def both(ex: ProverExecutor, design: str, **overrides):
    """(real result, model result) of one configuration on this prover."""
    cfg = config(ex, **overrides)
    wl = Workload("w", 2, SPEC.constraints)
    fn = resolve_design(design).fn
    real = RealRuntime(ex, cfg, wl).run(fn)
    data = prover_profile_dict(
        ex.plan,
        name="cpu-prover",
        hardware=ex.hardware() | {"vram_resident": ex.baseline[0]},
        workload={"name": "w", "partitions": 2, "constraints": SPEC.constraints},
        times={"kernels": {"h_msm": 0.01}},
    )
    # the measured baseline already holds the plan's resident buffers (as conftest.sim_run)
    data["hardware"]["vram_resident"] = ex.baseline[0]
    model = SimRuntime(profile_from_dict(data), cfg, wl).run(fn)
    return real, model


def sequences(result) -> list[list[tuple[str, str]]]:
    """Every partition's (event, stage-or-lock) sequence; lock names carry the device."""
    return sorted(partition_sequence(result.records, p, i) for p in range(2) for i in range(2))


def placements(result) -> list[int]:
    """The device of each placement, in the order the dispatcher made them."""
    return [r.device for r in result.records if r.event == "partition_placed"]


def devices_of_gpu_stages(result) -> set[int]:
    return {r.device for r in result.records if r.event == "stage_start" and r.fields["stage"] in GPU_STAGES}


def test_each_device_is_its_own_capped_ledger(executor, probe):
    _, baseline, need = probe
    caps = caps_for(baseline, need)
    assert [executor.vram_capacity(d) for d in range(2)] == list(caps)
    assert executor.baseline == [baseline, baseline]


@pytest.mark.parametrize("placement", ["round-robin", "best-fit"])
def test_two_devices_for_real_tell_the_models_story(executor, probe, placement):
    _, baseline, need = probe
    real, model = both(executor, "single-lock", placement=placement)
    s = summarize(real)
    assert (s.completed, s.failed) == (2, 0) and not real.leaks
    assert all(executor.verified[(p, i)] for p in range(2) for i in range(2))
    # round-robin alternates; best-fit puts each proof's first partition on the smaller
    # card (its room is the least that fits) and the second, with gpu0's one worker busy,
    # on the larger one
    expected = [0, 1, 0, 1]
    assert placements(real) == placements(model) == expected
    assert sequences(real) == sequences(model)
    gpu_locks = {x for seq in sequences(real) for e, x in seq if e == "lock_acquired"}
    assert gpu_locks == {"gpu0/gpu", "gpu1/gpu"}
    # single-lock with one worker a device: one partition's peak on each, to the byte
    assert s.peak_vram == summarize(model).peak_vram == [baseline + need, baseline + need]
    assert (
        [g.capacity for g in real.vram]
        == [led.capacity for led in model.vram]
        == list(caps_for(baseline, need))
    )
    assert [executor.vram_used(d) for d in range(2)] == [baseline, baseline]


def test_the_all_on_gpu0_fault_for_real_leaves_gpu1_idle_as_predicted(executor, probe):
    _, baseline, _ = probe
    real, model = both(executor, ALL_ON_GPU0, placement="shared-queue")
    for result in (real, model):
        s = summarize(result)
        assert (s.completed, s.failed) == (2, 0)
        assert devices_of_gpu_stages(result) == {0}
        # gpu1 never held a byte of work (its memory over this run: the executor's own
        # peak spans every run it served)
        assert {used for _, used in result.vram[1].history} == {baseline}
        assert s.busy_frac[1] == 0
        # the workers of both devices took their own device's lock, protecting nothing
        assert s.locks["gpu0/gpu"]["acquisitions"] and s.locks["gpu1/gpu"]["acquisitions"]


def test_simgpu_run_two_mixed_devices(probe, capsys):
    from simgpu.cli import main

    keys, baseline, need = probe
    cap0, cap1 = caps_for(baseline, need)
    argv = ["run", "--backend", "cpu", "--constraints", str(SPEC.constraints), "--devices", "2"]
    argv += ["--vram", f"{cap0},{cap1}", "--placement", "round-robin", "--gpu-workers", "1"]
    assert main([*argv, "--keys-dir", str(keys), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [d["vram_bytes"] for d in doc["devices"]] == [cap0, cap1]
    assert doc["config"]["vram"] == [cap0, cap1] and doc["config"]["placement"] == "round-robin"
    assert all(d["peak_vram_bytes"] == baseline + need for d in doc["devices"])
    assert doc["verification"]["proofs_verified"] == 2
