"""The host stages' inner loops in machine code: Fr arithmetic over 32-bit limbs, compiled by numba.

Witness synthesis, the a, b, c evaluation and prep's split of the MSM scalars are loops over
millions of rows of field elements; in pure Python they cost microseconds a row and hold the
interpreter lock.  Here each is one numba function (`nogil=True`): a call releases the lock
for its whole length, so a driver thread running prep never stalls another thread's CUDA
launches, and a synthesis worker runs at tens of nanoseconds a constraint.

Field elements are what the rest of the prover uses: uint32 (k, 8) little-endian limbs in
standard form (not Montgomery).  Inside, limbs are widened to uint64 so that a 32x32-bit
product plus 32-bit sums never overflows.  A product x * y mod r is two Montgomery
multiplications, x * y / 2^256 and then that times 2^512 mod r.  A linear combination is
summed in full (up to 17 limbs) and reduced by a quotient estimate from its top 64 bits when
it is small (sums of a few terms with 16-bit coefficients, the circuits' LIN rows), else by
Montgomery reduction followed by the same correction.

Compiled code is cached on disk (numba's `cache=True`: beside this file, or in the user's
cache directory when the package directory is read-only); where no cache location is
writable, functions compile at first call in each process instead (about a second).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from simgpu.gpu.bls12_381 import FR
from simgpu.prover.circuits import AND, BIT, MUL, XOR

_LIMBS = FR.limbs
_MASK = np.uint64(0xFFFFFFFF)
_SHIFT = np.uint64(32)
_ZERO = np.uint64(0)
_ONE = np.uint64(1)
_BASE = np.uint64(1 << 32)
#: r, 2^512 mod r and -r^-1 mod 2^32, as uint64 limbs (numba freezes global arrays as constants).
_P = np.array(FR.limbs_of(FR.modulus), dtype=np.uint64)
_R2 = np.array(FR.limbs_of(FR.R2), dtype=np.uint64)
_INV = np.uint64(FR.inv32)
#: floor(r / 2^224) + 1: dividing a value's top 64 bits by it never over-estimates value // r.
_R_HI1 = np.uint64((FR.modulus >> 224) + 1)
#: A sum whose limb 8 is below this (and limbs 9.. zero) takes the quotient-estimate path.
_NARROW = np.uint64(1 << 30)
#: Scratch limbs of an unreduced value: a full product (16) and its REDC carry (1).
WIDE = 2 * _LIMBS + 1

#: Field rows per block of field_rows (their operands are gathered together).
BLOCK = 64

#: Classes of a scalar in prep's split (as supraseal splits its MSMs).
CLASS_ZERO, CLASS_ONE, CLASS_TAIL = 0, 1, 2


def _jit(fn: Callable[..., Any]) -> Callable[..., Any]:
    """njit with the interpreter lock released; cached on disk where any cache dir is writable."""
    try:
        return numba.njit(nogil=True, cache=True)(fn)
    except RuntimeError:  # numba found no writable cache location: compile per process
        return numba.njit(nogil=True)(fn)


# --- limb arithmetic (inlined into the kernels below) ----------------------------------------


@_jit
def _geq_p(t: np.ndarray, off: int) -> bool:
    """t[off:off+8] >= r, t[off+8] being a ninth limb (0 or 1 after a REDC)."""
    if t[off + _LIMBS] != _ZERO:
        return True
    for j in range(_LIMBS - 1, -1, -1):
        if t[off + j] != _P[j]:
            return t[off + j] > _P[j]
    return True


@_jit
def _sub_p(t: np.ndarray, off: int) -> None:
    """t[off:off+9] -= r (t >= r)."""
    borrow = _ZERO
    for j in range(_LIMBS + 1):
        p = _P[j] if j < _LIMBS else _ZERO
        d = t[off + j] + _BASE - p - borrow  # in [0, 2^33): no wrap-around
        t[off + j] = d & _MASK
        borrow = _ONE - (d >> _SHIFT)


@_jit
def _redc(t: np.ndarray) -> None:
    """t (17 limbs, value T < r * 2^256) -> t[8:17] = T / 2^256 mod r, fully reduced."""
    for i in range(_LIMBS):
        m = (t[i] * _INV) & _MASK  # makes limb i vanish: T + m r 2^(32 i) = 0 mod 2^(32 (i+1))
        carry = _ZERO
        for j in range(_LIMBS):
            s = t[i + j] + m * _P[j] + carry
            t[i + j] = s & _MASK
            carry = s >> _SHIFT
        k = i + _LIMBS
        while carry != _ZERO and k < WIDE:
            s = t[k] + carry
            t[k] = s & _MASK
            carry = s >> _SHIFT
            k += 1
    while _geq_p(t, _LIMBS):
        _sub_p(t, _LIMBS)


@_jit
def _mul_wide(x: np.ndarray, xo: int, y: np.ndarray, yo: int, t: np.ndarray) -> None:
    """t = x[xo:xo+8] * y[yo:yo+8] in full (16 limbs; t[16] = 0), schoolbook."""
    for k in range(WIDE):
        t[k] = _ZERO
    for i in range(_LIMBS):
        yi = y[yo + i]
        carry = _ZERO
        for j in range(_LIMBS):
            s = t[i + j] + x[xo + j] * yi + carry
            t[i + j] = s & _MASK
            carry = s >> _SHIFT
        t[i + _LIMBS] = carry


@_jit
def _mont(x: np.ndarray, y: np.ndarray, m: np.ndarray, out: np.ndarray) -> None:
    """out[0:9] = x * y / 2^256 mod r, below 2r (x * y < r * 2^256; 8 limbs each).

    Product scanning: a column's 32x32-bit products are summed as separate low and high
    halves, so they do not wait on each other's carries, and the Montgomery digits m_i are
    found column by column (finely integrated product scanning)."""
    lo = _ZERO
    hi = _ZERO
    for i in range(_LIMBS):
        for j in range(i + 1):
            p = x[j] * y[i - j]
            lo += p & _MASK
            hi += p >> _SHIFT
        for j in range(i):
            p = m[j] * _P[i - j]
            lo += p & _MASK
            hi += p >> _SHIFT
        mi = ((lo & _MASK) * _INV) & _MASK  # makes this column's low 32 bits vanish
        m[i] = mi
        p = mi * _P[0]
        lo += p & _MASK
        hi += p >> _SHIFT
        lo = hi + (lo >> _SHIFT)
        hi = _ZERO
    for i in range(_LIMBS, 2 * _LIMBS - 1):
        for j in range(i - _LIMBS + 1, _LIMBS):
            p = x[j] * y[i - j]
            lo += p & _MASK
            hi += p >> _SHIFT
            p = m[j] * _P[i - j]
            lo += p & _MASK
            hi += p >> _SHIFT
        out[i - _LIMBS] = lo & _MASK
        lo = hi + (lo >> _SHIFT)
        hi = _ZERO
    out[_LIMBS - 1] = lo & _MASK
    out[_LIMBS] = lo >> _SHIFT


@_jit
def _mul_mod(x: np.ndarray, y: np.ndarray, m: np.ndarray, w: np.ndarray, out: np.ndarray, row: int) -> None:
    """out[row] = x * y mod r (x, y < r as uint64 limbs; m: 8, w: 9 limbs of scratch)."""
    _mont(x, y, m, w)  # x y / 2^256, below 2r
    _mont(w, _R2, m, y)  # (x y / 2^256) 2^512 / 2^256 = x y, below 2r (y is free now)
    if _geq_p(y, 0):
        _sub_p(y, 0)
    for j in range(_LIMBS):
        out[row, j] = y[j]


@_jit
def _reduce_narrow(t: np.ndarray) -> None:
    """t[0:9] = T mod r for T < 2^286 in t (limbs 9.. zero): subtract q r for q estimated from
    the top 64 bits (q <= T // r, short of it by at most 3), then r while T >= r."""
    q = (t[_LIMBS - 1] | (t[_LIMBS] << _SHIFT)) // _R_HI1  # < 2^32
    carry = _ZERO
    borrow = _ZERO
    for j in range(_LIMBS):
        p = q * _P[j] + carry
        carry = p >> _SHIFT
        d = t[j] + _BASE - (p & _MASK) - borrow
        t[j] = d & _MASK
        borrow = _ONE - (d >> _SHIFT)
    t[_LIMBS] = (t[_LIMBS] + _BASE - carry - borrow) & _MASK  # q r <= T: no borrow out
    while _geq_p(t, 0):
        _sub_p(t, 0)


@_jit
def _reduce_wide(t: np.ndarray, u: np.ndarray, out: np.ndarray, row: int) -> None:
    """out[row] = T mod r for the value T < r * 2^256 in t (clobbers t and u)."""
    _redc(t)  # T / 2^256
    for j in range(_LIMBS):
        u[j] = t[_LIMBS + j]
    _mul_wide(u, 0, _R2, 0, t)  # (T / 2^256) * 2^512
    _redc(t)  # ... / 2^256 = T
    for j in range(_LIMBS):
        out[row, j] = t[_LIMBS + j]


@_jit
def _accumulate(t: np.ndarray, z: np.ndarray, col: int, coef: int) -> None:
    """t += |coef| * z[col], or |coef| * (r - z[col]) for a negative coef (z[col] != 0);
    z is the assignment or a buffer of gathered rows."""
    nonzero = False
    for j in range(_LIMBS):
        if z[col, j] != 0:
            nonzero = True
            break
    if not nonzero:
        return
    c = np.uint64(coef if coef > 0 else -coef)
    carry = _ZERO
    borrow = _ZERO
    for j in range(_LIMBS):
        v = np.uint64(z[col, j])
        if coef < 0:  # the limb of r - z, with its borrow (z != 0, so r - z < r)
            d = _P[j] + _BASE - v - borrow
            v = d & _MASK
            borrow = _ONE - (d >> _SHIFT)
        s = t[j] + v * c + carry  # c < 2^31, so this never overflows 64 bits
        t[j] = s & _MASK
        carry = s >> _SHIFT
    k = _LIMBS
    while carry != _ZERO and k < WIDE:
        s = t[k] + carry
        t[k] = s & _MASK
        carry = s >> _SHIFT
        k += 1


@_jit
def _store_sum(t: np.ndarray, u: np.ndarray, out: np.ndarray, row: int) -> None:
    """out[row] = the accumulated value in t mod r (clobbers t and u)."""
    for k in range(_LIMBS + 1, WIDE):
        if t[k] != _ZERO:
            _reduce_wide(t, u, out, row)
            return
    if t[_LIMBS] >= _NARROW:
        _reduce_wide(t, u, out, row)
        return
    _reduce_narrow(t)
    for j in range(_LIMBS):
        out[row, j] = t[j]


# --- synthesis ---------------------------------------------------------------------------------


@_jit
def _copy_row(src: np.ndarray, i: int, dst: np.ndarray, row: int) -> None:
    for j in range(_LIMBS):
        dst[row, j] = src[i, j]


@_jit
def _load(buf: np.ndarray, k: int, z: np.ndarray, var: int, gathered: bool, dst: np.ndarray) -> None:
    """dst = the operand z[var]: its gathered copy buf[k], or z itself if defined since."""
    if gathered:
        for j in range(_LIMBS):
            dst[j] = buf[k, j]
    else:
        for j in range(_LIMBS):
            dst[j] = z[var, j]


@_jit
def bit_rows(
    kinds: np.ndarray,
    first_defined: int,
    a_indptr: np.ndarray,
    a_cols: np.ndarray,
    b_indptr: np.ndarray,
    b_cols: np.ndarray,
    flips: np.ndarray,
    z: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray,
) -> None:
    """The witness's bits, in row order (v = first_defined + j defined by row j, x and y the
    first variables of A_j and B_j, both earlier BITs):

        BIT  v (1 - v) = 0      v = the next coin flip;  a, b, c = v, 1 - v, 0
        AND  x y = v            v = x & y;               a, b, c = x, y, v
        XOR  (2x) y = x + y - v v = x ^ y;               a, b, c = 2x, y, x + y - v

    Bit values are kept one byte per variable beside z, so an operand's read stays in cache.
    a, b, c (uint32 (N, 8), zeroed) get limb 0 of these small values, unless they have no rows."""
    bits = np.zeros(z.shape[0], np.uint8)
    abc = a.shape[0] > 0
    k = 0
    for row in range(kinds.shape[0]):
        kind = kinds[row]
        if kind > XOR:
            continue
        v = first_defined + row
        if kind == BIT:
            val = np.uint8(flips[k])
            k += 1
            if abc:
                a[row, 0] = val
                b[row, 0] = 1 - val
        else:
            xv = bits[a_cols[a_indptr[row]]]
            yv = bits[b_cols[b_indptr[row]]]
            val = xv & yv if kind == AND else xv ^ yv
            if abc:
                a[row, 0] = xv if kind == AND else 2 * xv
                b[row, 0] = yv
                c[row, 0] = val if kind == AND else xv + yv - val
        bits[v] = val
        z[v, 0] = val


@_jit
def field_rows(
    rows: np.ndarray,
    first_defined: int,
    a_indptr: np.ndarray,
    a_cols: np.ndarray,
    a_coefs: np.ndarray,
    kinds: np.ndarray,
    b_indptr: np.ndarray,
    b_cols: np.ndarray,
    z: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray,
    buf: np.ndarray,
) -> None:
    """The witness's field rows `rows` (ascending), in order: a straight-line program, each
    row reading only earlier variables.  With v = first_defined + j the variable row j
    defines, a MUL row and a LIN row (any other kind) are

        MUL  x * y = v                 z[v] = z[x] z[y];  a, b, c = z[x], z[y], z[v]
        LIN  (sum c_i x_i) * ONE = v   z[v] = sum c_i z[x_i];  a, b, c = z[v], 1, z[v]

    a, b, c (uint32 (N, 8)) get those rows' evaluations, unless they have no rows.

    Blocks of rows go in two steps: gather every operand of the block into buf (uint64,
    at least BLOCK x (most A entries + 1) rows), then compute.  The operands are random
    earlier variables, so most reads miss the cache; issued back to back the CPU overlaps
    them, while between two multiplications it could not.  An operand defined inside the
    block is read from z at compute time (its gathered copy predates it)."""
    t = np.zeros(WIDE, np.uint64)
    u = np.zeros(_LIMBS, np.uint64)
    x = np.zeros(_LIMBS, np.uint64)
    y = np.zeros(_LIMBS + 1, np.uint64)
    m = np.zeros(_LIMBS, np.uint64)
    w = np.zeros(_LIMBS + 1, np.uint64)
    abc = a.shape[0] > 0
    for b0 in range(0, rows.shape[0], BLOCK):
        b1 = min(b0 + BLOCK, rows.shape[0])
        k = 0
        for i in range(b0, b1):  # step 1: the reads, back to back
            row = rows[i]
            for e in range(a_indptr[row], a_indptr[row + 1]):
                _copy_row(z, a_cols[e], buf, k)
                k += 1
            if kinds[row] == MUL:
                _copy_row(z, b_cols[b_indptr[row]], buf, k)
                k += 1
        v_first = first_defined + rows[b0]
        k = 0
        for i in range(b0, b1):  # step 2: the arithmetic
            row = rows[i]
            v = first_defined + row
            e0, e1 = a_indptr[row], a_indptr[row + 1]
            if kinds[row] == MUL:
                xc, yc = a_cols[e0], b_cols[b_indptr[row]]
                _load(buf, k, z, xc, xc < v_first, x)
                _load(buf, k + 1, z, yc, yc < v_first, y)
                k += 2
                if abc:
                    for j in range(_LIMBS):
                        a[row, j] = x[j]
                        b[row, j] = y[j]
                _mul_mod(x, y, m, w, z, v)
                if abc:
                    _copy_row(z, v, c, row)
            else:
                for q in range(WIDE):
                    t[q] = _ZERO
                for e in range(e0, e1):
                    if a_cols[e] < v_first:
                        _accumulate(t, buf, k, a_coefs[e])
                    else:
                        _accumulate(t, z, a_cols[e], a_coefs[e])
                    k += 1
                _store_sum(t, u, z, v)
                if abc:
                    _copy_row(z, v, a, row)
                    b[row, 0] = 1
                    _copy_row(z, v, c, row)


@_jit
def evaluate_rows(
    indptr: np.ndarray, cols: np.ndarray, coefs: np.ndarray, z: np.ndarray, out: np.ndarray
) -> None:
    """out[j] = <M_j, z> mod r for every row j of the CSR matrix M, summed through the matrix
    (synthesis of a corrupted witness; tests); out's rows past M's are left alone."""
    t = np.zeros(WIDE, np.uint64)
    u = np.zeros(_LIMBS, np.uint64)
    for row in range(indptr.shape[0] - 1):
        s, e = indptr[row], indptr[row + 1]
        if e == s + 1 and coefs[s] == 1:
            _copy_row(z, cols[s], out, row)
            continue
        for k in range(WIDE):
            t[k] = _ZERO
        for i in range(s, e):
            _accumulate(t, z, cols[i], coefs[i])
        _store_sum(t, u, out, row)


# --- prep ---------------------------------------------------------------------------------------


@_jit
def _row_class(src: np.ndarray, i: int) -> int:
    """Class of the field element src[i]: zero, one or a tail."""
    for j in range(1, _LIMBS):
        if src[i, j] != 0:
            return CLASS_TAIL
    if src[i, 0] == 0:
        return CLASS_ZERO
    return CLASS_ONE if src[i, 0] == 1 else CLASS_TAIL


@_jit
def split_query(
    inputs: np.ndarray, aux: np.ndarray, index: np.ndarray, dense: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split one MSM query's scalars into ones and tails (zeros dropped).

    z = (inputs, aux) is the assignment.  The query's position p holds variable index[p],
    or, if dense, aux variable p (the L query; index is ignored).  Returns the positions of
    the ones and of the tails (int64, ascending) and the tails' scalars (uint32 (k, 8))."""
    n_in = inputs.shape[0]
    n = aux.shape[0] if dense else index.shape[0]
    classes = np.empty(n, np.uint8)
    n_one = 0
    n_tail = 0
    for p in range(n):  # pass 1: classify and count, so that pass 2 fills exact-size arrays
        var = n_in + p if dense else np.int64(index[p])
        c = _row_class(inputs, var) if var < n_in else _row_class(aux, var - n_in)
        classes[p] = c
        if c == CLASS_ONE:
            n_one += 1
        elif c == CLASS_TAIL:
            n_tail += 1
    ones = np.empty(n_one, np.int64)
    tails = np.empty(n_tail, np.int64)
    scalars = np.empty((n_tail, _LIMBS), np.uint32)
    io = 0
    it = 0
    for p in range(n):
        c = classes[p]
        if c == CLASS_ONE:
            ones[io] = p
            io += 1
        elif c == CLASS_TAIL:
            tails[it] = p
            var = n_in + p if dense else np.int64(index[p])
            for j in range(_LIMBS):
                scalars[it, j] = inputs[var, j] if var < n_in else aux[var - n_in, j]
            it += 1
    return ones, tails, scalars
