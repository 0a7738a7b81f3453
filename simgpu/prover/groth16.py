"""The Groth16 prover over BLS12-381, in the pipeline's stages, and its verifier.

Each stage is a plain function, so a runtime can call and time them one by one (the
real runtime runs `synthesize` in a worker process and the GPU stages under its locks):

    synthesis  synthesize(spec, partition_seed) -> Synthesized          CPU, worker process
    prep       prep(synth, pk) -> Prepared                              CPU
    prestage   prestage(prepared, backend) -> DeviceBuffers             device
    kernels    kernels(prepared, pk, backend, buffers) -> KernelOutput  device
    b_g2_msm   b_g2_msm(prepared, pk, threads) -> G2Point               CPU (threads here,
                                                                        or real.g2pool),
               b_g2_msm(prepared, pk, backend=device) -> G2Point        or the device
    epilogue   epilogue(prepared, pk, kernel_out, b_g2, rng) -> Proof   CPU

`prove` chains them and `verify` checks a proof with one multi-pairing.

The proof, for the assignment z = (1, x, w) with r, s random:

    A = alpha + sum_i z_i [u_i(tau)]_1 + r delta
    B = beta  + sum_i z_i [v_i(tau)]_2 + s delta                (and B1 likewise in G1)
    C = sum_aux z_i L_i + sum_j h_j H_j + s A + r B1 - r s delta

kernels computes h (the quotient (a*b - c)/Z, by 3 iNTT + 3 coset NTT + pointwise +
1 coset iNTT) and the four G1 sums H, L, A, B1; b_g2_msm the G2 sum of the B query;
epilogue the rest.  As in supraseal, prep splits the scalars of the L, A and B MSMs by
value: zeros are skipped, ones are batch-added (no scalar multiplication), only the
remaining "tail" goes through Pippenger.  The key's bases stream to the device in batches
of `backend.stream_batch` rows (or stay resident); per batch: the ones are summed through
an index, the tails' bases are gathered on the device next to their scalars.
"""

from __future__ import annotations

import contextlib
import functools
import operator
import secrets
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
from py_arkworks_bls12381 import GT, G1Point, G2Point, Scalar

from simgpu.errors import DesignError, UserError
from simgpu.gpu.bls12_381 import R_ORDER
from simgpu.gpu.encoding import (
    FR_WORDS,
    G1_WORDS,
    g2_from_bytes,
    ints_to_limbs,
    limbs_to_ints,
    random_fr,
    scalar_of,
    scalars_of_limbs,
)
from simgpu.prover.device import Device, DeviceBuffer, DeviceBuffers, phase_scope
from simgpu.prover.keys import ProvingKey, VerifyingKey
from simgpu.prover.memory_plan import key_capacity
from simgpu.prover.prepared import Prepared, QuerySplit
from simgpu.prover.synthesis import Synthesized, synthesize

PROOF_BYTES = 192
_ONE = Scalar(1)
P = TypeVar("P", G1Point, G2Point)


# --- prep ------------------------------------------------------------------------------


def prep(synth: Synthesized, pk: ProvingKey) -> Prepared:
    """The `prep` stage: split the L, A, B scalars into zeros, ones and tails (CPU).

    The Prepared takes over synth's a, b, c arrays (no copy): drop `synth` afterwards so
    prestage's release frees them.  The splits are compiled loops that release the
    interpreter lock (prep runs on a driver thread beside the GPU workers)."""
    if synth.spec != pk.spec:
        raise UserError(f"witness of [{synth.spec.label()}] but key of [{pk.spec.label()}]")
    inputs = ints_to_limbs(synth.input_assignment())
    aux = np.ascontiguousarray(synth.aux, dtype=np.uint32)
    if len(inputs) + len(aux) != pk.num_inputs + pk.num_aux:
        raise UserError("assignment length does not match the proving key")
    return Prepared(
        spec=synth.spec,
        partition_seed=synth.partition_seed,
        public_inputs=list(synth.public_inputs),
        domain_size=synth.domain_size,
        a=synth.a,
        b=synth.b,
        c=synth.c,
        split_l=QuerySplit.query("l", inputs, aux, None),
        split_a=QuerySplit.query("a", inputs, aux, np.asarray(pk.a_index)),
        split_b=QuerySplit.query("b", inputs, aux, np.asarray(pk.b_index)),
        aux_bytes=int(synth.aux.nbytes),
        abc_pin=synth.abc_pin,
    )


# --- prestage --------------------------------------------------------------------------


def prestage(prepared: Prepared, backend: Device) -> DeviceBuffers:
    """The `prestage` stage: allocate d_a (N, 8) and d_bc (2, N, 8) and upload a, b, c.

    On success the host a, b, c are released (the handle owns the device copies);
    on VramExhausted nothing stays allocated and the host vectors are kept."""
    if prepared.a is None:
        raise DesignError("prestage: a, b, c already released (prestaged twice?)")
    n = prepared.domain_size
    d_a = backend.upload("d_a", prepared.a)
    try:
        d_bc = backend.alloc("d_bc", (2, n, FR_WORDS))
        backend.write(d_bc, prepared.b[None], 0)
        backend.write(d_bc, prepared.c[None], 1)
    except BaseException:
        backend.free(d_a)
        raise
    prepared.release_host_abc()
    return DeviceBuffers(backend, {"d_a": d_a, "d_bc": d_bc})


# --- kernels ---------------------------------------------------------------------------


def preload(pk: ProvingKey, backend: Device) -> int:
    """Make the key's G1 bases ready once, at worker start, so that no kernels stage pays
    for it: on the device if the backend keeps them resident (returns the device bytes
    held), else their host copy that batches stream from (pinned memory on the GPU)."""
    queries = ("h", "l", "a", "b1")
    if not backend.resident_bases:
        for q in queries:
            backend.host_bases(pk, q)
        return 0
    return sum(backend.resident(pk, q).nbytes for q in queries)


@dataclass
class KernelOutput:
    """The four G1 sums of the kernels stage."""

    h: G1Point
    l: G1Point  # noqa: E741
    a: G1Point
    b1: G1Point


def _stream_msm(
    backend: Device,
    pk: ProvingKey,
    query: str,
    split: QuerySplit | None,
    dense_scalars: object = None,
) -> G1Point:
    """sum_i s_i P_i over query `query`'s bases, batch by batch.

    split None: dense scalars already on the device (H: h's coefficients in d_a).
    Otherwise per batch: g1_sum of the ones (by index), then the tails' bases gathered on
    the device and their scalars uploaded for one Pippenger MSM.  Every transient buffer
    is freed before returning, also on error."""
    length = pk.query_length(query)
    batch = max(1, min(backend.stream_batch, length))
    tag = f"{query}_msm"
    acc = G1Point.identity()
    staging: DeviceBuffer | None = None
    if backend.resident_bases:
        source = backend.resident(pk, query).array
    else:
        host = backend.host_bases(pk, query)
        staging = backend.alloc(f"{tag}_bases_batch", (batch, G1_WORDS))
    try:
        for start in range(0, length, batch):
            stop = min(start + batch, length)
            if staging is None:
                bases = source[start:stop]
            else:
                backend.write_bases(staging, host[start:stop], 0)
                bases = staging.array[: stop - start]
            if split is None:
                acc = acc + backend.msm(bases, dense_scalars[start:stop], tag)
                continue
            ones, tails, tail_scalars = split.batch(start, stop)
            if len(ones):
                idx = backend.upload(f"{tag}_index", ones)
                try:
                    acc = acc + backend.g1_sum(bases, idx.array, tag)
                finally:
                    backend.free(idx)
            if len(tails):
                acc = acc + _gathered_msm(backend, backend.msm, tag, bases, tails, tail_scalars)
    finally:
        if staging is not None:
            backend.free(staging)
    return acc


class _PhaseClock:
    """Seconds per phase of the kernels stage, when asked for (synchronising the device);
    each phase also names itself to this thread's allocations (device.phase_scope)."""

    def __init__(self, backend: Device, out: dict[str, float] | None) -> None:
        self.backend, self.out = backend, out
        self.t = time.perf_counter() if out is not None else 0.0

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        with phase_scope(name):
            yield
        self.lap(name)

    def lap(self, name: str) -> None:
        if self.out is None:
            return
        self.backend.synchronize()
        now = time.perf_counter()
        self.out[name] = now - self.t
        self.t = now


def kernels(
    prepared: Prepared,
    pk: ProvingKey,
    backend: Device,
    buffers: DeviceBuffers | None = None,
    *,
    timings: dict[str, float] | None = None,
) -> KernelOutput:
    """The `kernels` stage: h by the NTTs, then the G1 MSMs H, L, A, B1.

    buffers None: allocate and upload a, b, c here (the non-prestaged path) and free them
    before returning.  Given: free d_bc as soon as h is in d_a and leave d_a to the
    handle's owner.  timings: if given, filled with the seconds of each phase (upload,
    ntt, h_msm, l_msm, a_msm, b1_msm), the device synchronised at each boundary."""
    own = buffers is None
    clock = _PhaseClock(backend, timings)
    if own:
        buffers = prestage(prepared, backend)
        clock.lap("upload")
    try:
        d_a = buffers.array("d_a")
        with clock.phase("ntt"):
            d_bc = buffers.array("d_bc")
            backend.compute_h(d_a, d_bc[0], d_bc[1])
            del d_bc  # a view would keep the block alive on the GPU
            buffers.release("d_bc")
        n = prepared.domain_size
        with clock.phase("h_msm"):
            sums = {"h": _stream_msm(backend, pk, "h", None, d_a[: n - 1])}
        for q in ("l", "a", "b1"):
            with clock.phase(f"{q}_msm"):
                sums[q] = _stream_msm(backend, pk, q, prepared.split(q))
        out = KernelOutput(h=sums["h"], l=sums["l"], a=sums["a"], b1=sums["b1"])
    except BaseException as e:
        # The finished frames below (views of device buffers in their locals) would keep
        # device memory alive for as long as the caller holds the exception.
        traceback.clear_frames(e.__traceback__)
        raise
    finally:
        if own:
            buffers.free()
    return out


# --- b_g2_msm --------------------------------------------------------------------------


def _g2_chunk(pk: ProvingKey, positions: np.ndarray, scalars: np.ndarray | None) -> G2Point:
    """One worker's share: MSM of its tails, or (scalars None) the sum of its ones, which
    arkworks does as additions into one bucket, without holding the GIL."""
    if not len(positions):
        return G2Point.identity()
    points = g2_from_bytes(np.ascontiguousarray(pk.b_g2[positions]).tobytes())
    sc = [_ONE] * len(points) if scalars is None else scalars_of_limbs(scalars)
    return G2Point.multiexp_unchecked(points, sc)


def b_g2_msm(
    prepared: Prepared, pk: ProvingKey, threads: int = 1, *, backend: Device | None = None
) -> G2Point:
    """The `b_g2_msm` stage: sum_i z_i [v_i(tau)]_2 over the B query, zeros skipped.

    backend None: on the CPU, cut into `threads` chunks of tails and of ones over a pool
    of that size (arkworks releases the GIL inside its MSM), as supraseal runs it beside
    the GPU.  Given a device: on it, as bellperson does (`_b_g2_on_device`)."""
    if backend is not None:
        return _b_g2_on_device(prepared, pk, backend)
    threads = max(1, int(threads))
    split = prepared.split_b
    jobs = [
        (pos, sc)
        for pos, sc in zip(
            np.array_split(split.tails, threads),
            np.array_split(split.tail_scalars, threads),
            strict=True,
        )
    ] + [(pos, None) for pos in np.array_split(split.ones, threads)]
    if threads == 1:
        parts = [_g2_chunk(pk, pos, sc) for pos, sc in jobs]
    else:
        with ThreadPoolExecutor(threads, thread_name_prefix="b_g2_msm") as ex:
            parts = list(ex.map(lambda job: _g2_chunk(pk, *job), jobs))
    return functools.reduce(operator.add, parts, G2Point.identity())


def _gathered_msm(
    backend: Device,
    msm: Callable[[object, object, str], P],
    tag: str,
    bases: object,
    index: np.ndarray,
    scalars: np.ndarray,
) -> P:
    """One Pippenger MSM over the rows `index` of `bases`, gathered on the device, with
    `scalars` uploaded beside them.  The order of the device's arrays is the prover's
    grain that calibrate measures (simgpu.calibrate.arrays): the index, the gathered
    bases (the index freed), the scalars, then the MSM's own; all freed on return."""
    idx = backend.upload(f"{tag}_index", index)
    try:
        gathered = backend.gather(f"{tag}_tail_bases", bases, idx.array)
    finally:
        backend.free(idx)
    try:
        sc = backend.upload(f"{tag}_scalars", scalars)
        try:
            return msm(gathered.array, sc.array, tag)
        finally:
            backend.free(sc)
    finally:
        backend.free(gathered)


def b_g2_batch(split: QuerySplit, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows [start, stop) of the B query as one G2 MSM: positions (relative to start,
    int32) of the tails then the ones, and their scalars (the ones' equal to 1)."""
    ones, tails, tail_scalars = split.batch(start, stop)
    one_scalars = np.zeros((len(ones), FR_WORDS), dtype=np.uint32)
    one_scalars[:, 0] = 1
    return np.concatenate([tails, ones]), np.concatenate([tail_scalars, one_scalars])


def capacity_pieces(
    index: np.ndarray, scalars: np.ndarray, capacity: int | None
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """One MSM's (index, scalars) as MSMs of exactly `capacity` points each (None: as
    they are): the last piece padded with zero scalars on row 0, whose digits the MSM
    skips, so that every piece allocates the same arrays whatever the witness."""
    if capacity is None:
        if len(index):
            yield index, scalars
        return
    for lo in range(0, len(index), capacity):
        i, s = index[lo : lo + capacity], scalars[lo : lo + capacity]
        pad = capacity - len(i)
        if pad:
            i = np.concatenate([i, np.zeros(pad, dtype=i.dtype)])
            s = np.concatenate([s, np.zeros((pad, s.shape[1]), dtype=s.dtype)])
        yield i, s


def _b_g2_on_device(prepared: Prepared, pk: ProvingKey, backend: Device) -> G2Point:
    """b_g2_msm on the device: per batch of `backend.stream_batch` rows of the B query
    (always streamed from the host copy, also with resident G1 bases), the tails and the
    ones gathered next to their scalars for one G2 MSM; a one's digit is a single
    addition into one bucket, so no separate sum is needed.  Transients: the batch's
    points (`b_g2_msm_bases_batch`), an index, the gathered points and scalars, and the
    MSM's temporaries, all freed before returning, also on error.  With the backend's
    msm_capacity "key" the MSM is sized for the circuit's capacity, not for the
    witness's count (`capacity_pieces`, memory_plan.key_capacity).

    The stage books its staging whole before its first copy (`_G2Gather`): the batch's
    points, then the first MSM's gathered points, scalars and index, sized by counting
    the batch's non-zero rows.  This stage runs outside the compute lock, beside the other
    workers' prestage and kernels; asked array by array, its gathered points came 10-50
    ms after its batch, once the batch's copy had left the one stream, and another
    worker's allocation in between split the pool's block under a cap (the forty-eighth
    and forty-ninth leases, docs/validation-log.md).  Booked together, it holds all or
    nothing of its staging, as the model's plan books a phase's staging."""
    split = prepared.split_b
    length = split.length
    host = backend.host_bases_g2(pk)
    batch = max(1, min(backend.stream_batch, length))
    tag = "b_g2_msm"
    acc = G2Point.identity()
    if length == 0:
        return acc
    capacity = key_capacity(prepared.spec, batch) if backend.msm_capacity == "key" else None
    staging = backend.alloc_bases_g2(f"{tag}_bases_batch", batch)
    booked: _G2Gather | None = None
    try:
        for start in range(0, length, batch):
            stop = min(start + batch, length)
            count = split.count(start, stop)
            if not count:
                continue
            booked = _G2Gather(backend, tag, capacity or count)
            backend.write_bases_g2(staging, host[start:stop], 0)
            rows, values = b_g2_batch(split, start, stop)  # host work while the copy runs
            for k, (index, scalars) in enumerate(capacity_pieces(rows, values, capacity)):
                if k:
                    booked = _G2Gather(backend, tag, len(index))
                acc = acc + booked.msm(staging.array[: stop - start], index, scalars)
                booked = None
    finally:
        if booked is not None:
            booked.free()
        backend.free(staging)
    return acc


class _G2Gather:
    """One G2 MSM's gathered arrays, booked before any is filled: the gathered points,
    their scalars and the index, in that order (the points and scalars are what the
    profile's b_g2_msm_staging holds beside the batch; the index is freed before the
    MSM's temporaries are asked).  `msm` fills them, runs the MSM and frees them all;
    `free` lets them go unused (on error)."""

    def __init__(self, backend: Device, tag: str, rows: int) -> None:
        self.backend = backend
        self.tag = tag
        self.held: list[DeviceBuffer] = []
        try:
            self.points = self._book(backend.alloc_bases_g2(f"{tag}_tail_bases", rows))
            self.scalars = self._book(backend.alloc(f"{tag}_scalars", (rows, FR_WORDS)))
            self.index = self._book(backend.alloc(f"{tag}_index", (rows,), np.int32))
        except BaseException:
            self.free()
            raise

    def _book(self, buf: DeviceBuffer) -> DeviceBuffer:
        self.held.append(buf)
        return buf

    def msm(self, bases: object, index: np.ndarray, scalars: np.ndarray) -> G2Point:
        backend = self.backend
        try:
            backend.write(self.index, index)
            backend.gather(f"{self.tag}_tail_bases", bases, self.index.array, out=self.points)
            self.held.remove(self.index)
            backend.free(self.index)
            backend.write(self.scalars, scalars)
            return backend.msm_g2(self.points.array, self.scalars.array, self.tag)
        finally:
            self.free()

    def free(self) -> None:
        while self.held:
            self.backend.free(self.held.pop())


# --- epilogue, proofs ------------------------------------------------------------------


@dataclass
class Proof:
    """A Groth16 proof (A in G1, B in G2, C in G1)."""

    a: G1Point
    b: G2Point
    c: G1Point

    def to_bytes(self) -> bytes:
        """192 bytes: A (48) | B (96) | C (48), each compressed (zcash/arkworks flags)."""
        return self.a.to_compressed_bytes() + self.b.to_compressed_bytes() + self.c.to_compressed_bytes()

    @classmethod
    def from_bytes(cls, raw: bytes) -> Proof:
        """Parse 192 bytes; UserError unless each point is on its curve and in its subgroup."""
        if len(raw) != PROOF_BYTES:
            raise UserError(f"a Groth16 proof is {PROOF_BYTES} bytes, got {len(raw)}")
        try:
            return cls(
                G1Point.from_compressed_bytes(bytes(raw[:48])),
                G2Point.from_compressed_bytes(bytes(raw[48:144])),
                G1Point.from_compressed_bytes(bytes(raw[144:])),
            )
        except Exception as e:  # arkworks raises its own error types for bad encodings
            raise UserError(f"invalid proof encoding: {e}") from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Proof) and (self.a, self.b, self.c) == (other.a, other.b, other.c)

    __hash__ = None  # type: ignore[assignment]


@dataclass
class PartitionedProof:
    """The proof of P independent partitions (as in PoRep): P proofs, P * 192 bytes."""

    proofs: list[Proof] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.proofs)

    def to_bytes(self) -> bytes:
        return b"".join(p.to_bytes() for p in self.proofs)

    @classmethod
    def from_bytes(cls, raw: bytes) -> PartitionedProof:
        if len(raw) % PROOF_BYTES:
            raise UserError(f"partitioned proof length {len(raw)} is not a multiple of 192")
        return cls([Proof.from_bytes(raw[i : i + PROOF_BYTES]) for i in range(0, len(raw), PROOF_BYTES)])


def _randomness(rng: np.random.Generator | tuple[int, int] | None) -> tuple[int, int]:
    if rng is None:
        return secrets.randbelow(R_ORDER), secrets.randbelow(R_ORDER)
    if isinstance(rng, tuple):
        r, s = rng
        return int(r) % R_ORDER, int(s) % R_ORDER
    r, s = limbs_to_ints(random_fr(2, rng))
    return r, s


def epilogue(
    prepared: Prepared,
    pk: ProvingKey,
    kernel_out: KernelOutput,
    b_g2: G2Point,
    rng: np.random.Generator | tuple[int, int] | None = None,
) -> Proof:
    """The `epilogue` stage: blind with r, s (from rng, or given as (r, s)) and assemble
    A, B, C (CPU, a handful of scalar multiplications).

    Each scalar multiplication is an arkworks multi-exponentiation, which releases the
    interpreter lock (a plain `point * scalar` holds it for 10-300 us), so the epilogue
    on a driver thread holds the lock only for its few point additions."""
    r, s = _randomness(rng)
    r_s, s_s = scalar_of(r), scalar_of(s)
    a = pk.alpha_g1 + kernel_out.a + G1Point.multiexp_unchecked([pk.delta_g1], [r_s])
    b = pk.beta_g2 + b_g2 + G2Point.multiexp_unchecked([pk.delta_g2], [s_s])
    b1 = pk.beta_g1 + kernel_out.b1 + G1Point.multiexp_unchecked([pk.delta_g1], [s_s])
    minus_rs = scalar_of(-r * s % R_ORDER)
    c = kernel_out.h + kernel_out.l + G1Point.multiexp_unchecked([a, b1, pk.delta_g1], [s_s, r_s, minus_rs])
    return Proof(a, b, c)


def prove(
    pk: ProvingKey,
    synth: Synthesized,
    backend: Device | None = None,
    *,
    threads: int = 1,
    rng: np.random.Generator | tuple[int, int] | None = None,
    b_g2: Callable[[Prepared], G2Point] | None = None,
) -> Proof:
    """All stages after synthesis, in order (prestaged path; buffers freed at the end).
    `b_g2` replaces the in-process b_g2_msm (a prover passes its G2Pool's)."""
    if backend is None:
        from simgpu.prover.cpu_device import CpuDevice

        backend = CpuDevice()
    prepared = prep(synth, pk)
    with prestage(prepared, backend) as buffers:
        out = kernels(prepared, pk, backend, buffers)
    b2 = b_g2(prepared) if b_g2 is not None else b_g2_msm(prepared, pk, threads)
    return epilogue(prepared, pk, out, b2, rng)


def prove_partitions(
    pk: ProvingKey,
    partition_seeds: list[int],
    backend: Device | None = None,
    *,
    threads: int = 1,
    rng: np.random.Generator | tuple[int, int] | None = None,
) -> tuple[PartitionedProof, list[list[int]]]:
    """Prove P partitions of pk's circuit one after the other (synthesis in-process):
    the proof and each partition's public inputs."""
    proofs, inputs = [], []
    for seed in partition_seeds:
        synth = synthesize(pk.spec, seed)
        inputs.append(list(synth.public_inputs))
        proofs.append(prove(pk, synth, backend, threads=threads, rng=rng))
    return PartitionedProof(proofs), inputs


# --- verification ----------------------------------------------------------------------


def verify(vk: VerifyingKey, public_inputs: list[int], proof: Proof) -> bool:
    """e(A, B) == e(alpha, beta) * e(IC(x), gamma) * e(C, delta), as one pairing check
    e(A, B) e(-alpha, beta) e(-IC(x), gamma) e(-C, delta) == 1.

    IC(x) = ic_0 + sum_i x_i ic_i.  False for a wrong number of inputs or an input not
    reduced mod r."""
    if len(public_inputs) + 1 != vk.num_inputs:
        return False
    if any(not 0 <= int(x) < R_ORDER for x in public_inputs):
        return False
    acc = vk.ic[0]
    if public_inputs:  # one multi-exponentiation: it releases the interpreter lock
        acc = acc + G1Point.multiexp_unchecked(list(vk.ic[1:]), [scalar_of(int(x)) for x in public_inputs])
    return bool(
        GT.pairing_check(
            [proof.a, -vk.alpha_g1, -acc, -proof.c],
            [proof.b, vk.beta_g2, vk.gamma_g2, vk.delta_g2],
        )
    )


def verify_partitions(vk: VerifyingKey, public_inputs: list[list[int]], proof: PartitionedProof) -> bool:
    """Every partition's proof verifies against its own public inputs."""
    if len(public_inputs) != len(proof):
        return False
    return all(verify(vk, x, p) for x, p in zip(public_inputs, proof.proofs, strict=True))
