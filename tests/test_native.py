"""The compiled host stages (simgpu.prover.native) against Python integers: synthesis is bit
for bit the reference's (and the pre-numba code's), the field arithmetic is exact at its edges,
prep's split matches numpy's, and the compiled functions release the interpreter lock."""

from __future__ import annotations

import hashlib
import random

import numpy as np
import pytest

from simgpu.gpu.bls12_381 import R_ORDER
from simgpu.gpu.encoding import ints_to_limbs, limbs_to_ints
from simgpu.prover import native
from simgpu.prover.circuits import LIN, MUL, CircuitSpec, circuit_spec, r1cs_of
from simgpu.prover.prepared import QuerySplit
from simgpu.prover.synthesis import Synthesized, synthesize, synthesize_reference, unsatisfied_rows, witness

SPECS = [
    CircuitSpec(log_constraints=6, public_inputs=2, seed=1),
    CircuitSpec(log_constraints=9, public_inputs=4, b_density=0.6, bool_fraction=0.1, seed=2),
    CircuitSpec(constraints=700, public_inputs=0, b_density=1.0, bool_fraction=0.0, seed=3),
    CircuitSpec(log_constraints=10, public_inputs=3, b_density=0.05, bool_fraction=0.95, seed=4),
    circuit_spec("porep", 1 << 8, seed=5),
    circuit_spec("porep", 1 << 11, seed=6),
]


def digest(s: Synthesized) -> str:
    h = hashlib.sha256()
    for x in (s.aux, s.a, s.b, s.c):
        h.update(np.ascontiguousarray(x, dtype="<u4").tobytes())
    h.update(repr(s.public_inputs).encode())
    return h.hexdigest()


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.label())
def test_compiled_synthesis_is_the_reference_bit_for_bit(spec: CircuitSpec) -> None:
    for seed, corrupt in ((1, None), (2, None), (3, 11)):
        fast, ref = synthesize(spec, seed, corrupt), synthesize_reference(spec, seed, corrupt)
        assert digest(fast) == digest(ref)
        assert np.array_equal(witness(spec, seed, corrupt), fast.assignment_limbs())
        assert (len(unsatisfied_rows(fast)) > 0) == (corrupt is not None)


def test_synthesis_matches_the_pure_python_prover_it_replaced() -> None:
    """Digests of the Python-integer synthesis before the compiled one (commit e280527):
    the generic family's witnesses did not change."""
    spec = CircuitSpec(log_constraints=10, public_inputs=3, b_density=0.3, bool_fraction=0.4, seed=5)
    assert digest(synthesize(spec, 7)) == "2513a2ae46641f10599301d0cd38106cfe0364fb5301bc259ee9259e93aa66f0"
    odd = CircuitSpec(constraints=3000, public_inputs=1, seed=2)
    assert digest(synthesize(odd, 1, corrupt=17)) == (
        "222e6152d1535a9fa2c6e5987160fe337e29a1c76f7443beff79ab4e4910d5ff"
    )


EDGES = [0, 1, 2, R_ORDER - 1, R_ORDER - 2, (R_ORDER - 1) // 2, 1 << 128, (1 << 254) - 1, 0xFFFFFFFF]


def test_products_at_the_edges_of_the_field() -> None:
    """field_rows on a hand-made program of MUL rows: z[2 + j] = z[x_j] * z[y_j] mod r."""
    rnd = random.Random(1)
    values = EDGES + [rnd.randrange(R_ORDER) for _ in range(40)]
    pairs = [(x, y) for x in range(len(EDGES)) for y in range(len(EDGES))]
    pairs += [(rnd.randrange(len(values)), rnd.randrange(len(values))) for _ in range(200)]
    n0 = len(values)
    z = np.zeros((n0 + len(pairs), 8), np.uint32)
    z[:n0] = ints_to_limbs(values)
    rows = np.arange(len(pairs), dtype=np.int64)
    indptr = np.arange(len(pairs) + 1, dtype=np.int64)
    a_cols = np.array([x for x, _ in pairs], np.int32)
    b_cols = np.array([y for _, y in pairs], np.int32)
    kinds = np.full(len(pairs), MUL, np.uint8)
    empty = np.zeros((0, 8), np.uint32)
    ones = np.ones(len(pairs), np.int32)
    start, ops, coefs = native.field_program(rows, indptr, a_cols, ones, kinds, indptr, b_cols)
    wide = [x.view(np.uint64) for x in (z, empty, empty, empty)]
    native.field_rows(rows, n0, kinds, start, ops, coefs, *wide)
    got = limbs_to_ints(z[n0:])
    assert got == [values[x] * values[y] % R_ORDER for x, y in pairs]


def test_linear_combinations_at_the_edges() -> None:
    """evaluate_rows: sums of up to 40 terms with coefficients up to 2^31 - 1 of either
    sign, through the narrow and the wide reduction, against Python integers."""
    rnd = random.Random(2)
    values = EDGES + [rnd.randrange(R_ORDER) for _ in range(30)]
    z = ints_to_limbs(values)
    rows: list[list[tuple[int, int]]] = [[], [(0, 5)], [(3, -1)], [(3, 1), (1, 1)]]
    for _ in range(300):
        big = rnd.random() < 0.5
        terms = rnd.randrange(1, 40 if big else 5)
        cmax = (1 << 31) - 1 if big else 1 << 16
        rows.append([(rnd.randrange(len(values)), rnd.randrange(-cmax, cmax + 1)) for _ in range(terms)])
    indptr = np.cumsum([0] + [len(r) for r in rows]).astype(np.int64)
    cols = np.array([c for r in rows for c, _ in r], np.int32)
    coefs = np.array([k for r in rows for _, k in r], np.int32)
    out = np.zeros((len(rows), 8), np.uint32)
    native.evaluate_rows(indptr, cols, coefs, z.view(np.uint64), out.view(np.uint64))
    assert limbs_to_ints(out) == [sum(k * values[c] for c, k in r) % R_ORDER for r in rows]


def test_split_query_matches_numpy() -> None:
    spec = circuit_spec("porep", 1 << 10, seed=1)
    r1cs = r1cs_of(spec)
    synth = synthesize(spec, 3)
    z = synth.assignment_limbs()
    inputs, aux = z[: r1cs.num_inputs], synth.aux
    for name, index in (("l", None), ("a", r1cs.density("A")), ("b", r1cs.density("B")), ("e", np.zeros(0))):
        got = QuerySplit.query(name, inputs, aux, index)
        want = QuerySplit.of(name, aux if index is None else z[np.asarray(index, dtype=np.int64)])
        assert got.length == want.length
        for x, y in ((got.ones, want.ones), (got.tails, want.tails), (got.tail_scalars, want.tail_scalars)):
            assert np.array_equal(x, y)


def test_every_compiled_function_releases_the_interpreter_lock() -> None:
    """nogil on every kernel and helper: a driver thread in prep never stalls the threads
    launching kernels (benchmarks/bench_prover.py measures the lock's holding time)."""
    compiled = [f for f in vars(native).values() if isinstance(f, native.numba.core.dispatcher.Dispatcher)]
    names = {f.__name__ for f in compiled}
    assert {"field_rows", "bit_rows", "evaluate_rows", "split_query", "_mont"} <= names
    assert all(f.targetoptions.get("nogil") for f in compiled)


def test_cache_fallback_compiles_without_a_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where numba finds no writable cache location (cache=True raises RuntimeError at
    decoration), _jit compiles without caching instead of failing the import."""
    calls: list[dict] = []
    real = native.numba.njit

    def njit(**kw):
        calls.append(kw)
        if kw.get("cache"):
            raise RuntimeError("cannot cache function: no locator available")
        return real(**kw)

    monkeypatch.setattr(native.numba, "njit", njit)
    double = native._jit(lambda x: 2 * x)
    assert double(21) == 42
    assert [c.get("cache", False) for c in calls] == [True, False]
    assert all(c["nogil"] for c in calls)


def test_porep_shape() -> None:
    """The porep preset's witness: 99% of aux values in {0, 1}, B density 0.25, nearly
    every variable in A (PoRep: 99.7%)."""
    spec = circuit_spec("porep", 1 << 14, seed=3)
    r1cs = r1cs_of(spec)
    aux = synthesize(spec, 1).aux
    boolean = ~aux[:, 1:].any(axis=1) & (aux[:, 0] <= 1)
    assert abs(boolean.mean() - 0.99) < 0.005
    assert abs(r1cs.b_density - 0.25) < 0.005
    assert len(r1cs.density("A")) / r1cs.num_vars > 0.98
    assert spec.public_inputs == 64 and circuit_spec("porep", 1 << 17).public_inputs == 328
    counts = r1cs.kind_counts()
    assert counts["mul"] > 0 and counts["lin"] > 0 and LIN != MUL
