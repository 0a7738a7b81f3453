"""Synthetic R1CS circuits shaped like real Groth16 circuits (Filecoin PoRep and the like).

A `CircuitSpec` names a *family* of circuits: size, number of public inputs, how dense the
B query is, how many witness scalars are 0/1, and a seed.  The R1CS matrices follow
procedurally from it (`r1cs_of`, cached per process), as numpy CSR arrays: never one
Python object per entry, so 2^24 constraints fit in about 1 GB.

Variables are numbered like bellman's: 0 is the constant ONE, 1..l are the public inputs,
then the auxiliary (private) witness.  Constraint rows, each `<A_j,z> * <B_j,z> = <C_j,z>`:

==========  ==============================  ==================================
kind        constraint                      what it stands for
==========  ==============================  ==================================
BIT         v * (1 - v) = 0                 an allocated boolean (bit decomposition)
AND         x * y = v          (x, y bits)  a derived bit
XOR         (2x) * y = x + y - v            a derived bit (SHA-style gadgets)
MUL         x * y = v                       a field multiplication
LIN         (c1 x1 + ... + c4 x4) * 1 = v   a linear combination with a few terms
INPUT       z_i * 0 = 0                     one per input (bellman's input constraints,
                                            which make the IC points independent)
==========  ==============================  ==================================

Every aux variable except a few free ones ("private inputs" such as sector data) is the
output of exactly one row, in order, so witness synthesis is a straight-line program.
The knobs act structurally:

* ``bool_fraction``: the share of aux scalars that are 0 or 1 (BIT, AND and XOR outputs).
  The MSMs of the prover skip zeros and batch-add ones, so this sets how much MSM work a
  partition really has.
* ``b_density``: the share of variables that occur in some B combination, i.e. the length
  of the B query (PoRep: 33M of 130M variables).  ONE, the BIT variables and the field
  values used as right operands of MULs are the only variables in B; the generator
  picks as many of those as the density asks for.

``constraints`` counts every row, the input rows included, so a circuit with 2^k
constraints has an NTT domain of exactly 2^k.

Two families (``family``), with the same row kinds:

* ``generic``: AND/XOR operands are uniform earlier BITs; the B query holds about as many
  field variables as BITs.
* ``porep``: shaped like Filecoin's PoRep partition circuit (docs/circuits.md): SHA-style
  chains, each AND/XOR reading the previous derived bit as its A operand (so nearly every
  variable is in the A query) and an earlier BIT as its B operand; the B query is filled
  with BITs up to its density, field variables only as MUL operands.  `circuit_spec("porep",
  n)` gives its preset (bool_fraction 0.99, b_density 0.25, 328 public inputs).
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field

import numpy as np

from simgpu.errors import UserError

MIN_CONSTRAINTS = 16
MAX_CONSTRAINTS = 1 << 27

# Row kinds (uint8 codes in R1CS.kinds).
BIT, AND, XOR, MUL, LIN, INPUT = 0, 1, 2, 3, 4, 5
KIND_NAMES = {BIT: "bit", AND: "and", XOR: "xor", MUL: "mul", LIN: "lin", INPUT: "input"}

#: Share of field rows that are multiplications (the rest are linear combinations), before
#: the B density asks for more MULs.
MUL_SHARE = 0.5
#: One free field variable ("private input") per this many defined rows.
FREE_EVERY = 256
#: Largest magnitude of a LIN coefficient (small signed integers, like packing weights).
LIN_COEF_MAX = 1 << 16
#: Circuit families (see the module docstring); the first is CircuitSpec's default.
FAMILIES = ("generic", "porep")
#: Filecoin PoRep (32 GiB) partition: public inputs, and the share of witness values in
#: {0, 1} and of variables in the B query that the porep preset takes (docs/circuits.md).
POREP_PUBLIC_INPUTS = 328
POREP_BOOL_FRACTION = 0.99
POREP_B_DENSITY = 0.25


@dataclass(frozen=True)
class CircuitSpec:
    """A family of synthetic R1CS circuits.  Give `constraints` or `log_constraints`.

    constraints: total R1CS rows (input rows included); the NTT domain is the next power
    of two.  public_inputs: number of public inputs (ONE not counted).  b_density: target
    share of variables in the B query.  bool_fraction: target share of aux scalars in
    {0, 1}.  seed: picks the circuit (the witness has its own partition seed).  family:
    how rows pick their operands, one of FAMILIES.
    """

    log_constraints: int | None = None
    constraints: int | None = None
    public_inputs: int = 2
    b_density: float = 0.25
    bool_fraction: float = 0.5
    seed: int = 0
    family: str = FAMILIES[0]

    def __post_init__(self) -> None:
        n, log_n = self.constraints, self.log_constraints
        if n is None and log_n is None:
            raise UserError("CircuitSpec needs constraints or log_constraints")
        if n is None:
            n = 1 << int(log_n)
        n = int(n)
        if log_n is not None and n != 1 << int(log_n):
            raise UserError(f"constraints={n} disagrees with log_constraints={log_n}")
        if not MIN_CONSTRAINTS <= n <= MAX_CONSTRAINTS:
            raise UserError(f"constraints must be in [2^4, 2^27], got {n}")
        # Normalise so that equal circuits compare (and hash, and cache) equal.
        object.__setattr__(self, "constraints", n)
        object.__setattr__(self, "log_constraints", n.bit_length() - 1 if n & (n - 1) == 0 else None)
        if not 0 <= self.public_inputs <= n // 4:
            raise UserError(f"public_inputs must be in [0, constraints/4], got {self.public_inputs}")
        if not 0.0 < self.b_density <= 1.0:
            raise UserError(f"b_density must be in (0, 1], got {self.b_density}")
        if not 0.0 <= self.bool_fraction <= 0.99:
            raise UserError(f"bool_fraction must be in [0, 0.99], got {self.bool_fraction}")
        if self.family not in FAMILIES:
            raise UserError(f"unknown circuit family {self.family!r} (one of {', '.join(FAMILIES)})")

    @property
    def domain_size(self) -> int:
        """N, the NTT domain: the smallest power of two >= constraints."""
        return 1 << (self.constraints - 1).bit_length()

    @property
    def log_domain(self) -> int:
        return self.domain_size.bit_length() - 1

    def to_dict(self) -> dict:
        d = asdict(self)
        if self.family == FAMILIES[0]:
            del d["family"]  # so that generic specs keep the key ids they always had
        return d

    @classmethod
    def from_dict(cls, d: dict) -> CircuitSpec:
        return cls(
            constraints=int(d["constraints"]),
            public_inputs=int(d["public_inputs"]),
            b_density=float(d["b_density"]),
            bool_fraction=float(d["bool_fraction"]),
            seed=int(d["seed"]),
            family=str(d.get("family", FAMILIES[0])),
        )

    def label(self) -> str:
        size = f"2^{self.log_constraints}" if self.log_constraints is not None else str(self.constraints)
        family = "" if self.family == FAMILIES[0] else f"{self.family} family, "
        return (
            f"{size} constraints, {family}{self.public_inputs} inputs, b_density {self.b_density}, "
            f"bool_fraction {self.bool_fraction}, seed {self.seed}"
        )


def circuit_spec(circuit: str, constraints: int, seed: int = 0) -> CircuitSpec:
    """The spec a named circuit has at a size: "generic" (CircuitSpec's defaults) or
    "porep" (PoRep's shape: POREP_* above; the public inputs capped at constraints / 256,
    so that small sizes still have room for their 1% of field rows)."""
    if circuit == "generic":
        return CircuitSpec(constraints=constraints, seed=seed)
    if circuit == "porep":
        return CircuitSpec(
            constraints=constraints,
            public_inputs=min(POREP_PUBLIC_INPUTS, max(1, constraints // 256)),
            b_density=POREP_B_DENSITY,
            bool_fraction=POREP_BOOL_FRACTION,
            seed=seed,
            family="porep",
        )
    raise UserError(f"unknown circuit {circuit!r} (one of {', '.join(FAMILIES)})")


@dataclass(frozen=True)
class Layout:
    """How many rows of each kind a spec gets: the single source of the generator's counts
    (the memory plan's estimates use it too)."""

    constraints: int
    public_inputs: int
    defined_rows: int  # rows that define one aux variable each
    free_vars: int  # aux variables with no defining row
    bits: int
    base_bits: int  # BIT rows (in B)
    derived_bits: int  # AND + XOR rows (not in B)
    field_rows: int
    mul_rows: int
    lin_rows: int
    b_field_vars: int  # field variables used as B operands of MULs

    @property
    def num_inputs(self) -> int:
        """Input variables, ONE included (bellman's convention)."""
        return 1 + self.public_inputs

    @property
    def num_aux(self) -> int:
        return self.free_vars + self.defined_rows

    @property
    def num_vars(self) -> int:
        return self.num_inputs + self.num_aux


def layout_of(spec: CircuitSpec) -> Layout:
    """Row-kind counts for `spec`; raises UserError if the spec cannot be laid out."""
    n, ell = spec.constraints, spec.public_inputs
    defined = n - 1 - ell
    free = max(1, defined // FREE_EVERY)
    num_aux = free + defined
    num_vars = 1 + ell + num_aux
    # Each input and free variable is consumed by one of the first field rows, and at
    # least one more field row exists, so the field rows are bounded below.
    min_field = ell + free + 1
    if defined < min_field:
        raise UserError(f"{spec.label()}: too small for {ell} public inputs")
    bits = min(round(spec.bool_fraction * num_aux), defined - min_field)
    field_rows = defined - bits
    target_b = max(1, round(spec.b_density * num_vars))
    if spec.family == "porep":
        # B: the right operands of about half the MULs, then BITs up to the density
        b_field = min(field_rows, max(1, round(MUL_SHARE * field_rows / 2)))
        base = max(1, min(bits, target_b - 1 - b_field)) if bits > 0 else 0
    else:
        base = max(1, min(bits, (target_b - 1) // 2)) if bits > 0 else 0
        b_field = min(field_rows, max(1, target_b - 1 - base))
    derived = bits - base
    mul = min(field_rows, max(b_field, round(MUL_SHARE * field_rows)))
    lin = field_rows - mul
    return Layout(
        constraints=n,
        public_inputs=ell,
        defined_rows=defined,
        free_vars=free,
        bits=bits,
        base_bits=base,
        derived_bits=derived,
        field_rows=field_rows,
        mul_rows=mul,
        lin_rows=lin,
        b_field_vars=b_field,
    )


@dataclass
class SparseMatrix:
    """One R1CS matrix in CSR form: row j's entries are cols/coefs[indptr[j]:indptr[j+1]].
    Coefficients are small signed integers (an entry -1 means r - 1 in Fr)."""

    indptr: np.ndarray  # int64 (rows + 1,)
    cols: np.ndarray  # int32 (nnz,)
    coefs: np.ndarray  # int32 (nnz,)

    @property
    def rows(self) -> int:
        return len(self.indptr) - 1

    @property
    def nnz(self) -> int:
        return len(self.cols)

    def row_of_entry(self) -> np.ndarray:
        return np.repeat(np.arange(self.rows, dtype=np.int64), np.diff(self.indptr))

    def row(self, j: int) -> list[tuple[int, int]]:
        s, e = int(self.indptr[j]), int(self.indptr[j + 1])
        return list(zip(self.cols[s:e].tolist(), self.coefs[s:e].tolist(), strict=True))

    def nbytes(self) -> int:
        return self.indptr.nbytes + self.cols.nbytes + self.coefs.nbytes

    @classmethod
    def from_coo(cls, rows: int, r: np.ndarray, c: np.ndarray, k: np.ndarray) -> SparseMatrix:
        order = np.argsort(r, kind="stable")
        counts = np.bincount(r, minlength=rows)
        indptr = np.zeros(rows + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        return cls(indptr, c[order].astype(np.int32), k[order].astype(np.int32))


@dataclass
class R1CS:
    """The constraint system of one circuit of a family, plus the row kinds that make
    witness synthesis a straight-line program."""

    spec: CircuitSpec
    layout: Layout
    kinds: np.ndarray  # uint8 (constraints,)
    A: SparseMatrix
    B: SparseMatrix
    C: SparseMatrix
    _density: dict = field(default_factory=dict, repr=False)

    @property
    def num_constraints(self) -> int:
        return self.spec.constraints

    @property
    def domain_size(self) -> int:
        return self.spec.domain_size

    @property
    def num_inputs(self) -> int:
        return self.layout.num_inputs

    @property
    def num_aux(self) -> int:
        return self.layout.num_aux

    @property
    def num_vars(self) -> int:
        return self.layout.num_vars

    def first_aux_var(self) -> int:
        return self.layout.num_inputs

    def defined_var(self, row: np.ndarray | int) -> np.ndarray | int:
        """The variable that definitional row `row` defines."""
        return self.layout.num_inputs + self.layout.free_vars + row

    def density(self, which: str) -> np.ndarray:
        """Sorted indices of the variables occurring in matrix `which` ("A" or "B"): the
        variables with an entry in that query of the proving key."""
        if which not in self._density:
            m = {"A": self.A, "B": self.B}[which]
            used = np.zeros(self.num_vars, dtype=bool)
            used[m.cols] = True
            self._density[which] = np.flatnonzero(used).astype(np.uint32)
        return self._density[which]

    @property
    def b_density(self) -> float:
        return len(self.density("B")) / self.num_vars

    def nbytes(self) -> int:
        return self.kinds.nbytes + self.A.nbytes() + self.B.nbytes() + self.C.nbytes()

    def kind_counts(self) -> dict[str, int]:
        counts = np.bincount(self.kinds, minlength=len(KIND_NAMES))
        return {KIND_NAMES[k]: int(counts[k]) for k in KIND_NAMES}


def _uniform_below(rng: np.random.Generator, counts: np.ndarray) -> np.ndarray:
    """A uniform integer in [0, counts[i]) for each i (counts >= 1)."""
    return np.minimum((rng.random(len(counts)) * counts).astype(np.int64), counts - 1)


def _pick_in_sorted(
    rng: np.random.Generator, pool: np.ndarray, lo_var: np.ndarray, hi_var: np.ndarray
) -> np.ndarray:
    """For each i, a uniform element of sorted `pool` in [lo_var[i], hi_var[i])."""
    lo = np.searchsorted(pool, lo_var, side="left")
    hi = np.searchsorted(pool, hi_var, side="left")
    if np.any(hi <= lo):
        raise AssertionError("generator bug: empty operand range")
    return pool[lo + _uniform_below(rng, hi - lo)]


def generate(spec: CircuitSpec) -> R1CS:
    """Build the R1CS of `spec` (numpy only; about 2 s per 2^22 rows)."""
    lay = layout_of(spec)
    rng = np.random.default_rng([spec.seed, 0x52314353])
    n, ell, n_in = spec.constraints, spec.public_inputs, lay.num_inputs
    R = lay.defined_rows
    first_defined = n_in + lay.free_vars  # variable defined by row 0

    # Kinds of the definitional rows, in a random order.
    n_and = lay.derived_bits // 2
    kinds = np.concatenate(
        [
            np.full(lay.base_bits, BIT, np.uint8),
            np.full(n_and, AND, np.uint8),
            np.full(lay.derived_bits - n_and, XOR, np.uint8),
            np.full(lay.mul_rows, MUL, np.uint8),
            np.full(lay.lin_rows, LIN, np.uint8),
        ]
    )
    kinds = kinds[rng.permutation(R)]
    # A derived bit needs an earlier BIT: make the first bit row a BIT.
    bit_rows = np.flatnonzero(kinds <= XOR)
    if len(bit_rows) and kinds[bit_rows[0]] != BIT:
        first_base = bit_rows[np.flatnonzero(kinds[bit_rows] == BIT)[0]]
        kinds[first_base], kinds[bit_rows[0]] = kinds[bit_rows[0]], BIT
    rows = np.arange(R, dtype=np.int64)
    var = first_defined + rows  # the variable each row defines

    coo: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {"A": [], "B": [], "C": []}

    def put(m: str, r: np.ndarray, c: np.ndarray, k: np.ndarray | int) -> None:
        r = np.asarray(r, dtype=np.int64)
        coo[m].append(
            (
                r,
                np.asarray(c, dtype=np.int64),
                np.broadcast_to(np.int64(k), r.shape) if np.isscalar(k) else np.asarray(k, dtype=np.int64),
            )
        )

    # --- bits ------------------------------------------------------------------------
    r_bit = rows[kinds == BIT]
    v_bit = var[r_bit]  # sorted
    put("A", r_bit, v_bit, 1)
    put("B", r_bit, np.zeros_like(r_bit), 1)
    put("B", r_bit, v_bit, -1)
    if spec.family == "porep":
        # SHA-style chains: a derived bit's A operand is the previous derived bit (the
        # first one's, the first BIT), so every derived bit but the last is in A.
        r_der = rows[(kinds == AND) | (kinds == XOR)]
        x_der = np.concatenate([v_bit[:1], var[r_der[:-1]]]) if len(r_der) else r_der
    for kind in (AND, XOR):
        r = rows[kinds == kind]
        if not len(r):
            continue
        before = np.searchsorted(v_bit, var[r], side="left")  # >= 1: first bit is a BIT
        if spec.family == "porep":
            x = x_der[np.searchsorted(r_der, r)]
        else:
            x = v_bit[_uniform_below(rng, before)]
        y = v_bit[_uniform_below(rng, before)]
        if kind == AND:
            put("A", r, x, 1)
            put("B", r, y, 1)
            put("C", r, var[r], 1)
        else:
            put("A", r, x, 2)
            put("B", r, y, 1)
            put("C", r, x, 1)
            put("C", r, y, 1)
            put("C", r, var[r], -1)

    # --- field rows --------------------------------------------------------------------
    # Field variables, sorted: the public inputs, the free aux variables, then the
    # outputs of MUL and LIN rows.
    r_field = rows[kinds >= MUL]
    field_vars = np.concatenate(
        [np.arange(1, n_in, dtype=np.int64), np.arange(n_in, first_defined, dtype=np.int64), var[r_field]]
    )
    n_seeded = ell + lay.free_vars  # inputs and free vars, each consumed once, in order
    # First operand of each field row: the t-th field row consumes the t-th input/free
    # variable while there are some, else a uniform earlier field variable.
    first = _pick_in_sorted(rng, field_vars, np.zeros(len(r_field), np.int64), var[r_field])
    first[:n_seeded] = field_vars[:n_seeded]
    is_mul = kinds[r_field] == MUL

    # MUL: v = x * y.  y (the B operand) comes from a set S of b_field_vars variables.
    # S is built by "first use": a random subset of the MUL rows, the first one included,
    # each takes a fresh variable defined between the previous such row and itself (never
    # empty: it holds at least the previous row's own output), so S's members are distinct
    # and each occurs in B; the other MUL rows reuse a member of S defined before them.
    r_mul, x_mul = r_field[is_mul], first[is_mul]
    if len(r_mul):
        n_s = lay.b_field_vars
        pick = np.sort(rng.choice(np.arange(1, len(r_mul)), n_s - 1, replace=False))
        sel = np.concatenate([[0], pick]).astype(np.int64)
        t_sel = var[r_mul[sel]]
        lo = np.concatenate([[0], t_sel[:-1]])
        s_vars = _pick_in_sorted(rng, field_vars, lo, t_sel)
        y_mul = np.empty(len(r_mul), np.int64)
        y_mul[sel] = s_vars
        rest = np.setdiff1d(np.arange(len(r_mul)), sel)
        usable = np.searchsorted(t_sel, var[r_mul[rest]], side="left")  # S members before
        y_mul[rest] = s_vars[_uniform_below(rng, usable)]
        put("A", r_mul, x_mul, 1)
        put("B", r_mul, y_mul, 1)
        put("C", r_mul, var[r_mul], 1)

    # LIN: v = c1 x1 + ... + cT xT with T in 2..4 and small signed coefficients.
    r_lin, x_lin = r_field[~is_mul], first[~is_mul]
    if len(r_lin):
        terms = rng.integers(2, 5, size=len(r_lin))
        rr = np.repeat(r_lin, terms)
        ops = _pick_in_sorted(rng, field_vars, np.zeros(len(rr), np.int64), var[rr])
        starts = np.concatenate([[0], np.cumsum(terms)[:-1]])
        ops[starts] = x_lin
        mag = rng.integers(1, LIN_COEF_MAX, size=len(rr))
        sign = np.where(rng.random(len(rr)) < 0.25, -1, 1)
        put("A", rr, ops, mag * sign)
        put("B", r_lin, np.zeros_like(r_lin), 1)
        put("C", r_lin, var[r_lin], 1)

    # --- input rows: z_i * 0 = 0 for ONE and each public input -------------------------
    r_in = np.arange(R, n, dtype=np.int64)
    put("A", r_in, r_in - R, 1)

    all_kinds = np.concatenate([kinds, np.full(n - R, INPUT, np.uint8)])
    mats = {}
    for m in "ABC":
        parts = coo[m]
        r = np.concatenate([p[0] for p in parts])
        c = np.concatenate([p[1] for p in parts])
        k = np.concatenate([p[2] for p in parts])
        mats[m] = SparseMatrix.from_coo(n, r, c, k)
    return R1CS(spec, lay, all_kinds, mats["A"], mats["B"], mats["C"])


@functools.lru_cache(maxsize=2)
def r1cs_of(spec: CircuitSpec) -> R1CS:
    """The R1CS of `spec`, generated once per process (worker processes keep theirs)."""
    return generate(spec)


def expected_a_density(spec: CircuitSpec) -> float:
    """Expected share of variables in the A query, from the layout alone (for memory plans
    of sizes too large to generate).  Field variables enter A by being picked as operands;
    with T uniform picks among the K earlier field variables, a variable at relative
    position x escapes them all with probability about x^(T/K), so on average a fraction
    1/(1 + T/K) escapes."""
    lay = layout_of(spec)
    if spec.family == "porep":
        # nearly all of A: every variable but the last derived bit and the field outputs
        # no A operand picks
        in_a = lay.num_vars - min(1, lay.derived_bits) - uncovered_field_outputs(lay)
        return in_a / lay.num_vars
    k = lay.free_vars + lay.field_rows  # field aux variables
    picks = lay.mul_rows + 3 * lay.lin_rows  # LIN rows take 2..4 operands, 3 on average
    covered = k * picks / (k + picks) if k + picks else 0.0
    # ONE and the inputs are in A (input rows), so are BITs; derived bits are not in the
    # generic family, and all but the last are in porep's chains; the free variables are
    # each consumed once as a first (A) operand.
    in_a = lay.num_inputs + lay.base_bits + max(covered, float(lay.free_vars))
    return min(1.0, in_a / lay.num_vars)


def uncovered_field_outputs(lay: Layout) -> float:
    """Expected number of field rows' outputs that no later row reads as an A operand.

    A row's first operand is the next input or free variable while any is left (s of them
    for F field rows), else uniform among the earlier field variables; a LIN row takes 2
    more on average, so U = F - s + 2 LIN uniform picks in all, lambda = U / F per row.
    The output at relative position x escapes them with probability ((x + s/F) / (1 +
    s/F))^lambda; the integral over x gives the count."""
    f = lay.field_rows
    if f == 0:
        return 0.0
    seeded = lay.public_inputs + lay.free_vars
    lam = max(0.0, (f - seeded + 2 * lay.lin_rows) / f)
    s = seeded / f
    return f * ((1 + s) - s ** (lam + 1) / (1 + s) ** lam) / (lam + 1)
