"""Host-side encodings shared by the CPU backend, the GPU kernels and the key files.

Field elements are little-endian arrays of 32-bit words: Fr is uint32[8], Fp is
uint32[12].  A G1 affine point is uint32[24] (x then y, each Fp, standard form); the
point at infinity is all zeros, which is also how py-arkworks-bls12381 writes it
(0 is not a valid x with y = 0 on y^2 = x^3 + 4, so there is no ambiguity).  A G2
affine point is 192 bytes in arkworks' xy little-endian layout.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from simgpu.gpu.bls12_381 import FR

FR_WORDS = 8
FP_WORDS = 12
G1_WORDS = 24
G1_BYTES = 96
G2_BYTES = 192
FR_BYTES = 32


def ints_to_limbs(values: Iterable[int], words: int = FR_WORDS) -> np.ndarray:
    """Python ints (each < 2^(32*words)) -> uint32 array of shape (n, words)."""
    nbytes = 4 * words
    buf = b"".join(int(v).to_bytes(nbytes, "little") for v in values)
    return np.frombuffer(buf, dtype="<u4").reshape(-1, words).astype(np.uint32, copy=False)


def limbs_to_ints(limbs: np.ndarray) -> list[int]:
    """uint32 array of shape (n, words) -> Python ints."""
    arr = np.ascontiguousarray(limbs, dtype="<u4")
    row = arr.shape[1] * 4
    raw = arr.tobytes()
    return [int.from_bytes(raw[i : i + row], "little") for i in range(0, len(raw), row)]


def random_fr(n: int, rng: np.random.Generator) -> np.ndarray:
    """n uniform elements of Fr (standard form) as uint32 (n, 8)."""
    out = rng.integers(0, 1 << 32, size=(n, FR_WORDS), dtype=np.uint64).astype(np.uint32)
    # Reject-free reduction: clear the top bits so each value < 2^255, then reduce the few
    # that are >= r by subtracting r once (r > 2^254, so one subtraction suffices).
    out[:, 7] &= 0x7FFFFFFF
    vals = limbs_to_ints(out)
    fixed = [v - FR.modulus if v >= FR.modulus else v for v in vals]
    return ints_to_limbs(fixed)


def scalar_of(v: int) -> Scalar:
    """Python int (< r) -> arkworks Fr scalar."""
    return Scalar.from_le_bytes(int(v).to_bytes(FR_BYTES, "little"))


def int_of(s: Scalar) -> int:
    """arkworks Fr scalar -> Python int."""
    return int.from_bytes(s.to_le_bytes(), "little")


def g1_to_limbs(points: Sequence[G1Point]) -> np.ndarray:
    """arkworks G1 points -> uint32 array of shape (n, 24) of affine x, y (infinity is all zeros)."""
    buf = b"".join(p.to_xy_bytes_le() for p in points)
    return np.frombuffer(buf, dtype="<u4").reshape(-1, G1_WORDS).astype(np.uint32, copy=False)


def g1_from_limbs(limbs: np.ndarray, *, checked: bool = False) -> list[G1Point]:
    """uint32 (n, 24) affine limbs -> arkworks G1 points (curve and subgroup check only if checked)."""
    raw = np.ascontiguousarray(limbs, dtype="<u4").tobytes()
    make = G1Point.from_xy_bytes_le if checked else G1Point.from_xy_bytes_unchecked_le
    return [make(raw[i : i + G1_BYTES]) for i in range(0, len(raw), G1_BYTES)]


def g1_from_xy(x: int, y: int) -> G1Point:
    """An affine point from standard-form coordinates (checked: on curve, in subgroup)."""
    if x == 0 and y == 0:
        return G1Point.identity()
    return G1Point.from_xy_bytes_le(x.to_bytes(48, "little") + y.to_bytes(48, "little"))


def g2_to_bytes(points: Sequence[G2Point]) -> bytes:
    """arkworks G2 points -> concatenated 192-byte xy little-endian records."""
    return b"".join(p.to_xy_bytes_le() for p in points)


def g2_from_bytes(raw: bytes | memoryview) -> list[G2Point]:
    """Concatenated 192-byte xy little-endian records -> arkworks G2 points (unchecked)."""
    raw = bytes(raw)
    return [G2Point.from_xy_bytes_unchecked_le(raw[i : i + G2_BYTES]) for i in range(0, len(raw), G2_BYTES)]


def scalars_of_limbs(limbs: np.ndarray) -> list[Scalar]:
    """arkworks scalars of (k, 8) little-endian u32 limbs (no reduction check)."""
    raw = np.ascontiguousarray(limbs, dtype="<u4").tobytes()
    return [Scalar.from_le_bytes(raw[i : i + FR_BYTES]) for i in range(0, len(raw), FR_BYTES)]
