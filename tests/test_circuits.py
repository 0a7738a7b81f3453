"""Synthetic R1CS circuits and witness synthesis (CPU, small sizes)."""

from __future__ import annotations

import pickle
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import numpy as np
import pytest

from simgpu.errors import UserError
from simgpu.gpu.bls12_381 import R_ORDER
from simgpu.gpu.encoding import limbs_to_ints
from simgpu.prover.circuits import BIT, INPUT, LIN, MUL, CircuitSpec, generate, layout_of, r1cs_of
from simgpu.prover.synthesis import signed_to_fr_limbs, synthesize, unsatisfied_rows


def test_spec_normalises_and_validates() -> None:
    a = CircuitSpec(log_constraints=8, seed=3)
    b = CircuitSpec(constraints=256, seed=3)
    assert a == b and hash(a) == hash(b)
    assert a.domain_size == 256 and a.log_domain == 8
    odd = CircuitSpec(constraints=300)
    assert odd.log_constraints is None and odd.domain_size == 512
    assert CircuitSpec.from_dict(a.to_dict()) == a
    assert pickle.loads(pickle.dumps(a)) == a
    with pytest.raises(UserError):
        CircuitSpec()
    with pytest.raises(UserError):
        CircuitSpec(constraints=8)
    with pytest.raises(UserError):
        CircuitSpec(log_constraints=8, constraints=100)
    with pytest.raises(UserError):
        CircuitSpec(log_constraints=8, b_density=0.0)
    with pytest.raises(UserError):
        CircuitSpec(log_constraints=8, bool_fraction=1.0)
    with pytest.raises(UserError):
        CircuitSpec(log_constraints=4, public_inputs=5)
    assert layout_of(CircuitSpec(log_constraints=4, public_inputs=4)).field_rows >= 6


@pytest.mark.parametrize(
    "spec",
    [
        CircuitSpec(log_constraints=4, public_inputs=1),
        CircuitSpec(log_constraints=8, public_inputs=3, b_density=0.5, bool_fraction=0.3, seed=1),
        CircuitSpec(log_constraints=10, public_inputs=0, b_density=0.1, bool_fraction=0.8, seed=2),
        CircuitSpec(constraints=700, public_inputs=5, b_density=0.9, bool_fraction=0.0, seed=4),
    ],
    ids=lambda s: s.label(),
)
def test_witness_satisfies_every_constraint(spec: CircuitSpec) -> None:
    synth = synthesize(spec, partition_seed=11)
    assert unsatisfied_rows(synth) == []
    n, big_n = spec.constraints, spec.domain_size
    assert synth.a.shape == synth.b.shape == synth.c.shape == (big_n, 8)
    # rows past the last constraint are zero padding
    assert not synth.a[n:].any() and not synth.b[n:].any() and not synth.c[n:].any()
    assert len(synth.public_inputs) == spec.public_inputs


def test_evaluations_match_the_matrices() -> None:
    """a, b, c are <A_j, z>, <B_j, z>, <C_j, z>, evaluated entry by entry in Python."""
    spec = CircuitSpec(log_constraints=7, public_inputs=2, seed=5)
    r1cs = r1cs_of(spec)
    synth = synthesize(spec, 1)
    z = [1, *synth.public_inputs, *limbs_to_ints(synth.aux)]
    for m, vec in ((r1cs.A, synth.a), (r1cs.B, synth.b), (r1cs.C, synth.c)):
        got = limbs_to_ints(vec[: spec.constraints])
        want = [sum(k * z[c] for c, k in m.row(j)) % R_ORDER for j in range(spec.constraints)]
        assert got == want


def test_knobs_shape_the_circuit() -> None:
    spec = CircuitSpec(log_constraints=12, public_inputs=4, b_density=0.25, bool_fraction=0.5)
    r1cs = r1cs_of(spec)
    lay = r1cs.layout
    assert r1cs.num_constraints == 4096 and r1cs.num_vars == lay.num_vars
    assert abs(r1cs.b_density - 0.25) < 0.01
    counts = r1cs.kind_counts()
    assert counts["input"] == 5 and counts["bit"] == lay.base_bits
    assert counts["mul"] == lay.mul_rows and counts["lin"] == lay.lin_rows
    # bellman's input rows: z_i * 0 = 0
    for j in np.flatnonzero(r1cs.kinds == INPUT):
        assert r1cs.B.row(j) == [] and r1cs.C.row(j) == [] and len(r1cs.A.row(j)) == 1
    # boolean constraints are v * (1 - v) = 0
    j = int(np.flatnonzero(r1cs.kinds == BIT)[0])
    v = r1cs.defined_var(j)
    assert r1cs.A.row(j) == [(v, 1)] and sorted(r1cs.B.row(j)) == [(0, 1), (v, -1)]
    # linear combinations have 2..4 terms, multiplications one each side
    lin_terms = {len(r1cs.A.row(int(j))) for j in np.flatnonzero(r1cs.kinds == LIN)[:200]}
    assert lin_terms <= {2, 3, 4} and len(lin_terms) > 1
    j = int(np.flatnonzero(r1cs.kinds == MUL)[0])
    assert len(r1cs.A.row(j)) == len(r1cs.B.row(j)) == len(r1cs.C.row(j)) == 1

    synth = synthesize(spec, 3)
    aux = limbs_to_ints(synth.aux)
    zero_one = sum(1 for v in aux if v in (0, 1))
    assert zero_one == lay.bits  # exactly the bit-valued variables
    assert abs(zero_one / len(aux) - 0.5) < 0.01


def test_density_extremes() -> None:
    dense = r1cs_of(CircuitSpec(log_constraints=10, b_density=0.9, bool_fraction=0.2))
    sparse = r1cs_of(CircuitSpec(log_constraints=10, b_density=0.05, bool_fraction=0.2))
    assert dense.b_density > 0.6 and sparse.b_density < 0.07


def test_witness_depends_on_partition_seed_circuit_on_spec_seed() -> None:
    spec = CircuitSpec(log_constraints=8)
    s1, s2, s1b = synthesize(spec, 1), synthesize(spec, 2), synthesize(spec, 1)
    assert np.array_equal(s1.a, s1b.a) and s1.public_inputs == s1b.public_inputs
    assert s1.public_inputs != s2.public_inputs and not np.array_equal(s1.aux, s2.aux)
    other = generate(CircuitSpec(log_constraints=8, seed=9))
    assert not np.array_equal(other.A.cols, r1cs_of(spec).A.cols)


def test_corrupted_witness_breaks_a_constraint() -> None:
    spec = CircuitSpec(log_constraints=8)
    bad = synthesize(spec, 1, corrupt=17)
    good = synthesize(spec, 1)
    assert unsatisfied_rows(bad)
    assert not np.array_equal(bad.aux, good.aux)


def test_signed_small_values_reduce_mod_r() -> None:
    vals = np.array([0, 1, -1, 2**40, -(2**40) - 7, 2**62], np.int64)
    assert limbs_to_ints(signed_to_fr_limbs(vals)) == [int(v) % R_ORDER for v in vals.tolist()]


def test_host_bytes_accounting() -> None:
    spec = CircuitSpec(log_constraints=6, public_inputs=2)
    synth = synthesize(spec, 0)
    assert synth.host_bytes() == {"abc": 3 * 64 * 32, "aux": synth.aux.shape[0] * 32}
    assert synth.assignment_limbs().shape == (r1cs_of(spec).num_vars, 8)


def test_synthesis_in_a_worker_process() -> None:
    """The runtime runs synthesis in a process pool: arguments and result pickle, and the
    worker (a fresh spawned interpreter) produces the same witness."""
    spec = CircuitSpec(log_constraints=8, public_inputs=2, seed=7)
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as ex:
        remote = ex.submit(synthesize, spec, 42).result()
    local = synthesize(spec, 42)
    assert remote.public_inputs == local.public_inputs
    for x, y in ((remote.a, local.a), (remote.b, local.b), (remote.c, local.c), (remote.aux, local.aux)):
        assert np.array_equal(x, y)


def test_large_circuits_stay_compact() -> None:
    """Matrices are numpy CSR, about 56 bytes per constraint: 2^24 fits in about 1 GB."""
    r1cs = generate(CircuitSpec(log_constraints=14))
    assert r1cs.nbytes() / r1cs.num_constraints < 64
