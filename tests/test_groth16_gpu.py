"""The Groth16 prover on the CuPy backend (run on the GPU machine: `pytest -m gpu`).

Every test skips cleanly where CuPy or a CUDA device is missing."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point

from simgpu.errors import VramExhausted
from simgpu.gpu.encoding import limbs_to_ints
from simgpu.gpu.ntt import h_ref
from simgpu.prover.circuits import CircuitSpec
from simgpu.prover.cpu_device import CpuDevice
from simgpu.prover.cupy_device import cupy_device_available
from simgpu.prover.groth16 import Proof, kernels, preload, prep, prestage, prove, verify
from simgpu.prover.keys import load_keys, save_keys
from simgpu.prover.memory_plan import ProverShape, plan_for_backend, stage_peak
from simgpu.prover.setup import setup
from simgpu.prover.synthesis import synthesize

pytestmark = pytest.mark.gpu

THREADS = os.cpu_count() or 1


@pytest.fixture(scope="module", autouse=True)
def _needs_gpu() -> None:
    if not cupy_device_available():
        pytest.skip("needs CuPy and a CUDA device")


def spec_of(log_n: int) -> CircuitSpec:
    return CircuitSpec(log_constraints=log_n, public_inputs=4, b_density=0.25, bool_fraction=0.5, seed=log_n)


@pytest.fixture(scope="module")
def key_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("keys")


_keys: dict[int, tuple] = {}


def keys_for(log_n: int, key_dir: Path):
    """Setup with the G1 points on the GPU, saved and memory-mapped back (as in use)."""
    if log_n not in _keys:
        from simgpu.prover.cupy_device import CupyDevice

        pk, vk = setup(spec_of(log_n), seed=1, backend=CupyDevice())
        path = key_dir / f"k{log_n}.sgk"
        save_keys(path, pk, vk, setup_seed=1)
        _keys[log_n] = load_keys(path)
    return _keys[log_n]


def cupy_backend(**kw):
    from simgpu.prover.cupy_device import CupyDevice

    return CupyDevice(**kw)


def _settle(backend) -> int:
    gc.collect()
    backend.synchronize()
    return backend.used()


def test_gpu_sums_equal_cpu_sums_on_a_small_circuit() -> None:
    """Same key, same witness: the CuPy backend's h and G1 sums are the CPU backend's."""
    spec = CircuitSpec(log_constraints=10, public_inputs=2, seed=3)
    pk, vk = setup(spec, seed=2, workers=1)
    gpu = cupy_backend(stream_batch=300)  # several batches per query
    want = kernels(prep(synthesize(spec, 1), pk), pk, CpuDevice(stream_batch=300))
    got = kernels(prep(synthesize(spec, 1), pk), pk, gpu)
    assert (got.h, got.l, got.a, got.b1) == (want.h, want.l, want.a, want.b1)
    # and the H polynomial itself
    synth = synthesize(spec, 1)
    prepared = prep(synth, pk)
    a, b, c = (limbs_to_ints(x) for x in (synth.a, synth.b, synth.c))
    with prestage(prepared, gpu) as buffers:
        d_bc = buffers.array("d_bc")
        gpu.compute_h(buffers.array("d_a"), d_bc[0], d_bc[1])
        del d_bc
        assert limbs_to_ints(buffers.array("d_a").get()) == h_ref(a, b, c)
    synth = synthesize(spec, 4)
    assert verify(vk, synth.public_inputs, prove(pk, synth, gpu, threads=THREADS))


@pytest.mark.parametrize("log_n", [16, 18, 20])
def test_prove_and_verify(log_n: int, key_dir: Path) -> None:
    pk, vk = keys_for(log_n, key_dir)
    backend = cupy_backend()
    synth = synthesize(pk.spec, 7)
    proof = prove(pk, synth, backend, threads=THREADS)
    assert verify(vk, synth.public_inputs, proof)
    assert verify(vk, synth.public_inputs, Proof.from_bytes(proof.to_bytes()))
    assert not verify(vk, synth.public_inputs, Proof(proof.a + G1Point(), proof.b, proof.c))
    x = synth.public_inputs
    assert not verify(vk, [x[0] + 1, *x[1:]], proof)


def test_bad_witness_fails_on_gpu(key_dir: Path) -> None:
    pk, vk = keys_for(16, key_dir)
    synth = synthesize(pk.spec, 7, corrupt=1234)
    assert not verify(vk, synth.public_inputs, prove(pk, synth, cupy_backend(), threads=THREADS))


def test_streamed_and_resident_bases_give_the_same_sums(key_dir: Path) -> None:
    pk, _ = keys_for(16, key_dir)
    outs = []
    for kw in ({"stream_batch": 1 << 12}, {"stream_batch": 1 << 22}, {"resident_bases": True}):
        backend = cupy_backend(**kw)
        preload(pk, backend)
        o = kernels(prep(synthesize(pk.spec, 3), pk), pk, backend)
        outs.append((o.h, o.l, o.a, o.b1))
        backend.drop_resident()
    assert outs[0] == outs[1] == outs[2]


def _plan_check(pk, backend) -> tuple[int, int]:
    """(measured, planned) device bytes of prestage + kernels above the resident baseline,
    on a warm backend (NTT tables and kernel constants already cached)."""
    prove(pk, synthesize(pk.spec, 1), backend, threads=THREADS)  # warm-up
    prepared = prep(synthesize(pk.spec, 2), pk)
    plan = plan_for_backend(ProverShape.from_prepared(prepared), backend)
    base = _settle(backend)
    with backend.peak_scope() as meter:
        buffers = prestage(prepared, backend)
        kernels(prepared, pk, backend, buffers)
        buffers.free()
    resident = sum(plan["buffers"][b] for b in plan["resident"]["vram"])
    planned = stage_peak(plan, "kernels") - resident
    return meter.peak - base, planned


@pytest.mark.parametrize("log_n", [18, 20])
@pytest.mark.parametrize("resident", [False, True])
def test_footprint_plan_within_5_percent_of_pool_peak(log_n: int, resident: bool, key_dir: Path) -> None:
    pk, _ = keys_for(log_n, key_dir)
    backend = cupy_backend(resident_bases=resident, stream_batch=1 << 18)
    preload(pk, backend)
    measured, planned = _plan_check(pk, backend)
    backend.drop_resident()
    assert abs(measured - planned) <= 0.05 * planned, (measured, planned)


def _fill_split_blocks(backend) -> list:
    """Arrays that take up the free parts of the pool's split blocks, for a test's cap.

    A block that a persistent array (an NTT table, a constant) was carved from stays in
    the pool once freed: free_all_blocks cannot give back a chunk still partly in use.
    A cap counts its free part as room, so a test that sizes its cap to the byte met no
    VramExhausted where its buffers fitted into the holes (the thirty-ninth lease: 7.4
    MiB of them, after test_kernels_gpu).  The pool serves a request from the smallest
    free block that holds it and otherwise grows; so ask for what is free, keep what
    the holes served, and halve the request whenever it grew the pool instead."""
    unit = 512  # the pool's grain: every hole is a multiple of it
    pool, fillers = backend.pool, []
    pool.free_all_blocks()
    want = pool.free_bytes()
    with backend.cp.cuda.Device(backend.device):
        while pool.free_bytes() > 0:
            total = pool.total_bytes()
            x = backend.cp.empty(want, dtype=backend.cp.uint8)
            if pool.total_bytes() > total:  # no hole held it: give the new chunk back
                del x
                pool.free_all_blocks()
                if want == unit:
                    break
                want = max(unit, want // 2 // unit * unit)
            else:
                fillers.append(x)
                want = min(want, pool.free_bytes())
    return fillers


def test_vram_cap_raises_vram_exhausted_and_leaks_nothing(key_dir: Path) -> None:
    pk, vk = keys_for(16, key_dir)
    backend = cupy_backend(stream_batch=1 << 14)
    prove(pk, synthesize(pk.spec, 1), backend, threads=THREADS)  # warm caches
    prepared = prep(synthesize(pk.spec, 2), pk)
    plan = plan_for_backend(ProverShape.from_prepared(prepared), backend)
    b = plan["buffers"]
    _settle(backend)
    fillers = _fill_split_blocks(backend)
    try:
        # prestage fits, the first MSM's transients (tens of MB here) do not
        base = _settle(backend)
        assert backend.pool.free_bytes() == 0, "the pool's split blocks were not all filled"
        assert b["h_msm"] > b["d_bc"] + (1 << 20)
        backend.set_vram_limit(backend.pool.total_bytes() + b["d_a"] + b["d_bc"] + (1 << 20))
        with pytest.raises(VramExhausted) as info:
            with prestage(prepared, backend) as buffers:
                kernels(prepared, pk, backend, buffers)
        assert info.value.buffer.startswith(("h_msm", "ntt_")), info.value.buffer
        del info
        assert _settle(backend) == base
        # too small for d_bc: prestage fails cleanly and keeps the host vectors
        backend.set_vram_limit(None)
        fillers += _fill_split_blocks(backend)
        base = _settle(backend)
        backend.set_vram_limit(backend.pool.total_bytes() + b["d_a"] + (1 << 16))
        fresh = prep(synthesize(pk.spec, 3), pk)
        with pytest.raises(VramExhausted) as info:
            prestage(fresh, backend)
        assert info.value.buffer == "d_bc" and fresh.a is not None
        del info
        assert _settle(backend) == base
    finally:
        backend.set_vram_limit(None)
        del fillers
    synth = synthesize(pk.spec, 4)
    assert verify(vk, synth.public_inputs, prove(pk, synth, backend, threads=THREADS))


def test_a_capped_pool_gives_its_cache_back_only_when_short(key_dir: Path) -> None:
    """Under a cap with room to spare, proving never flushes the pool's cache (each
    flush waits for the whole device).  When the cache holds only blocks too small for
    the NTT's tables, compute_h still runs: the tables are built in a call that
    flushes once and repeats, not inside the in-place transform, and its sums are the
    CPU backend's."""
    from simgpu.gpu import ntt

    pk, vk = keys_for(16, key_dir)
    backend = cupy_backend(stream_batch=1 << 14)
    prove(pk, synthesize(pk.spec, 1), backend, threads=THREADS)  # warm caches
    try:
        backend.set_vram_limit(2 * backend.pool.total_bytes() + (64 << 20))
        before = backend.flushes
        synth = synthesize(pk.spec, 2)
        assert verify(vk, synth.public_inputs, prove(pk, synth, backend, threads=THREADS))
        assert backend.flushes == before
        prepared = prep(synthesize(pk.spec, 3), pk)
        with prestage(prepared, backend) as buffers:
            ntt.clear_caches()
            backend.flush()
            # every byte the cap leaves, in blocks of 256 KiB that are each their own
            # cudaMalloc, so that freed they cannot merge into the 1 MiB twiddle table
            small = 1 << 16  # uint32s
            fillers = []
            while backend._free_now() >= 4 * small:
                fillers.append(backend.alloc("filler", (small,), np.uint32))
            for f in fillers:
                backend.free(f)
            del fillers
            assert backend.pool.free_bytes() > (1 << 20) > backend._free_now()
            got = kernels(prepared, pk, backend, buffers)
        # ours above, and one for the tables where CuPy's pool, at its limit, did not
        # give its cache back itself first (it does, in CuPy 14): not counted here
        assert backend.flushes in (before + 1, before + 2)
        want = kernels(prep(synthesize(pk.spec, 3), pk), pk, CpuDevice(stream_batch=1 << 14))
        assert (got.h, got.l, got.a, got.b1) == (want.h, want.l, want.a, want.b1)
    finally:
        backend.set_vram_limit(None)


def test_a_cap_counts_the_free_part_of_a_split_block() -> None:
    """CuPy's pool serves a small array from a larger cached block by splitting it, and
    a flush gives back only whole blocks: the free rest of a split block stays cached and
    counts against the cap.  So a request larger than that rest fails although the live
    arrays leave room for it, and the shortfall record says where the bytes were."""
    MiB = 1 << 20
    backend = cupy_backend()
    backend.flush()
    # Earlier tests in this process may still hold arrays in split blocks, whose free
    # rests a flush cannot give back (the forty-seventh lease: this test passed alone
    # and failed after the others, its 8 MiB served from such a rest).  Every size here
    # is larger than all of those rests together, so each request finds only the
    # blocks this test makes.
    stranded = -(-backend.pool.free_bytes() // MiB) * MiB
    small_b = stranded + 8 * MiB
    more_b = stranded + 60 * MiB
    rest = more_b - 4 * MiB  # what the small array leaves free of the big one's block
    big_b = small_b + rest
    try:
        backend.set_vram_limit(backend.pool.total_bytes() + big_b + 32 * MiB)
        big = backend.alloc("big", (big_b // 4,), np.uint32)  # its own block
        backend.free(big)
        del big
        total = backend.pool.total_bytes()
        small = backend.alloc("small", (small_b // 4,), np.uint32)
        assert backend.pool.total_bytes() == total  # split from the cached block, no new one
        live = backend.pool.used_bytes()
        with pytest.raises(VramExhausted):
            # larger than the block's free rest, and the cap leaves 32 MiB for a new block
            backend.alloc("more", (more_b // 4,), np.uint32)
        last = backend.shortfalls[-1]
        assert last["in_arrays"] == live
        assert last["cached"] >= rest  # the split block's free rest
        backend.free(small)
    finally:
        backend.set_vram_limit(None)
        backend.flush()


def test_b_g2_msm_sized_by_the_key_takes_the_same_pool_bytes_for_every_witness(key_dir: Path) -> None:
    """With msm_capacity "key" the G2 MSM's arrays are the circuit's: the pool's peak
    is the same for every witness and within 5% of the plan, and the sum is the CPU
    stage's (by the witness, the peaks differ, as the capped H200 runs' race showed)."""
    from simgpu.prover.groth16 import b_g2_msm

    pk, _ = keys_for(16, key_dir)
    peaks: dict[str, set[int]] = {"witness": set(), "key": set()}
    for capacity in peaks:
        backend = cupy_backend(stream_batch=1 << 22, msm_capacity=capacity)
        for seed in (5, 6, 7):
            prepared = prep(synthesize(pk.spec, seed), pk)
            b_g2_msm(prepared, pk, backend=backend)  # warm-up
            base = _settle(backend)
            with backend.peak_scope() as meter:
                got = b_g2_msm(prepared, pk, backend=backend)
            assert _settle(backend) == base
            assert got == b_g2_msm(prepared, pk, THREADS)
            peaks[capacity].add(meter.peak - base)
            if capacity == "key":
                plan = plan_for_backend(ProverShape.from_prepared(prepared), backend, b_g2_on="gpu")
                resident = sum(plan["buffers"][b] for b in plan["resident"]["vram"])
                planned = stage_peak(plan, "b_g2_msm") - resident
                assert abs((meter.peak - base) - planned) <= 0.05 * planned, (meter.peak - base, planned)
    assert len(peaks["key"]) == 1 and len(peaks["witness"]) > 1, peaks


def test_b_g2_msm_books_each_batchs_arrays_together_in_the_pools_own_trace(key_dir: Path) -> None:
    """CuPy's pool, traced (AllocTrace): the bases batch first, then for every batch its
    gathered points, their scalars and the index back to back, before anything is freed
    (the batch's copy comes after them); the sum is the CPU stage's."""
    from simgpu.prover.device import AllocTrace
    from simgpu.prover.groth16 import b_g2_msm

    pk, _ = keys_for(16, key_dir)
    batch = 1 << 13
    backend = cupy_backend(stream_batch=batch)
    prepared = prep(synthesize(pk.spec, 5), pk)
    b_g2_msm(prepared, pk, backend=backend)  # warm-up
    trace = backend.alloc_trace = AllocTrace()
    try:
        with backend.peak_scope("b_g2_msm"):
            got = b_g2_msm(prepared, pk, backend=backend)
    finally:
        backend.alloc_trace = None
    assert got == b_g2_msm(prepared, pk, THREADS)
    ops = [(op, nbytes) for _, _, _, op, nbytes, *_ in trace.rows if op in ("malloc", "free")]

    def near(got: tuple[str, int], want_bytes: int) -> bool:
        return got[0] == "malloc" and 0 <= got[1] - want_bytes < 512  # CuPy rounds up to 512 B

    assert near(ops[0], batch * 192)
    split, i, seen = prepared.split_b, 1, 0
    for start in range(0, split.length, batch):
        n = split.count(start, min(start + batch, split.length))
        if not n:
            continue
        i = next(j for j in range(i, len(ops)) if near(ops[j], n * 192))
        assert near(ops[i + 1], n * 32) and near(ops[i + 2], n * 4), ops[i : i + 3]
        i, seen = i + 3, seen + 1
    assert seen > 1  # several batches


def test_setup_on_gpu_matches_setup_on_cpu() -> None:
    spec = CircuitSpec(log_constraints=8, public_inputs=2, seed=5)
    gpu_pk, gpu_vk = setup(spec, seed=3, backend=cupy_backend())
    cpu_pk, cpu_vk = setup(spec, seed=3, workers=1)
    for name in ("a", "b_g1", "l", "h"):
        assert np.array_equal(getattr(gpu_pk, name), getattr(cpu_pk, name)), name
    assert gpu_vk.ic == cpu_vk.ic


@pytest.mark.parametrize("log_n", [16, 20])
def test_b_g2_msm_on_the_gpu_equals_the_cpu_stage_and_its_plan(log_n: int, key_dir: Path) -> None:
    """b_g2_msm on the device (several batches at 2^16, one at 2^20): the CPU stage's
    sum, a proof that verifies, and the pool's peak within 5% of the memory plan."""
    from simgpu.prover.groth16 import b_g2_msm, epilogue

    pk, vk = keys_for(log_n, key_dir)
    backend = cupy_backend(stream_batch=1 << 13 if log_n == 16 else 1 << 22)
    synth = synthesize(pk.spec, 5)
    prepared = prep(synth, pk)
    b_g2_msm(prepared, pk, backend=backend)  # warm-up: G2 modules, pinned copy of the query
    plan = plan_for_backend(ProverShape.from_prepared(prepared), backend, b_g2_on="gpu")
    base = _settle(backend)
    with backend.peak_scope() as meter:
        got = b_g2_msm(prepared, pk, backend=backend)
    assert _settle(backend) == base
    assert got == b_g2_msm(prepared, pk, THREADS)
    resident = sum(plan["buffers"][b] for b in plan["resident"]["vram"])
    planned = stage_peak(plan, "b_g2_msm") - resident
    assert abs((meter.peak - base) - planned) <= 0.05 * planned, (meter.peak - base, planned)
    with prestage(prepared, backend) as buffers:
        out = kernels(prepared, pk, backend, buffers)
    assert verify(vk, synth.public_inputs, epilogue(prepared, pk, out, got))
