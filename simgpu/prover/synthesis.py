"""Witness synthesis: the assignment of one partition and its a, b, c evaluation vectors.

`synthesize(spec, partition_seed)` is the prover's `synthesis` stage.  It is a module-level
function of picklable arguments returning a picklable `Synthesized`, so a runtime runs it
in a worker process (`ProcessPoolExecutor.submit(synthesize, spec, seed)`), as witness
generation runs on its own cores in real provers.  Its loops are compiled
(`simgpu.prover.native`: on the order of 100 ns a constraint, where Python integers took
1.5-4 us); only the random draws and the allocations are numpy.  `synthesize_reference` is
the same stage in Python integers, kept as the specification the compiled path must match
bit for bit (tests compare them).

Output layout (what prestage uploads): a, b, c are numpy uint32 (N, 8) arrays of Fr
elements in standard form, N the NTT domain, row j holding <A_j, z>, <B_j, z>, <C_j, z>
and rows past the last constraint zero.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simgpu.gpu.bls12_381 import R_ORDER
from simgpu.gpu.encoding import FR_WORDS, ints_to_limbs, limbs_to_ints, random_fr
from simgpu.prover import native
from simgpu.prover.circuits import (
    AND,
    BIT,
    LIN,
    MUL,
    R1CS,
    XOR,
    CircuitSpec,
    SparseMatrix,
    layout_of,
    r1cs_of,
)

#: Witness values below this are "small": their linear combinations are summed in int64.
SMALL = 1 << 20

_R_LIMBS = np.array([(R_ORDER >> (32 * i)) & 0xFFFFFFFF for i in range(FR_WORDS)], np.int64)


@dataclass
class Synthesized:
    """One partition's witness and evaluation vectors, on the host.

    public_inputs: the l public inputs (ONE excluded), Python ints in Fr.
    aux: the auxiliary (private) assignment, uint32 (num_aux, 8) standard form.
    a, b, c: uint32 (N, 8) standard form, zero-padded to the domain.
    abc_pin: where a, b and c are page-locked where they lie (a handed-off result the
    driver pinned as it received it: simgpu.prover.handoff), the lock's handle; whoever
    drops a, b and c last lets it go with them.
    """

    spec: CircuitSpec
    partition_seed: int
    public_inputs: list[int]
    aux: np.ndarray
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    abc_pin: Any = field(default=None, compare=False, repr=False)

    @property
    def domain_size(self) -> int:
        return self.a.shape[0]

    def input_assignment(self) -> list[int]:
        """ONE followed by the public inputs (bellman's input assignment)."""
        return [1, *self.public_inputs]

    def assignment_limbs(self) -> np.ndarray:
        """The full assignment z = (ONE, inputs, aux) as uint32 (num_vars, 8)."""
        return np.concatenate([ints_to_limbs(self.input_assignment()), self.aux])

    def host_bytes(self) -> dict[str, int]:
        """Host memory held by this result: the a, b, c vectors and the aux witness."""
        return {"abc": self.a.nbytes + self.b.nbytes + self.c.nbytes, "aux": self.aux.nbytes}


def signed_to_fr_limbs(s: np.ndarray) -> np.ndarray:
    """int64 values (|s| < 2^63) -> their residues mod r as uint32 (k, 8) standard form."""
    s = np.asarray(s, dtype=np.int64)
    mag = np.abs(s).astype(np.uint64)
    x = np.zeros((len(s), FR_WORDS), np.int64)
    x[:, 0] = (mag & np.uint64(0xFFFFFFFF)).astype(np.int64)
    x[:, 1] = (mag >> np.uint64(32)).astype(np.int64)
    neg = s < 0
    if neg.any():
        # r - |s|, limb by limb with borrow (|s| < 2^63 < r, so no underflow overall).
        y = x[neg]
        borrow = np.zeros(len(y), np.int64)
        for i in range(FR_WORDS):
            d = _R_LIMBS[i] - y[:, i] - borrow
            borrow = (d < 0).astype(np.int64)
            y[:, i] = d + (borrow << 32)
        x[neg] = y
    return x.astype(np.uint32)


@dataclass
class _Assignment:
    """z in the three forms evaluate_lc reads: limbs, Python ints, and int64 where small."""

    limbs: np.ndarray
    ints: list[int]
    small: np.ndarray  # bool (num_vars,)
    small_values: np.ndarray  # int64 (num_vars,), 0 where not small

    @classmethod
    def of(cls, z_ints: list[int], z_limbs: np.ndarray) -> _Assignment:
        small = np.all(z_limbs[:, 1:] == 0, axis=1) & (z_limbs[:, 0] < SMALL)
        return cls(z_limbs, z_ints, small, np.where(small, z_limbs[:, 0].astype(np.int64), 0))


def evaluate_lc(m: SparseMatrix, z: _Assignment, out: np.ndarray) -> None:
    """out[j] = <M_j, z> mod r for every row j of M (out has at least M.rows rows).

    Three paths, fastest first: a single entry with coefficient 1 is a gather of limbs;
    rows whose variables are all small (bits, ONE) sum in int64; the rest (LIN rows over
    field values) in Python integers."""
    n = m.rows
    counts = np.diff(m.indptr)
    starts = m.indptr[:-1]
    nonempty = counts > 0
    first_coef = np.zeros(n, np.int64)
    first_coef[nonempty] = m.coefs[starts[nonempty]]
    single = (counts == 1) & (first_coef == 1)
    entry_row = m.row_of_entry()
    has_big = np.zeros(n, bool)
    has_big[entry_row[~z.small[m.cols]]] = True

    out[:n] = 0
    rows = np.flatnonzero(single)
    out[rows] = z.limbs[m.cols[starts[rows]]]

    vec = nonempty & ~single & ~has_big
    if vec.any():
        prod = m.coefs.astype(np.int64) * z.small_values[m.cols]
        sums = np.zeros(n, np.int64)
        sums[nonempty] = np.add.reduceat(prod, starts[nonempty])
        out[np.flatnonzero(vec)] = signed_to_fr_limbs(sums[vec])

    slow_mask = nonempty & ~single & has_big
    slow = np.flatnonzero(slow_mask)
    if len(slow):
        ent = np.flatnonzero(slow_mask[entry_row])  # the entries of the slow rows, in order
        cols, coefs = m.cols[ent].tolist(), m.coefs[ent].tolist()
        zi, vals, e = z.ints, [], 0
        for cnt in counts[slow].tolist():
            acc = 0
            for _ in range(cnt):
                acc += coefs[e] * zi[cols[e]]
                e += 1
            vals.append(acc % R_ORDER)
        out[slow] = ints_to_limbs(vals)


def _witness_rng(spec: CircuitSpec, partition_seed: int) -> np.random.Generator:
    return np.random.default_rng([spec.seed, partition_seed, 0x57495453])


def _first_cols(r1cs: R1CS) -> tuple[np.ndarray, np.ndarray]:
    """The first variable of each row's A and of its B combination (a row's operands)."""
    a_first = r1cs.A.cols[r1cs.A.indptr[:-1].clip(max=r1cs.A.nnz - 1)]
    b_first = r1cs.B.cols[r1cs.B.indptr[:-1].clip(max=r1cs.B.nnz - 1)]
    return a_first, b_first


def _draw_bits(r1cs: R1CS, rng: np.random.Generator, first_defined: int) -> np.ndarray:
    """Every bit's value (int64, one per variable, 0 elsewhere): BITs are coin flips (drawn
    at once, in row order), AND/XOR combine two earlier bits.  In the generic family the
    operands are BITs, so one vectorised pass per kind suffices (the code synthesis had
    before the compiled path); porep's chains read derived bits, so it goes row by row."""
    lay = r1cs.layout
    kinds = r1cs.kinds[: lay.defined_rows]
    a_first, b_first = _first_cols(r1cs)
    bits = np.zeros(lay.num_vars, np.int64)
    rows = np.flatnonzero(kinds == BIT)
    bits[first_defined + rows] = rng.integers(0, 2, size=len(rows))
    if r1cs.spec.family == "generic":
        for kind, op in ((AND, np.bitwise_and), (XOR, np.bitwise_xor)):
            rows = np.flatnonzero(kinds == kind)
            bits[first_defined + rows] = op(bits[a_first[rows]], bits[b_first[rows]])
        return bits
    values = bits.tolist()
    for row in np.flatnonzero((kinds == AND) | (kinds == XOR)).tolist():
        x, y = values[a_first[row]], values[b_first[row]]
        values[first_defined + row] = x & y if kinds[row] == AND else x ^ y
    return np.array(values, dtype=np.int64)


def _witness_reference(spec: CircuitSpec, partition_seed: int, corrupt: int | None) -> tuple[list[int], int]:
    """The full assignment z as Python ints, and the number of inputs (ONE included)."""
    r1cs = r1cs_of(spec)
    lay = r1cs.layout
    rng = _witness_rng(spec, partition_seed)
    n_in, first_defined = lay.num_inputs, lay.num_inputs + lay.free_vars
    z: list[int] = [0] * lay.num_vars
    z[0] = 1
    # Public inputs and free aux values (e.g. sector data): uniform in Fr.
    z[1:first_defined] = limbs_to_ints(random_fr(first_defined - 1, rng))
    kinds = r1cs.kinds[: lay.defined_rows]
    bits = _draw_bits(r1cs, rng, first_defined)
    bit_vars = first_defined + np.flatnonzero(kinds <= XOR)
    for v, b in zip(bit_vars.tolist(), bits[bit_vars].tolist(), strict=True):
        z[v] = b
    a_first, b_first = _first_cols(r1cs)

    # Field rows, in order: the straight-line program of MULs and LINs.
    r = R_ORDER
    field_rows = np.flatnonzero(kinds >= MUL)
    is_lin = (kinds[field_rows] == LIN).tolist()
    x_op, y_op = a_first[field_rows].tolist(), b_first[field_rows].tolist()
    indptr, cols, coefs = r1cs.A.indptr.tolist(), r1cs.A.cols.tolist(), r1cs.A.coefs.tolist()
    for t, row in enumerate(field_rows.tolist()):
        if is_lin[t]:
            acc = 0
            for e in range(indptr[row], indptr[row + 1]):
                acc += coefs[e] * z[cols[e]]
            z[first_defined + row] = acc % r
        else:
            z[first_defined + row] = z[x_op[t]] * z[y_op[t]] % r

    if corrupt is not None:
        # A bad witness: one aux value off by one after the fact, so its defining row (and
        # any row reading it) is violated while a, b, c stay consistent with z.
        v = n_in + corrupt % lay.num_aux
        z[v] = (z[v] + 1) % r
    return z, n_in


def _assign(spec: CircuitSpec, partition_seed: int, abc: list[np.ndarray] | None) -> np.ndarray:
    """The assignment z (uint32 (num_vars, 8)); with abc (zeroed (N, 8) arrays), also every
    row's a, b, c, found from the values each row's kind combines as the witness computes
    them, so that no row's variables are read from z a second time."""
    r1cs = r1cs_of(spec)
    lay = r1cs.layout
    rng = _witness_rng(spec, partition_seed)
    first_defined = lay.num_inputs + lay.free_vars
    kinds = r1cs.kinds[: lay.defined_rows]
    A, B = r1cs.A, r1cs.B
    z = np.zeros((lay.num_vars, FR_WORDS), np.uint32)
    z[0, 0] = 1
    # Public inputs and free aux values (e.g. sector data): uniform in Fr.
    z[1:first_defined] = random_fr(first_defined - 1, rng)
    if abc is None:
        abc = [np.zeros((0, FR_WORDS), np.uint32)] * 3  # the kernels write no a, b, c
    else:
        # input rows z_i * 0 = 0: a holds z_i, for ONE and each public input
        abc[0][lay.defined_rows : lay.defined_rows + lay.num_inputs] = z[: lay.num_inputs]
    flips = rng.integers(0, 2, size=int(np.count_nonzero(kinds == BIT)))  # as _draw_bits draws them
    native.bit_rows(kinds, first_defined, A.indptr, A.cols, B.indptr, B.cols, flips, z, *abc)
    rows, start, ops, coefs = _field_program(spec)
    wide = [x.view(np.uint64) for x in (z, *abc)]  # the same bytes as 4 limbs of 64 bits
    native.field_rows(rows, first_defined, kinds, start, ops, coefs, *wide)
    return z


@functools.lru_cache(maxsize=2)
def _field_program(spec: CircuitSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The field rows of spec's circuit and their flat operand list (native.field_program):
    made once per worker and circuit, as the circuit is."""
    r1cs = r1cs_of(spec)
    kinds = r1cs.kinds[: r1cs.layout.defined_rows]
    rows = np.flatnonzero(kinds >= MUL)
    A, B = r1cs.A, r1cs.B
    start, ops, coefs = native.field_program(rows, A.indptr, A.cols, A.coefs, kinds, B.indptr, B.cols)
    return rows, start, ops, coefs


def _corrupt(z: np.ndarray, var: int) -> None:
    """A bad witness: z[var] off by one after the fact, so its defining row (and any row
    reading it) is violated while a, b, c stay consistent with z."""
    z[var] = ints_to_limbs([(limbs_to_ints(z[var : var + 1])[0] + 1) % R_ORDER])[0]


def witness(spec: CircuitSpec, partition_seed: int, corrupt: int | None = None) -> np.ndarray:
    """The full assignment z = (ONE, inputs, aux) as uint32 (num_vars, 8), standard form.

    The same random draws, in the same order, as `_witness_reference`, so both give the
    same z for the same seed."""
    lay = layout_of(spec)
    z = _assign(spec, partition_seed, None)
    if corrupt is not None:
        _corrupt(z, lay.num_inputs + corrupt % lay.num_aux)
    return z


def synthesize(spec: CircuitSpec, partition_seed: int, corrupt: int | None = None) -> Synthesized:
    """The `synthesis` stage: witness and a, b, c for partition `partition_seed` of `spec`.

    corrupt: for tests, the aux position whose value is made wrong (the proof of such a
    witness must not verify); a, b, c are then evaluated from the corrupted z, row by row
    through the matrices, as `synthesize_reference` does."""
    r1cs = r1cs_of(spec)
    lay = r1cs.layout
    abc = [np.zeros((spec.domain_size, FR_WORDS), np.uint32) for _ in range(3)]  # rows past n stay 0
    if corrupt is None:
        z = _assign(spec, partition_seed, abc)
    else:
        z = witness(spec, partition_seed, corrupt)
        for m, out in zip((r1cs.A, r1cs.B, r1cs.C), abc, strict=True):
            native.evaluate_rows(m.indptr, m.cols, m.coefs, z.view(np.uint64), out.view(np.uint64))
    n_in = lay.num_inputs
    return Synthesized(
        spec=spec,
        partition_seed=partition_seed,
        public_inputs=limbs_to_ints(z[1:n_in]),
        aux=z[n_in:],
        a=abc[0],
        b=abc[1],
        c=abc[2],
    )


def synthesize_reference(spec: CircuitSpec, partition_seed: int, corrupt: int | None = None) -> Synthesized:
    """`synthesize` in Python integers (the specification; microseconds a constraint)."""
    r1cs = r1cs_of(spec)
    z, n_in = _witness_reference(spec, partition_seed, corrupt)
    z_limbs = ints_to_limbs(z)
    assignment = _Assignment.of(z, z_limbs)
    n_dom = spec.domain_size
    abc = []
    for m in (r1cs.A, r1cs.B, r1cs.C):
        out = np.zeros((n_dom, FR_WORDS), np.uint32)
        evaluate_lc(m, assignment, out)
        abc.append(out)
    return Synthesized(
        spec=spec,
        partition_seed=partition_seed,
        public_inputs=z[1:n_in],
        aux=np.ascontiguousarray(z_limbs[n_in:]),
        a=abc[0],
        b=abc[1],
        c=abc[2],
    )


def unsatisfied_rows(synth: Synthesized) -> list[int]:
    """Rows j with a_j * b_j != c_j (Python ints; for tests on small circuits)."""
    n = synth.spec.constraints
    a, b, c = (limbs_to_ints(x[:n]) for x in (synth.a, synth.b, synth.c))
    return [j for j in range(n) if a[j] * b[j] % R_ORDER != c[j]]


def warm_worker(spec: CircuitSpec) -> int:
    """Run in a pool worker before a run: build spec's circuit and field program (cached
    per process) and compile the native kernels, so that no partition of the run pays for
    them; returns the worker's pid.  The result is not sent back (no transfer to time)."""
    synthesize(spec, 0)
    return os.getpid()
