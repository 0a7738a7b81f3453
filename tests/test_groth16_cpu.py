"""The Groth16 prover on the CPU backend: proofs verify, forgeries do not, the stages
keep to their memory plan, and running out of (emulated) VRAM is clean."""

from __future__ import annotations

import functools
import operator
import random

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from simgpu.errors import DesignError, UserError, VramExhausted
from simgpu.gpu.bls12_381 import R_ORDER
from simgpu.gpu.encoding import g1_from_limbs, limbs_to_ints, scalar_of
from simgpu.gpu.ntt import h_ref
from simgpu.prover.circuits import CircuitSpec
from simgpu.prover.cpu_device import CpuDevice
from simgpu.prover.groth16 import (
    PROOF_BYTES,
    KernelOutput,
    PartitionedProof,
    Proof,
    QuerySplit,
    b_g2_msm,
    epilogue,
    kernels,
    preload,
    prep,
    prestage,
    prove,
    prove_partitions,
    verify,
    verify_partitions,
)
from simgpu.prover.memory_plan import ProverShape, plan_for_backend, stage_peak
from simgpu.prover.setup import lagrange_at, setup
from simgpu.prover.synthesis import synthesize

SPECS = {
    "tiny": CircuitSpec(log_constraints=4, public_inputs=1, seed=1),
    "mixed": CircuitSpec(log_constraints=6, public_inputs=3, b_density=0.5, bool_fraction=0.3, seed=2),
    "odd": CircuitSpec(constraints=100, public_inputs=2, b_density=0.15, bool_fraction=0.7, seed=3),
    "std": CircuitSpec(log_constraints=8, public_inputs=2, seed=4),
}


@functools.cache
def keys(name: str):
    return setup(SPECS[name], seed=99, workers=1)


def fresh(name: str, seed: int = 5, **kw):
    return synthesize(SPECS[name], seed, **kw)


@pytest.mark.parametrize("name", list(SPECS))
def test_proofs_verify(name: str) -> None:
    pk, vk = keys(name)
    for seed in (1, 2):
        synth = fresh(name, seed)
        proof = prove(pk, synth, CpuDevice(stream_batch=32), threads=2)
        assert verify(vk, synth.public_inputs, proof)


def test_h_is_the_quotient() -> None:
    """a(X) b(X) - c(X) = h(X) Z(X) at a random point, with a, b, c interpolated through
    the same Lagrange basis the setup uses: the NTT conventions agree with the setup's."""
    spec = SPECS["std"]
    synth = fresh("std")
    n = spec.domain_size
    a, b, c = (limbs_to_ints(x) for x in (synth.a, synth.b, synth.c))
    h = h_ref(a, b, c)
    assert h[n - 1] == 0
    x = random.Random(1).randrange(R_ORDER)
    lag = lagrange_at(x, n, n)
    ev = [sum(v * w for v, w in zip(vec, lag, strict=True)) % R_ORDER for vec in (a, b, c)]
    hx = sum(coef * pow(x, i, R_ORDER) for i, coef in enumerate(h)) % R_ORDER
    assert (ev[0] * ev[1] - ev[2]) % R_ORDER == hx * (pow(x, n, R_ORDER) - 1) % R_ORDER


def test_tampered_proofs_fail() -> None:
    pk, vk = keys("std")
    synth = fresh("std")
    proof = prove(pk, synth, CpuDevice())
    assert verify(vk, synth.public_inputs, proof)
    g1, g2 = G1Point(), G2Point()
    assert not verify(vk, synth.public_inputs, Proof(proof.a + g1, proof.b, proof.c))
    assert not verify(vk, synth.public_inputs, Proof(proof.a, proof.b + g2, proof.c))
    assert not verify(vk, synth.public_inputs, Proof(proof.a, proof.b, proof.c + g1))
    assert not verify(vk, synth.public_inputs, Proof(proof.c, proof.b, proof.a))


def test_wrong_public_inputs_fail() -> None:
    pk, vk = keys("std")
    synth = fresh("std")
    proof = prove(pk, synth, CpuDevice())
    x = synth.public_inputs
    assert not verify(vk, [(x[0] + 1) % R_ORDER, *x[1:]], proof)
    assert not verify(vk, [x[1], x[0]], proof)
    assert not verify(vk, x[:1], proof)
    assert not verify(vk, [*x, 0], proof)
    assert not verify(vk, [x[0] + R_ORDER, x[1]], proof)  # not reduced
    other = fresh("std", seed=6)  # another partition's inputs
    assert not verify(vk, other.public_inputs, proof)


def test_bad_witness_fails() -> None:
    pk, vk = keys("std")
    for corrupt in (0, 77, 200):
        synth = fresh("std", corrupt=corrupt)
        assert not verify(vk, synth.public_inputs, prove(pk, synth, CpuDevice()))


def test_proof_serialization_round_trip() -> None:
    pk, vk = keys("mixed")
    synth = fresh("mixed")
    proof = prove(pk, synth, CpuDevice())
    raw = proof.to_bytes()
    assert len(raw) == PROOF_BYTES == 192
    back = Proof.from_bytes(raw)
    assert back == proof and verify(vk, synth.public_inputs, back)
    # A point flipped to another valid point no longer verifies; garbage does not parse.
    flipped = bytearray(raw)
    flipped[0] ^= 0x20  # the sign flag of A: -A
    assert not verify(vk, synth.public_inputs, Proof.from_bytes(bytes(flipped)))
    with pytest.raises(UserError):
        Proof.from_bytes(raw[:-1])
    garbage = bytearray(raw)
    garbage[150:160] = b"\xff" * 10
    with pytest.raises(UserError):
        Proof.from_bytes(bytes(garbage))


def test_partitioned_proof() -> None:
    pk, vk = keys("tiny")
    proof, inputs = prove_partitions(pk, [10, 11, 12], CpuDevice(), rng=np.random.default_rng(0))
    raw = proof.to_bytes()
    assert len(raw) == 3 * 192
    back = PartitionedProof.from_bytes(raw)
    assert len(back) == 3 and back.proofs == proof.proofs
    assert verify_partitions(vk, inputs, back)
    assert not verify_partitions(vk, [inputs[1], inputs[0], inputs[2]], back)
    assert not verify_partitions(vk, inputs[:2], back)
    with pytest.raises(UserError):
        PartitionedProof.from_bytes(raw[:-5])


def test_stages_one_by_one_equal_prove() -> None:
    pk, vk = keys("std")
    synth = fresh("std")
    rs = (12345, 67890)
    whole = prove(pk, synth, CpuDevice(), rng=rs)
    backend = CpuDevice(stream_batch=50)
    prepared = prep(fresh("std"), pk)
    buffers = prestage(prepared, backend)
    assert prepared.a is None and buffers.held() == ["d_a", "d_bc"]
    timings: dict[str, float] = {}
    out = kernels(prepared, pk, backend, buffers, timings=timings)
    assert set(timings) == {"ntt", "h_msm", "l_msm", "a_msm", "b1_msm"}
    assert buffers.held() == ["d_a"]  # d_bc freed by kernels, d_a left to the owner
    buffers.free()
    b2 = b_g2_msm(prepared, pk, threads=3)
    staged = epilogue(prepared, pk, out, b2, rs)
    assert staged == whole and verify(vk, synth.public_inputs, staged)


def _reference_sums(pk, synth) -> KernelOutput:
    """The four G1 sums by plain arkworks multiexps over whole queries."""
    z = synth.assignment_limbs()

    def msm(bases: np.ndarray, scalars: np.ndarray) -> G1Point:
        sc = [scalar_of(v) for v in limbs_to_ints(scalars)]
        return G1Point.multiexp_unchecked(g1_from_limbs(bases), sc)

    n = synth.domain_size
    a, b, c = (limbs_to_ints(x) for x in (synth.a, synth.b, synth.c))
    h = h_ref(a, b, c)
    return KernelOutput(
        h=G1Point.multiexp_unchecked(g1_from_limbs(pk.h), [scalar_of(v) for v in h[: n - 1]]),
        l=msm(pk.l, synth.aux),
        a=msm(pk.a, z[pk.a_index.astype(np.int64)]),
        b1=msm(pk.b_g1, z[pk.b_index.astype(np.int64)]),
    )


@pytest.mark.parametrize("resident", [False, True])
@pytest.mark.parametrize("batch", [1, 7, 64, 1 << 20])
def test_batched_split_msms_match_plain_msms(resident: bool, batch: int) -> None:
    pk, _ = keys("mixed")
    want = _reference_sums(pk, fresh("mixed"))
    got = kernels(prep(fresh("mixed"), pk), pk, CpuDevice(stream_batch=batch, resident_bases=resident))
    assert (got.h, got.l, got.a, got.b1) == (want.h, want.l, want.a, want.b1)


def test_b_g2_msm_matches_plain_msm_for_any_pool_size() -> None:
    pk, _ = keys("std")
    synth = fresh("std")
    prepared = prep(synth, pk)
    z = limbs_to_ints(synth.assignment_limbs()[pk.b_index.astype(np.int64)])
    raw = pk.b_g2.tobytes()
    pts = [G2Point.from_xy_bytes_unchecked_le(raw[i : i + 192]) for i in range(0, len(raw), 192)]
    want = G2Point.multiexp_unchecked(pts, [scalar_of(v) for v in z])
    for threads in (1, 2, 5):
        assert b_g2_msm(prepared, pk, threads) == want


class _CallLog(CpuDevice):
    """A CpuDevice that also writes down, in order, each buffer it books and each copy
    of G2 bases it makes (`("alloc", name)`, `("copy", rows)`)."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.calls: list[tuple[str, object]] = []

    def alloc(self, name, shape, dtype=np.uint32):
        self.calls.append(("alloc", name))
        return super().alloc(name, shape, dtype)

    def write_bases_g2(self, buf, host, row=0):
        self.calls.append(("copy", len(host)))
        super().write_bases_g2(buf, host, row)


@pytest.mark.parametrize("capacity", ["witness", "key"])
def test_b_g2_msm_on_a_device_books_its_staging_before_each_copy(capacity: str) -> None:
    """Each batch's gathered points, scalars and index are booked before the batch's
    bases are copied, so another worker's allocation cannot come between the stage's
    arrays while the copy runs; the sum is the CPU stage's, and nothing stays booked."""
    pk, _ = keys("std")
    prepared = prep(fresh("std"), pk)
    backend = _CallLog(stream_batch=64, msm_capacity=capacity)
    assert b_g2_msm(prepared, pk, backend=backend) == b_g2_msm(prepared, pk, 1)
    assert backend.used() == 0
    calls = backend.calls
    assert calls[0] == ("alloc", "b_g2_msm_bases_batch")
    copies = [i for i, c in enumerate(calls) if c[0] == "copy"]
    assert len(copies) == -(-prepared.split_b.length // 64)  # every batch of std has a non-zero
    for i in copies:
        assert calls[i - 3 : i] == [
            ("alloc", "b_g2_msm_tail_bases"),
            ("alloc", "b_g2_msm_scalars"),
            ("alloc", "b_g2_msm_index"),
        ]


def test_a_refused_b_g2_booking_leaves_nothing_booked() -> None:
    """A cap that holds the batch's bases but not its gathered points: VramExhausted names
    the points, and the bases are given back."""
    pk, _ = keys("std")
    prepared = prep(fresh("std"), pk)
    batch_bytes = 64 * 192
    backend = CpuDevice(vram_limit=batch_bytes + 192, stream_batch=64)
    with pytest.raises(VramExhausted) as info:
        b_g2_msm(prepared, pk, backend=backend)
    assert info.value.buffer == "b_g2_msm_tail_bases"
    assert backend.used() == 0


def test_the_g2_pool_computes_the_same_sum_in_worker_processes(tmp_path) -> None:
    from simgpu.prover.g2pool import G2Pool
    from simgpu.prover.setup import cached_keys, key_path

    spec = SPECS["mixed"]
    pk, _, _ = cached_keys(spec, 99, tmp_path)
    prepared = prep(fresh("mixed"), pk)
    pool = G2Pool(key_path(spec, 99, tmp_path), workers=2)
    try:
        for chunks in (1, 3):
            assert pool.msm(prepared, chunks) == b_g2_msm(prepared, pk, 1)
    finally:
        pool.close()


def test_query_split() -> None:
    vals = [0, 1, 5, 0, 1, R_ORDER - 1, 2**40, 1]
    from simgpu.gpu.encoding import ints_to_limbs

    split = QuerySplit.of("x", ints_to_limbs(vals))
    assert split.ones.tolist() == [1, 4, 7] and split.tails.tolist() == [2, 5, 6]
    assert split.zeros == 2
    ones, tails, sc = split.batch(4, 8)
    assert ones.tolist() == [0, 3] and tails.tolist() == [1, 2]
    assert limbs_to_ints(sc) == [R_ORDER - 1, 2**40]
    assert split.batch_maxima(4) == (2, 2) and split.batch_maxima(3) == (1, 1)


def test_prep_reports_density() -> None:
    pk, _ = keys("std")
    prepared = prep(fresh("std"), pk)
    assert abs(prepared.b_density - SPECS["std"].b_density) < 0.02
    assert prepared.split_b.length == len(pk.b_index)
    host = prepared.host_bytes()
    assert host["abc"] == 3 * 256 * 32 and host["prep"] > 0
    with pytest.raises(UserError):
        prep(fresh("tiny"), pk)


# --- memory: the plan and running out ----------------------------------------------------


@pytest.mark.parametrize("resident", [False, True])
@pytest.mark.parametrize("batch", [16, 100, 1 << 20])
@pytest.mark.parametrize("prestaged", [True, False])
def test_ledger_peak_equals_plan(resident: bool, batch: int, prestaged: bool) -> None:
    pk, _ = keys("std")
    backend = CpuDevice(stream_batch=batch, resident_bases=resident)
    preload(pk, backend)
    prove(pk, fresh("std", 1), backend)  # warm: the NTT tables are cached from now on
    baseline = backend.used()
    prepared = prep(fresh("std"), pk)
    plan = plan_for_backend(ProverShape.from_prepared(prepared), backend, prestaged=prestaged)
    resident_bytes = sum(plan["buffers"][b] for b in plan["resident"]["vram"])
    assert baseline == resident_bytes
    if prestaged:
        with backend.peak_scope() as m:
            buffers = prestage(prepared, backend)
        assert m.peak == stage_peak(plan, "prestage")
        with backend.peak_scope() as m:
            kernels(prepared, pk, backend, buffers)
        assert backend.used() == baseline + plan["buffers"]["d_a"]  # vram_out: d_a
        buffers.free()
    else:
        with backend.peak_scope() as m:
            kernels(prepared, pk, backend)
    assert m.peak == stage_peak(plan, "kernels")
    assert backend.used() == baseline


def test_first_call_builds_ntt_tables() -> None:
    pk, _ = keys("std")
    backend = CpuDevice()
    prepared = prep(fresh("std"), pk)
    plan = plan_for_backend(ProverShape.from_prepared(prepared), backend)
    buffers = prestage(prepared, backend)
    with backend.peak_scope() as m:
        kernels(prepared, pk, backend, buffers)
    buffers.free()
    b = plan["buffers"]
    assert backend.used() == b["ntt_tables"]
    cold = b["d_a"] + b["d_bc"] + b["ntt_tables"] + b["ntt_twiddle_build"] + b["ntt_scratch"]
    assert m.peak == max(cold, stage_peak(plan, "kernels"))
    backend.drop_ntt_tables()
    assert backend.used() == 0


def test_estimated_shape_is_close_to_the_real_one() -> None:
    spec = CircuitSpec(log_constraints=10, public_inputs=2, b_density=0.3, bool_fraction=0.6)
    pk, _ = setup(spec, 1, workers=1)
    real = ProverShape.from_prepared(prep(synthesize(spec, 1), pk))
    est = ProverShape.estimate(spec)
    for q in ("h", "l", "a", "b1"):
        assert abs(est.lengths[q] - real.lengths[q]) <= 0.05 * real.lengths[q]
    for q in ("l", "a", "b1"):
        assert abs(est.tails[q] - real.tails[q]) <= 0.05 * real.tails[q] + 2
        assert abs(est.ones[q] - real.ones[q]) <= 0.15 * real.ones[q] + 2


def test_prestage_oom_names_the_buffer_and_frees_everything() -> None:
    pk, _ = keys("std")
    d_a = 256 * 32
    backend = CpuDevice(vram_limit=d_a + 1000)  # d_a fits, d_bc does not
    prepared = prep(fresh("std"), pk)
    with pytest.raises(VramExhausted) as info:
        prestage(prepared, backend)
    assert info.value.buffer == "d_bc" and info.value.pool == "gpu0"
    assert info.value.requested == 2 * d_a
    assert backend.used() == 0
    assert prepared.a is not None  # host vectors kept for a retry


@pytest.mark.parametrize("prestaged", [True, False])
def test_kernels_oom_names_the_buffer_and_frees_everything(prestaged: bool) -> None:
    pk, vk = keys("std")
    probe = CpuDevice(stream_batch=64)
    prepared = prep(fresh("std"), pk)
    plan = plan_for_backend(ProverShape.from_prepared(prepared), probe, prestaged=prestaged)
    need = stage_peak(plan, "kernels")
    backend = CpuDevice(vram_limit=need - 1, stream_batch=64)  # cold: tables built inside
    buffers = prestage(prepared, backend) if prestaged else None
    with pytest.raises(VramExhausted) as info:
        kernels(prepared, pk, backend, buffers)
    assert info.value.buffer in plan["buffers"] or info.value.buffer.startswith(
        ("ntt_", "h_msm", "l_msm", "a_msm", "b1_msm")
    )
    if buffers is not None:
        assert buffers.held()  # still the owner's to free
        buffers.free()
    backend.drop_ntt_tables()
    assert backend.used() == 0
    # With the planned memory (cold start included) the same partition proves.
    b = plan["buffers"]
    cold = b["d_a"] + b["d_bc"] + b["ntt_tables"] + b["ntt_twiddle_build"] + b["ntt_scratch"]
    roomy = CpuDevice(vram_limit=max(need, cold), stream_batch=64)
    synth = fresh("std")
    assert verify(vk, synth.public_inputs, prove(pk, synth, roomy))


def test_device_buffers_handle() -> None:
    pk, _ = keys("tiny")
    backend = CpuDevice()
    buffers = prestage(prep(fresh("tiny"), pk), backend)
    assert buffers.nbytes() == backend.used() == 3 * 16 * 32
    buffers.release("d_bc")
    with pytest.raises(DesignError):
        buffers.release("d_bc")
    with pytest.raises(DesignError):
        buffers.array("d_bc")
    buffers.free()
    buffers.free()  # idempotent on what is left
    assert backend.used() == 0


def test_randomness_makes_proofs_differ_but_both_verify() -> None:
    pk, vk = keys("tiny")
    synth = fresh("tiny")
    p1 = prove(pk, synth, CpuDevice())
    p2 = prove(pk, fresh("tiny"), CpuDevice())
    assert p1 != p2
    assert verify(vk, synth.public_inputs, p1) and verify(vk, synth.public_inputs, p2)


def test_epilogue_formula() -> None:
    """C = H + L + sA + rB1 - rs delta, with A, B1 as the proof's blinded sums."""
    pk, _ = keys("tiny")
    prepared = prep(fresh("tiny"), pk)
    out = kernels(prepared, pk, CpuDevice())
    b2 = b_g2_msm(prepared, pk)
    r, s = 3, 5
    proof = epilogue(prepared, pk, out, b2, (r, s))
    a = pk.alpha_g1 + out.a + pk.delta_g1 * Scalar(r)
    b1 = pk.beta_g1 + out.b1 + pk.delta_g1 * Scalar(s)
    assert proof.a == a
    assert proof.b == pk.beta_g2 + b2 + pk.delta_g2 * Scalar(s)
    want_c = functools.reduce(
        operator.add, [out.h, out.l, a * Scalar(s), b1 * Scalar(r), -(pk.delta_g1 * Scalar(r * s))]
    )
    assert proof.c == want_c


def test_oom_in_the_h_msm_phase_is_named() -> None:
    pk, _ = keys("std")
    prepared = prep(fresh("std"), pk)
    plan = plan_for_backend(ProverShape.from_prepared(prepared), CpuDevice(stream_batch=64))
    b = plan["buffers"]
    ntt_done = b["d_a"] + b["ntt_tables"]  # after the ntt phase: d_bc gone, tables cached
    cold_ntt = b["d_a"] + b["d_bc"] + b["ntt_tables"] + b["ntt_twiddle_build"] + b["ntt_scratch"]
    cap = max(cold_ntt, ntt_done + b["h_msm"] - 1)
    assert cap < ntt_done + b["h_msm"]
    backend = CpuDevice(vram_limit=cap, stream_batch=64)
    with prestage(prepared, backend) as buffers, pytest.raises(VramExhausted) as info:
        kernels(prepared, pk, backend, buffers)
    assert info.value.buffer.startswith("h_msm_")
    assert backend.used() == b["ntt_tables"]


def test_plan_host_buffers_match_the_stage_outputs() -> None:
    from simgpu.prover.device import Device

    pk, _ = keys("std")
    synth = fresh("std")
    prepared = prep(synth, pk)
    backend = CpuDevice()
    assert isinstance(backend, Device)
    plan = plan_for_backend(ProverShape.from_prepared(prepared), backend)
    b = plan["buffers"]
    assert b["host_abc"] == synth.host_bytes()["abc"] == prepared.host_bytes()["abc"]
    assert b["host_aux"] == synth.host_bytes()["aux"]
    assert b["host_prep"] == prepared.host_bytes()["prep"]
    assert b["host_srs"] == sum(pk.query(q).nbytes for q in ("h", "l", "a", "b1"))
    assert b["host_srs_g2"] == pk.b_g2.nbytes
    assert plan["stages"]["kernels"]["phases"][0]["release"] == ["d_bc"]
