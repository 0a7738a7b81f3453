"""BLS12-381 constants, derived at import from the curve's one defining parameter.

BLS12 curves are a family indexed by an integer x; BLS12-381 takes
x = -0xd201000000010000 (low Hamming weight, for fast pairings).  Everything the
kernels need follows from it:

    r = x^4 - x^2 + 1                          (order of G1, G2: the scalar field Fr)
    p = (x - 1)^2 * r / 3 + x                  (the base field Fp, 381 bits)

Montgomery constants are for 32-bit limbs (what NVIDIA GPUs multiply natively):
R = 2^(32*limbs) mod q, R^2 mod q, and -q^-1 mod 2^32.  Fr's multiplicative group has
2-adicity 32; 7 generates it (the smallest generator, the same choice as arkworks and
bellman), so 7 serves both for roots of unity and as the coset shift of Groth16's H
computation.
"""

from __future__ import annotations

from dataclasses import dataclass

X = -0xD201000000010000

R_ORDER = X**4 - X**2 + 1
P_MOD = (X - 1) ** 2 * R_ORDER // 3 + X

assert (X - 1) ** 2 * R_ORDER % 3 == 0
assert P_MOD.bit_length() == 381 and R_ORDER.bit_length() == 255

LIMB_BITS = 32


@dataclass(frozen=True)
class MontgomeryField:
    """A prime field in Montgomery form over `limbs` 32-bit words."""

    name: str
    modulus: int
    limbs: int

    @property
    def bits(self) -> int:
        return self.limbs * LIMB_BITS

    @property
    def R(self) -> int:
        return (1 << self.bits) % self.modulus

    @property
    def R2(self) -> int:
        return (1 << (2 * self.bits)) % self.modulus

    @property
    def inv32(self) -> int:
        """-q^-1 mod 2^32: the per-limb factor of Montgomery reduction (CIOS)."""
        return (-pow(self.modulus, -1, 1 << LIMB_BITS)) % (1 << LIMB_BITS)

    def to_mont(self, a: int) -> int:
        return a * self.R % self.modulus

    def from_mont(self, a: int) -> int:
        return a * pow(self.R, -1, self.modulus) % self.modulus

    def limbs_of(self, a: int) -> list[int]:
        """Little-endian 32-bit words of a (0 <= a < 2^bits)."""
        mask = (1 << LIMB_BITS) - 1
        return [(a >> (LIMB_BITS * i)) & mask for i in range(self.limbs)]


FR = MontgomeryField("Fr", R_ORDER, 8)
FP = MontgomeryField("Fp", P_MOD, 12)


def _two_adicity(n: int) -> int:
    s = 0
    while n % 2 == 0:
        n //= 2
        s += 1
    return s


def _is_quadratic_non_residue(g: int, q: int) -> bool:
    """Euler's criterion.  For NTT roots that is all we need of a generator: if g is a
    non-residue and q - 1 = 2^s * m with m odd, then g^m has order exactly 2^s
    (its 2^(s-1)-th power is g^((q-1)/2) = -1)."""
    return pow(g, (q - 1) // 2, q) == q - 1


TWO_ADICITY = _two_adicity(R_ORDER - 1)
MULTIPLICATIVE_GENERATOR = 7
assert TWO_ADICITY == 32
assert _is_quadratic_non_residue(MULTIPLICATIVE_GENERATOR, R_ORDER)

#: Primitive 2^32-th root of unity in Fr.
ROOT_OF_UNITY = pow(MULTIPLICATIVE_GENERATOR, (R_ORDER - 1) >> TWO_ADICITY, R_ORDER)
assert pow(ROOT_OF_UNITY, 1 << (TWO_ADICITY - 1), R_ORDER) == R_ORDER - 1

#: Shift of the coset on which Groth16 evaluates a*b - c (where Z = X^n - 1 does not vanish).
COSET_GENERATOR = MULTIPLICATIVE_GENERATOR

#: Short Weierstrass coefficient of G1: y^2 = x^3 + 4 over Fp.
G1_B = 4


def root_of_unity(log_n: int) -> int:
    """Primitive 2^log_n-th root of unity in Fr."""
    if not 0 <= log_n <= TWO_ADICITY:
        raise ValueError(f"Fr has no 2^{log_n}-th roots of unity (2-adicity {TWO_ADICITY})")
    return pow(ROOT_OF_UNITY, 1 << (TWO_ADICITY - log_n), R_ORDER)
