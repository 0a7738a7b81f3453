"""The host stages' inner loops in machine code: Fr arithmetic over 64-bit limbs, compiled by numba.

Witness synthesis, the a, b, c evaluation and prep's split of the MSM scalars are loops over
millions of rows of field elements; in pure Python they cost microseconds a row and hold the
interpreter lock.  Here each is one numba function (`nogil=True`): a call releases the lock
for its whole length, so a driver thread running prep never stalls another thread's CUDA
launches, and a synthesis worker spends tens of nanoseconds a constraint on arithmetic.

Field elements are what the rest of the prover uses: uint32 (k, 8) little-endian limbs in
standard form (not Montgomery).  The arithmetic reads the same bytes as uint64 (k, 4) (a
zero-copy view) and multiplies 64 x 64 -> 128 bits through `_mac`, a four-line LLVM
intrinsic (numba has no 128-bit integers; LLVM compiles it to one multiply-with-high-half).
A product x * y mod r is two Montgomery multiplications (CIOS): x * y / 2^256, then that
times 2^512 mod r.  A linear combination is summed in full (up to 6 limbs) and reduced by a
quotient estimated from its bits 222..285 when it is below 2^286 (a few terms with 16-bit
coefficients, the circuits' LIN rows), else by Montgomery reduction and the same correction.
The witness's field rows read random earlier variables, so they ask the cache for the
operands of rows ahead (`_prefetch`, LLVM's prefetch instruction) while computing.

Compiled code is cached on disk (numba's `cache=True`: beside this file, or in the user's
cache directory when the package directory is read-only); where no cache location is
writable, functions compile at the first call in each process instead (seconds).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from simgpu.gpu.bls12_381 import FR
from simgpu.prover.circuits import AND, BIT, MUL, XOR

_WORDS = FR.limbs  # 32-bit words of an element, as stored
_LIMBS = 4  # 64-bit limbs, as computed
_M64 = (1 << 64) - 1
_ZERO = np.uint64(0)
_ONE = np.uint64(1)
#: r, 2^512 mod r (limbs) and -r^-1 mod 2^64, as compile-time constants.
_P0, _P1, _P2, _P3 = (np.uint64((FR.modulus >> (64 * i)) & _M64) for i in range(_LIMBS))
_R2_0, _R2_1, _R2_2, _R2_3 = (np.uint64((FR.R2 >> (64 * i)) & _M64) for i in range(_LIMBS))
_INV = np.uint64((-pow(FR.modulus, -1, 1 << 64)) % (1 << 64))
#: floor(r / 2^222) + 1: dividing a value's bits 222..285 by it never over-estimates value // r.
_R_HI1 = np.uint64((FR.modulus >> 222) + 1)
_S30 = np.uint64(222 - 192)  # that window starts 30 bits into limb 3
_S34 = np.uint64(64 - 30)
#: A sum below 2^(256 + 30) (limb 4 below 2^30, limb 5 zero) takes the quotient estimate.
_NARROW = np.uint64(1 << 30)

#: How many field rows ahead field_rows asks the cache for operands (a row takes about
#: 100 ns; a miss, 100-300).
AHEAD = 16

#: Classes of a scalar in prep's split (as supraseal splits its MSMs).
CLASS_ZERO, CLASS_ONE, CLASS_TAIL = 0, 1, 2


def _jit(fn: Callable[..., Any]) -> Callable[..., Any]:
    """njit with the interpreter lock released; cached on disk where any cache dir is writable."""
    try:
        return numba.njit(nogil=True, cache=True)(fn)
    except RuntimeError:  # numba found no writable cache location: compile per process
        return numba.njit(nogil=True)(fn)


@intrinsic
def _mac(typingctx: Any, a: Any, b: Any, c: Any, d: Any) -> Any:
    """(a * b + c + d) as its (low, high) 64-bit halves: never more than 128 bits."""
    sig = types.UniTuple(types.uint64, 2)(types.uint64, types.uint64, types.uint64, types.uint64)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        wide = ir.IntType(128)
        x, y, u, v = (builder.zext(arg, wide) for arg in args)
        total = builder.add(builder.add(builder.mul(x, y), u), v)
        low = builder.trunc(total, ir.IntType(64))
        high = builder.trunc(builder.lshr(total, ir.Constant(wide, 64)), ir.IntType(64))
        return context.make_tuple(builder, signature.return_type, [low, high])

    return sig, codegen


@intrinsic
def _prefetch(typingctx: Any, arr: Any, row: Any) -> Any:
    """Ask the cache for row `row` of the 2-d array arr, without waiting for it (LLVM's
    prefetch: read, keep in all cache levels)."""
    sig = types.void(arr, row)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        zero = context.get_constant(types.intp, 0)
        index = context.cast(builder, args[1], signature.args[1], types.intp)
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [index, zero])
        byte_ptr = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [byte_ptr, i32, i32, i32])
        fn = builder.module.declare_intrinsic("llvm.prefetch", [byte_ptr], fnty)
        builder.call(fn, [builder.bitcast(ptr, byte_ptr), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen


# --- limb arithmetic (compiled into the kernels below) -----------------------------------------
#
# Elements travel as four uint64 scalars (little-endian), never as arrays, so that the
# compiler keeps them in registers and inlines these helpers into the loops.


@_jit
def _sub_borrow(a: np.uint64, b: np.uint64, borrow: np.uint64) -> tuple[np.uint64, np.uint64]:
    """(a - b - borrow mod 2^64, the borrow out)."""
    return a - b - borrow, _ONE if a < b or a - b < borrow else _ZERO


@_jit
def _reduce_once(t0: Any, t1: Any, t2: Any, t3: Any, t4: Any) -> tuple[Any, Any, Any, Any, Any]:
    """(t0..t4) - r if that is not negative, else (t0..t4) (t4: a fifth limb)."""
    d0, br = _sub_borrow(t0, _P0, _ZERO)
    d1, br = _sub_borrow(t1, _P1, br)
    d2, br = _sub_borrow(t2, _P2, br)
    d3, br = _sub_borrow(t3, _P3, br)
    d4, br = _sub_borrow(t4, _ZERO, br)
    if br != _ZERO:
        return t0, t1, t2, t3, t4
    return d0, d1, d2, d3, d4


@_jit
def _cios_round(t0: Any, t1: Any, t2: Any, t3: Any, t4: Any, x0: Any, x1: Any, x2: Any, x3: Any, yi: Any):
    """One round of Montgomery multiplication (CIOS): (t + x yi + m r) / 2^64, m making the
    lowest limb vanish.  t < 2r and x < 2r keep every round below 2r + x < 2^257."""
    t0, c = _mac(x0, yi, t0, _ZERO)
    t1, c = _mac(x1, yi, t1, c)
    t2, c = _mac(x2, yi, t2, c)
    t3, c = _mac(x3, yi, t3, c)
    t4, t5 = _mac(_ONE, t4, c, _ZERO)
    m = t0 * _INV  # mod 2^64: t + m r is 0 mod 2^64
    _, c = _mac(m, _P0, t0, _ZERO)
    t0, c = _mac(m, _P1, t1, c)
    t1, c = _mac(m, _P2, t2, c)
    t2, c = _mac(m, _P3, t3, c)
    t3, h = _mac(_ONE, t4, c, _ZERO)
    return t0, t1, t2, t3, t5 + h


@_jit
def _mont(x0: Any, x1: Any, x2: Any, x3: Any, y0: Any, y1: Any, y2: Any, y3: Any):
    """x y / 2^256 mod r, below 2r (x y < r 2^256), as four limbs (2r < 2^256)."""
    t = _cios_round(_ZERO, _ZERO, _ZERO, _ZERO, _ZERO, x0, x1, x2, x3, y0)
    t = _cios_round(t[0], t[1], t[2], t[3], t[4], x0, x1, x2, x3, y1)
    t = _cios_round(t[0], t[1], t[2], t[3], t[4], x0, x1, x2, x3, y2)
    t = _cios_round(t[0], t[1], t[2], t[3], t[4], x0, x1, x2, x3, y3)
    return t[0], t[1], t[2], t[3]


@_jit
def _mul_mod(x0: Any, x1: Any, x2: Any, x3: Any, y0: Any, y1: Any, y2: Any, y3: Any):
    """x y mod r (x, y < r): x y / 2^256, then times 2^512 / 2^256."""
    w = _mont(x0, x1, x2, x3, y0, y1, y2, y3)
    v = _mont(w[0], w[1], w[2], w[3], _R2_0, _R2_1, _R2_2, _R2_3)
    v = _reduce_once(v[0], v[1], v[2], v[3], _ZERO)
    return v[0], v[1], v[2], v[3]


@_jit
def _add_term(t: Any, v0: Any, v1: Any, v2: Any, v3: Any, coef: Any):
    """t + |coef| v, or + |coef| (r - v) for a negative coef (v != 0): t is 6 limbs."""
    if coef < 0:  # r - v (v != 0, so it is below r)
        v0, br = _sub_borrow(_P0, v0, _ZERO)
        v1, br = _sub_borrow(_P1, v1, br)
        v2, br = _sub_borrow(_P2, v2, br)
        v3, br = _sub_borrow(_P3, v3, br)
    c = np.uint64(coef if coef > 0 else -coef)
    t0, k = _mac(v0, c, t[0], _ZERO)  # c < 2^31: every partial sum fits 128 bits
    t1, k = _mac(v1, c, t[1], k)
    t2, k = _mac(v2, c, t[2], k)
    t3, k = _mac(v3, c, t[3], k)
    t4, k = _mac(_ONE, t[4], k, _ZERO)
    return t0, t1, t2, t3, t4, t[5] + k


@_jit
def _redc_round(t: Any):
    """(t + m r) / 2^64 for the 6-limb t, m making the lowest limb vanish."""
    m = t[0] * _INV
    _, c = _mac(m, _P0, t[0], _ZERO)
    t0, c = _mac(m, _P1, t[1], c)
    t1, c = _mac(m, _P2, t[2], c)
    t2, c = _mac(m, _P3, t[3], c)
    t3, c = _mac(_ONE, t[4], c, _ZERO)
    t4, c = _mac(_ONE, t[5], c, _ZERO)
    return t0, t1, t2, t3, t4, c


@_jit
def _reduce_sum(t: Any):
    """T mod r for the 6-limb sum T.  Below 2^286 (the circuits' LIN rows): subtract q r for
    q estimated from bits 222..285 (never above T // r, short by at most 2), then r while
    T >= r.  Else: T / 2^256 by four Montgomery rounds (T < 2^384 < r 2^256), times 2^512 /
    2^256."""
    if t[5] == _ZERO and t[4] < _NARROW:
        q = ((t[4] << _S34) | (t[3] >> _S30)) // _R_HI1  # below 2^32
        p0, k = _mac(q, _P0, _ZERO, _ZERO)
        p1, k = _mac(q, _P1, k, _ZERO)
        p2, k = _mac(q, _P2, k, _ZERO)
        p3, k = _mac(q, _P3, k, _ZERO)
        t0, br = _sub_borrow(t[0], p0, _ZERO)
        t1, br = _sub_borrow(t[1], p1, br)
        t2, br = _sub_borrow(t[2], p2, br)
        t3, br = _sub_borrow(t[3], p3, br)
        t4, br = _sub_borrow(t[4], k, br)  # q r <= T: no borrow out
        v = (t0, t1, t2, t3, t4)
        for _ in range(3):
            v = _reduce_once(v[0], v[1], v[2], v[3], v[4])
        return v[0], v[1], v[2], v[3]
    for _ in range(_LIMBS):
        t = _redc_round(t)  # below T / 2^256 + r < 2^128 + r
    w = _mont(t[0], t[1], t[2], t[3], _R2_0, _R2_1, _R2_2, _R2_3)
    w = _reduce_once(w[0], w[1], w[2], w[3], _ZERO)
    return w[0], w[1], w[2], w[3]


@_jit
def _store(out: np.ndarray, row: int, v: Any) -> None:
    out[row, 0], out[row, 1], out[row, 2], out[row, 3] = v[0], v[1], v[2], v[3]


@_jit
def _copy_row(src: np.ndarray, i: int, dst: np.ndarray, row: int) -> None:
    for j in range(src.shape[1]):
        dst[row, j] = src[i, j]


# --- synthesis ---------------------------------------------------------------------------------


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
def field_program(
    rows: np.ndarray,
    a_indptr: np.ndarray,
    a_cols: np.ndarray,
    a_coefs: np.ndarray,
    kinds: np.ndarray,
    b_indptr: np.ndarray,
    b_cols: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The operands of the field rows `rows` as one flat list, for field_rows: row i's are
    ops[start[i]:start[i+1]], its A entries (coefficients in coefs) and, for a MUL, then its
    B operand.  It depends on the circuit alone, so a worker makes it once."""
    n = rows.shape[0]
    start = np.empty(n + 1, np.int64)
    start[0] = 0
    for i in range(n):
        row = rows[i]
        start[i + 1] = start[i] + a_indptr[row + 1] - a_indptr[row] + (1 if kinds[row] == MUL else 0)
    ops = np.empty(start[n], np.int32)  # variables and coefficients fit 32 bits, as in the CSR
    coefs = np.ones(start[n], np.int32)
    for i in range(n):
        row = rows[i]
        k = start[i]
        for e in range(a_indptr[row], a_indptr[row + 1]):
            ops[k] = a_cols[e]
            coefs[k] = a_coefs[e]
            k += 1
        if kinds[row] == MUL:
            ops[k] = b_cols[b_indptr[row]]
    return start, ops, coefs


@_jit
def field_rows(
    rows: np.ndarray,
    first_defined: int,
    kinds: np.ndarray,
    start: np.ndarray,
    ops: np.ndarray,
    coefs: np.ndarray,
    z: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray,
) -> None:
    """The witness's field rows `rows` (ascending), in order: a straight-line program, each
    row reading only earlier variables.  With v = first_defined + j the variable row j
    defines, a MUL row and a LIN row (any other kind) are

        MUL  x * y = v                 z[v] = z[x] z[y];  a, b, c = z[x], z[y], z[v]
        LIN  (sum c_i x_i) * ONE = v   z[v] = sum c_i z[x_i];  a, b, c = z[v], 1, z[v]

    their operands listed by field_program (start, ops, coefs).  z, a, b, c are uint64
    (rows, 4) views of the elements; a, b, c get those rows' evaluations, unless they have
    no rows.  The operands are random earlier variables, so most miss the cache: each row
    first asks for the operands of the row AHEAD rows on, which arrive while it computes."""
    abc = a.shape[0] > 0
    n = rows.shape[0]
    for i in range(n):
        if i + AHEAD < n:
            for k in range(start[i + AHEAD], start[i + AHEAD + 1]):
                _prefetch(z, ops[k])
        row = rows[i]
        v = first_defined + row
        k0, k1 = start[i], start[i + 1]
        if kinds[row] == MUL:
            x, y = ops[k0], ops[k0 + 1]
            x0, x1, x2, x3 = z[x, 0], z[x, 1], z[x, 2], z[x, 3]
            y0, y1, y2, y3 = z[y, 0], z[y, 1], z[y, 2], z[y, 3]
            r = _mul_mod(x0, x1, x2, x3, y0, y1, y2, y3)
            _store(z, v, r)
            if abc:
                _store(a, row, (x0, x1, x2, x3))
                _store(b, row, (y0, y1, y2, y3))
                _store(c, row, r)
        else:
            t = (_ZERO, _ZERO, _ZERO, _ZERO, _ZERO, _ZERO)
            for k in range(k0, k1):
                x = ops[k]
                if z[x, 0] | z[x, 1] | z[x, 2] | z[x, 3]:
                    t = _add_term(t, z[x, 0], z[x, 1], z[x, 2], z[x, 3], coefs[k])
            r = _reduce_sum(t)
            _store(z, v, r)
            if abc:
                _store(a, row, r)
                b[row, 0] = 1
                _store(c, row, r)


@_jit
def evaluate_rows(
    indptr: np.ndarray, cols: np.ndarray, coefs: np.ndarray, z: np.ndarray, out: np.ndarray
) -> None:
    """out[j] = <M_j, z> mod r for every row j of the CSR matrix M, summed through the matrix
    (synthesis of a corrupted witness; tests); z and out are uint64 (rows, 4) views, out's
    rows past M's are left alone.  A row's coefficients must sum, in magnitude, below 2^63
    (the 6-limb sum then stays below 2^382)."""
    for row in range(indptr.shape[0] - 1):
        s, e = indptr[row], indptr[row + 1]
        if e == s + 1 and coefs[s] == 1:
            _copy_row(z, cols[s], out, row)
            continue
        t = (_ZERO, _ZERO, _ZERO, _ZERO, _ZERO, _ZERO)
        for i in range(s, e):
            col = cols[i]
            if z[col, 0] | z[col, 1] | z[col, 2] | z[col, 3]:
                t = _add_term(t, z[col, 0], z[col, 1], z[col, 2], z[col, 3], coefs[i])
        _store(out, row, _reduce_sum(t))


# --- prep ---------------------------------------------------------------------------------------


@_jit
def _row_class(src: np.ndarray, i: int) -> int:
    """Class of the field element src[i]: zero, one or a tail."""
    for j in range(1, _WORDS):
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
    scalars = np.empty((n_tail, _WORDS), np.uint32)
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
            for j in range(_WORDS):
                scalars[it, j] = inputs[var, j] if var < n_in else aux[var - n_in, j]
            it += 1
    return ones, tails, scalars
