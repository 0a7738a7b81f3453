"""A Groth16 trusted setup for tests and benchmarks: the toxic waste comes from a seed.

Never use these keys for anything real: whoever knows the seed can forge proofs.

For a circuit with QAP polynomials u_i, v_i, w_i (row j of A, B, C is the evaluation at
the j-th root of unity of the domain of size N) and Z(X) = X^N - 1:

* the polynomials are evaluated at tau through the Lagrange basis of the domain,
  L_j(tau) = Z(tau) * w^j / (N * (tau - w^j)), one batch inversion for all j;
* proving key: [alpha]_1, [beta]_1, [delta]_1, [beta]_2, [delta]_2, the A query
  [u_i(tau)]_1 and the B queries [v_i(tau)]_{1,2} over the variables that occur in A
  (resp. B) only (bellman drops the others, the prover uses the density), the L query
  [(beta u_i + alpha v_i + w_i)/delta]_1 over the aux variables, and the H query
  [tau^i Z(tau)/delta]_1 for i < N - 1;
* verifying key: [alpha]_1, [beta]_2, [gamma]_2, [delta]_2 and the IC points
  [(beta u_i + alpha v_i + w_i)/gamma]_1 over the inputs (ONE first).

The field arithmetic is Python integers (about 3 s per 2^20 constraints).  The G1 points
are one fixed-base multiplication of the generator by about (A + B + L + H) scalars:
`backend.fixed_base_mul_g1` on the GPU when a CupyDevice is given, else the windowed
CPU method of `simgpu.prover.cpu_device` (about 90 us per point per core: 2^16
constraints take about 15 s on 2 cores, 2^20 about 4 minutes on 16 cores).  The G2 points
of the B query are always made on the CPU (about 180 us each per core).
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

from simgpu.gpu.bls12_381 import R_ORDER, root_of_unity
from simgpu.gpu.encoding import g1_from_limbs, ints_to_limbs, limbs_to_ints, random_fr, scalar_of
from simgpu.prover.circuits import R1CS, CircuitSpec, r1cs_of
from simgpu.prover.cpu_device import fixed_base_mul
from simgpu.prover.device import Device
from simgpu.prover.keys import ProvingKey, VerifyingKey


@dataclass(frozen=True)
class ToxicWaste:
    """The secrets of a setup: tau (the evaluation point) and the blinding alpha, beta,
    gamma, delta, all nonzero elements of Fr."""

    tau: int
    alpha: int
    beta: int
    gamma: int
    delta: int

    @classmethod
    def from_seed(cls, seed: int) -> ToxicWaste:
        rng = np.random.default_rng([int(seed), 0x544F584943])
        vals: list[int] = []
        while len(vals) < 5:
            vals.extend(v for v in limbs_to_ints(random_fr(5, rng)) if v != 0)
        return cls(*vals[:5])


def batch_inverse(values: list[int]) -> list[int]:
    """Inverses mod r of nonzero values with one modular inversion (Montgomery's trick)."""
    r = R_ORDER
    prefix, acc = [], 1
    for v in values:
        prefix.append(acc)
        acc = acc * v % r
    inv = pow(acc, -1, r)
    out = [0] * len(values)
    for i in range(len(values) - 1, -1, -1):
        out[i] = inv * prefix[i] % r
        inv = inv * values[i] % r
    return out


def lagrange_at(tau: int, rows: int, domain: int) -> list[int]:
    """L_j(tau) for j < rows, the Lagrange basis of the size-`domain` subgroup."""
    r = R_ORDER
    omega = root_of_unity(domain.bit_length() - 1)
    z = (pow(tau, domain, r) - 1) % r
    if z == 0:
        raise ValueError("tau lies in the evaluation domain; pick another seed")
    scale = z * pow(domain, -1, r) % r
    powers, denominators, w = [], [], 1
    for _ in range(rows):
        powers.append(w)
        denominators.append((tau - w) % r)
        w = w * omega % r
    inv = batch_inverse(denominators)
    return [scale * p % r * d % r for p, d in zip(powers, inv, strict=True)]


def qap_at(r1cs: R1CS, lagrange: list[int]) -> tuple[list[int], list[int], list[int]]:
    """u_i(tau), v_i(tau), w_i(tau) for every variable i: the columns of A, B, C summed
    against the Lagrange values of their rows."""
    r = R_ORDER
    out = []
    for m in (r1cs.A, r1cs.B, r1cs.C):
        acc = [0] * r1cs.num_vars
        for row, col, coef in zip(m.row_of_entry().tolist(), m.cols.tolist(), m.coefs.tolist(), strict=True):
            acc[col] += coef * lagrange[row]
        out.append([x % r for x in acc])
    return out[0], out[1], out[2]


def key_id_of(spec: CircuitSpec, seed: int) -> str:
    """A stable id of the key pair `setup(spec, seed)` makes (backends cache bases by it)."""
    raw = json.dumps({"spec": spec.to_dict(), "seed": int(seed)}, sort_keys=True).encode()
    return hashlib.sha256(raw).hexdigest()[:16]


def setup(
    spec: CircuitSpec, seed: int, backend: Device | None = None, *, workers: int | None = None
) -> tuple[ProvingKey, VerifyingKey]:
    """Keys for the circuit family `spec`, toxic waste from `seed`.  G1 points on
    `backend` if given (the GPU's fixed-base kernel on a CupyDevice), else on the CPU over
    `workers` processes (default: all cores)."""
    r = R_ORDER
    r1cs = r1cs_of(spec)
    tw = ToxicWaste.from_seed(seed)
    n_dom, n_in = spec.domain_size, r1cs.num_inputs
    lag = lagrange_at(tw.tau, r1cs.num_constraints, n_dom)
    u, v, w = qap_at(r1cs, lag)

    a_index = r1cs.density("A")
    b_index = r1cs.density("B")
    gamma_inv, delta_inv = pow(tw.gamma, -1, r), pow(tw.delta, -1, r)

    def lc(i: int) -> int:
        return (tw.beta * u[i] + tw.alpha * v[i] + w[i]) % r

    a_sc = [u[i] for i in a_index.tolist()]
    b_sc = [v[i] for i in b_index.tolist()]
    l_sc = [lc(i) * delta_inv % r for i in range(n_in, r1cs.num_vars)]
    ic_sc = [lc(i) * gamma_inv % r for i in range(n_in)]
    z_delta = (pow(tw.tau, n_dom, r) - 1) * delta_inv % r
    h_sc, t = [], z_delta
    for _ in range(n_dom - 1):
        h_sc.append(t)
        t = t * tw.tau % r

    g1, g2 = G1Point(), G2Point()
    scalars = ints_to_limbs(a_sc + b_sc + l_sc + h_sc + ic_sc)
    if backend is not None:
        points = backend.fixed_base_mul_g1(g1, scalars)
    else:
        points = fixed_base_mul("g1", g1, scalars, workers)
    cuts = np.cumsum([len(a_sc), len(b_sc), len(l_sc), len(h_sc)])
    a_pts, b1_pts, l_pts, h_pts, ic_pts = np.split(points, cuts)
    b2_pts = fixed_base_mul("g2", g2, ints_to_limbs(b_sc), workers)

    pk = ProvingKey(
        spec=spec,
        key_id=key_id_of(spec, seed),
        domain_size=n_dom,
        num_inputs=n_in,
        num_aux=r1cs.num_aux,
        alpha_g1=g1 * scalar_of(tw.alpha),
        beta_g1=g1 * scalar_of(tw.beta),
        delta_g1=g1 * scalar_of(tw.delta),
        beta_g2=g2 * scalar_of(tw.beta),
        delta_g2=g2 * scalar_of(tw.delta),
        a=np.ascontiguousarray(a_pts),
        a_index=a_index.astype(np.uint32),
        b_g1=np.ascontiguousarray(b1_pts),
        b_g2=b2_pts,
        b_index=b_index.astype(np.uint32),
        l=np.ascontiguousarray(l_pts),
        h=np.ascontiguousarray(h_pts),
    )
    vk = VerifyingKey(
        alpha_g1=pk.alpha_g1,
        beta_g2=pk.beta_g2,
        gamma_g2=g2 * scalar_of(tw.gamma),
        delta_g2=pk.delta_g2,
        ic=g1_from_limbs(ic_pts),
    )
    return pk, vk


def key_path(spec: CircuitSpec, seed: int, keys_dir: str | Path) -> Path:
    """Where cached_keys keeps the keys of (spec, seed)."""
    return Path(keys_dir) / f"groth16-n{spec.constraints}-{key_id_of(spec, seed)}.sgk"


def cached_keys(
    spec: CircuitSpec, seed: int, keys_dir: str | Path, backend: Device | None = None
) -> tuple[ProvingKey, VerifyingKey, float | None]:
    """Keys for (spec, seed) from `keys_dir`, made by `setup` and saved there the first
    time.  Returns (pk, vk, setup seconds, or None when loaded).  The keys come back
    memory-mapped, as a prover uses them; a stale or broken file is made again."""
    from simgpu.prover.keys import load_keys, save_keys

    path = key_path(spec, seed, keys_dir)
    if path.exists():
        try:
            pk, vk = load_keys(path)
            if pk.spec == spec:
                return pk, vk, None
        except Exception as e:  # any defect of the cache file: make the keys again
            warnings.warn(f"ignoring cached key {path}: {e}", stacklevel=2)
    t = time.perf_counter()
    pk, vk = setup(spec, seed, backend=backend)
    took = time.perf_counter() - t
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    save_keys(tmp, pk, vk, setup_seed=seed)
    tmp.replace(path)  # atomic: a concurrent reader never sees half a file
    pk, vk = load_keys(path)
    return pk, vk, took
