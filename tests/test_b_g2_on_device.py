"""b_g2_msm on the device (CI: the CPU device, arkworks' G2 multiexp under the same
stage code): the same sum as the CPU stage for any batch size, the ledger peak equal to
the memory plan's, a clean VramExhausted, and the executor's b_g2_on setting."""

from __future__ import annotations

import functools

import pytest

from simgpu.errors import VramExhausted
from simgpu.prover.circuits import CircuitSpec
from simgpu.prover.cpu_device import CpuDevice
from simgpu.prover.groth16 import b_g2_msm, prep
from simgpu.prover.memory_plan import ProverShape, plan_for_backend, prover_plan, stage_peak
from simgpu.prover.setup import setup
from simgpu.prover.synthesis import synthesize

SPEC = CircuitSpec(log_constraints=7, public_inputs=2, b_density=0.5, bool_fraction=0.4, seed=7)


@functools.cache
def keys():
    return setup(SPEC, seed=3, workers=1)


def prepared(seed: int = 4):
    return prep(synthesize(SPEC, seed), keys()[0])


@pytest.mark.parametrize("batch", [1, 13, 64, 1 << 20])
def test_device_sum_equals_the_cpu_stage(batch: int) -> None:
    pk, _ = keys()
    p = prepared()
    assert len(p.split_b.ones) and len(p.split_b.tails)  # both kinds of scalars present
    assert b_g2_msm(p, pk, backend=CpuDevice(stream_batch=batch)) == b_g2_msm(p, pk, 2)


@pytest.mark.parametrize("batch", [16, 50, 1 << 20])
def test_ledger_peak_equals_plan(batch: int) -> None:
    pk, _ = keys()
    p = prepared(5)
    backend = CpuDevice(stream_batch=batch)
    plan = plan_for_backend(ProverShape.from_prepared(p), backend, b_g2_on="gpu")
    resident = sum(plan["buffers"][b] for b in plan["resident"]["vram"])  # NTT tables: none here
    with backend.peak_scope() as m:
        b_g2_msm(p, pk, backend=backend)
    assert m.peak == stage_peak(plan, "b_g2_msm") - resident > 0
    assert backend.used() == 0
    assert plan["stages"]["b_g2_msm"]["on"] == "gpu"
    cpu_plan = plan_for_backend(ProverShape.from_prepared(p), backend)
    assert "b_g2_msm" not in cpu_plan["buffers"] and stage_peak(cpu_plan, "b_g2_msm") == resident


def test_estimated_batch_counts_are_close_to_the_exact_ones() -> None:
    spec = CircuitSpec(log_constraints=10, public_inputs=2, b_density=0.3, bool_fraction=0.6)
    pk, _ = setup(spec, 1, workers=1)
    exact = ProverShape.from_prepared(prep(synthesize(spec, 1), pk))
    est = ProverShape.estimate(spec)
    for batch, tol in ((32, 0.25), (1 << 20, 0.1)):  # a batch's maximum is the noisier
        a, b = exact.batch_nonzero_max("b1", batch), est.batch_nonzero_max("b1", batch)
        assert abs(a - b) <= tol * a + 1, (batch, a, b)
    plan = prover_plan(est, stream_batch=32, b_g2_on="gpu")
    assert plan["detail"]["b_g2_msm"]["b_g2_msm_scalars"] == 32 * est.batch_nonzero_max("b1", 32)
    with pytest.raises(ValueError):
        prover_plan(exact, stream_batch=32, b_g2_on="fpga")


def test_too_small_a_card_names_the_buffer_and_frees_everything() -> None:
    pk, _ = keys()
    p = prepared()
    plan = plan_for_backend(ProverShape.from_prepared(p), CpuDevice(stream_batch=40), b_g2_on="gpu")
    need = stage_peak(plan, "b_g2_msm") - sum(plan["buffers"][b] for b in plan["resident"]["vram"])
    backend = CpuDevice(vram_limit=need - 1, stream_batch=40)
    with pytest.raises(VramExhausted) as e:
        b_g2_msm(p, pk, backend=backend)
    assert e.value.buffer.startswith("b_g2_msm")
    assert backend.used() == 0
    assert b_g2_msm(p, pk, backend=CpuDevice(vram_limit=need, stream_batch=40)) == b_g2_msm(p, pk)


def test_executor_runs_b_g2_msm_where_the_setting_says(tmp_path) -> None:
    from simgpu.errors import UserError
    from simgpu.real.executor import DeviceG2, ProverExecutor, ProverSettings

    spec = CircuitSpec(log_constraints=6, public_inputs=2, seed=11)
    settings = ProverSettings(backend="cpu", b_g2_on="gpu", partition_workers=1, keys_dir=tmp_path)
    ex = ProverExecutor(spec, settings)  # its warm-up proof runs b_g2_msm on the device and verifies
    try:
        assert isinstance(ex.g2, DeviceG2) and ex.stage_on("b_g2_msm") == "gpu"
        assert ex.plan["stages"]["b_g2_msm"]["on"] == "gpu"
        p = prep(synthesize(spec, 2), ex.pk)
        assert ex.g2.msm(p, 4) == b_g2_msm(p, ex.pk)
    finally:
        ex.close()
    with pytest.raises(UserError):
        ProverExecutor(spec, ProverSettings(backend="cpu", b_g2_on="tpu", keys_dir=tmp_path))
