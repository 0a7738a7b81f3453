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


# --- sized by the key: every partition's G2 MSM takes the same arrays ---------------------


def b_g2_peak(p, backend) -> int:
    with backend.peak_scope() as m:
        b_g2_msm(p, keys()[0], backend=backend)
    assert backend.used() == 0
    return m.peak


@pytest.mark.parametrize("batch", [16, 50, 1 << 20])
def test_sized_by_the_key_the_peak_is_the_same_for_every_witness_and_is_the_plans(batch: int) -> None:
    """By the witness, the peak follows each partition's count of non-zero scalars (the
    race on the card); by the key, it is the circuit's, and the plan says it exactly."""
    by_witness, by_key = set(), set()
    for seed in range(6):
        p = prepared(seed)
        by_witness.add(b_g2_peak(p, CpuDevice(stream_batch=batch)))
        backend = CpuDevice(stream_batch=batch, msm_capacity="key")
        peak = b_g2_peak(p, backend)
        by_key.add(peak)
        plan = plan_for_backend(ProverShape.from_prepared(p), backend, b_g2_on="gpu")
        resident = sum(plan["buffers"][b] for b in plan["resident"]["vram"])
        assert peak == stage_peak(plan, "b_g2_msm") - resident
        expected = plan_for_backend(ProverShape.estimate(SPEC), backend, b_g2_on="gpu")
        assert plan["detail"]["b_g2_msm"] == expected["detail"]["b_g2_msm"]  # the circuit's alone
    assert len(by_witness) > 1 and len(by_key) == 1
    assert min(by_key) >= max(by_witness)  # the capacity covers every witness here


def test_sized_by_the_key_the_sum_is_the_same_whatever_the_capacity(monkeypatch) -> None:
    """Past its capacity the MSM runs in pieces of it, the last padded with zeros."""
    import simgpu.prover.groth16 as g

    pk, _ = keys()
    p = prepared()
    want = b_g2_msm(p, pk, 2)
    for cap in (1, 7, 1 << 20):
        monkeypatch.setattr(g, "key_capacity", lambda spec, batch, cap=cap: cap)
        assert b_g2_msm(p, pk, backend=CpuDevice(stream_batch=40, msm_capacity="key")) == want, cap


def test_the_key_capacity_covers_the_porep_family_with_room() -> None:
    """The expected non-zero count plus six of its square roots: above every witness of
    the validation's circuit (the spread at 2^16 is about 50 points on 8,290), and
    within 7% of the mean count at 2^16, 3.5% at 2^18 (0.8% at 2^22)."""
    from simgpu.prover.circuits import circuit_spec, r1cs_of
    from simgpu.prover.memory_plan import key_capacity
    from simgpu.prover.synthesis import witness

    for log_n, room in ((16, 0.07), (18, 0.035)):
        spec = circuit_spec("porep", 1 << log_n)
        b = r1cs_of(spec).density("B")
        counts = [int(witness(spec, s)[b].reshape(len(b), -1).any(axis=1).sum()) for s in range(4)]
        cap = key_capacity(spec, 1 << 22)
        assert max(counts) < cap <= (1 + room) * sum(counts) / len(counts), (log_n, counts, cap)


def test_an_unknown_capacity_is_refused() -> None:
    from simgpu.errors import UserError
    from simgpu.real.executor import ProverSettings

    with pytest.raises(ValueError):
        CpuDevice(msm_capacity="guess")
    with pytest.raises(ValueError):
        prover_plan(ProverShape.estimate(SPEC), stream_batch=32, b_g2_on="gpu", msm_capacity="guess")
    with pytest.raises(UserError, match="--msm-capacity"):
        ProverSettings(backend="cpu", msm_capacity="guess").check(1 << 10)


def test_the_executor_sizes_the_g2_msm_as_its_settings_say(tmp_path) -> None:
    """A run with msm_capacity "key": its devices, its plan and its warm-up proof (which
    verifies) all take the circuit's capacity."""
    from simgpu.prover.memory_plan import key_capacity
    from simgpu.real.executor import ProverExecutor, ProverSettings

    spec = CircuitSpec(log_constraints=6, public_inputs=2, seed=11)
    settings = ProverSettings(
        backend="cpu", b_g2_on="gpu", msm_capacity="key", partition_workers=1, keys_dir=tmp_path
    )
    ex = ProverExecutor(spec, settings)
    try:
        assert all(b.msm_capacity == "key" for b in ex.backends)
        batch = min(ex.backends[0].stream_batch, ex.pk.b_index.shape[0])
        points = key_capacity(spec, batch)
        assert ex.plan["detail"]["b_g2_msm"]["b_g2_msm_scalars"] == 32 * points
        p = prep(synthesize(spec, 2), ex.pk)
        assert ex.g2.msm(p) == b_g2_msm(p, ex.pk)
    finally:
        ex.close()
