"""Sizes, counts and ladders as a user writes them: 16G, 12.5GB, 2^27, 2^14..2^22.

One reading everywhere: a flag, a cuzk TOML key and a profile's size all go through
`parse_size`, so "16G" means the same bytes in each.
"""

from __future__ import annotations

import math
import re

from simgpu.errors import UserError

_UNITS = {
    "": 1,
    "b": 1,
    # A bare K/M/G/T is binary: "16G" on a GPU spec sheet means GiB.  KB/MB/GB/TB are SI.
    "k": 1 << 10,
    "kb": 1000,
    "m": 1 << 20,
    "mb": 1000**2,
    "g": 1 << 30,
    "gb": 1000**3,
    "t": 1 << 40,
    "tb": 1000**4,
    "ki": 1 << 10,
    "kib": 1 << 10,
    "mi": 1 << 20,
    "mib": 1 << 20,
    "gi": 1 << 30,
    "gib": 1 << 30,
    "ti": 1 << 40,
    "tib": 1 << 40,
}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*$", re.IGNORECASE)
_POW = re.compile(r"^\s*([0-9]+)\s*\^\s*([0-9]+)\s*$")


#: No size or count simgpu reads is larger than this (2^80: far beyond any machine).
MAX_SIZE = 1 << 80


def _value(text: str | int | float, what: str) -> float | int:
    """The number `text` stands for, exact where it is a whole number."""
    if isinstance(text, bool):
        raise UserError(f"{what}: expected a size, got {text!r}")
    if isinstance(text, int | float):
        if not math.isfinite(text) or text < 0:
            raise UserError(f"{what}: must be a non-negative finite number, got {text!r}")
        value: float | int = text
    else:
        s = str(text).strip()
        if s.startswith("-"):
            raise UserError(f"{what}: must not be negative, got {text!r}")
        m = _POW.match(s)
        if m:
            base, exp = int(m.group(1)), int(m.group(2))
            if exp > 80:
                raise UserError(f"{what}: {text!r} is too large")
            value = base**exp
        else:
            m = _SIZE.match(s)
            if not m or m.group(2).lower() not in _UNITS:
                raise UserError(f"{what}: cannot parse {text!r} (examples: 16G, 16GiB, 12.5GB, 512MiB, 2^27)")
            number = m.group(1)
            unit = _UNITS[m.group(2).lower()]
            value = int(number) * unit if number.isdigit() else float(number) * unit
    if value > MAX_SIZE:
        raise UserError(f"{what}: {text!r} is too large (at most 2^80)")
    return value


def parse_size(text: str | int | float, what: str = "size") -> int:
    """Bytes (or a count) from '16G', '16GiB', '12.5GB', '2^27', '512MiB', 1024.

    A bare K/M/G/T is binary ('16G' is 16 GiB, as on GPU spec sheets); 'GB' is 10^9.
    Negative, infinite, empty, unparsable or absurdly large input raises UserError naming
    `what`.
    """
    return int(round(_value(text, what)))


def parse_count(text: str | int, what: str, minimum: int = 0) -> int:
    """A whole count that may be written as 2^20 or 1M (not 1.5); must be >= minimum."""
    value = _value(text, what)
    if isinstance(value, float) and not value.is_integer():
        raise UserError(f"{what}: must be a whole number, got {text!r}")
    n = int(value)
    if n < minimum:
        raise UserError(f"{what}: must be at least {minimum}, got {text!r}")
    return n


def size_ladder(text: str, flag: str = "--sizes") -> list[int]:
    """'2^14..2^22' (every other power of two), '2^14..2^22:1' (every power), or a list
    '2^14,2^16,100000'; `flag` names the option in an error."""
    if ".." in text:
        lo_s, _, rest = text.partition("..")
        hi_s, _, step_s = rest.partition(":")
        lo, hi = parse_count(lo_s, flag, 16), parse_count(hi_s, flag, 16)
        step = int(step_s) if step_s.isdigit() else 0 if step_s else 2
        if lo & (lo - 1) or hi & (hi - 1) or hi < lo or step < 1:
            raise UserError(f"{flag} {text!r}: give powers of two, low..high[:step]")
        return [1 << e for e in range(lo.bit_length() - 1, hi.bit_length(), step)]
    return sorted({parse_count(x, flag, 16) for x in text.split(",")})
