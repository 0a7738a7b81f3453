"""The shipped profiles, and finding a profile by name or path.

Shipped profiles live inside the package (``simgpu/profile/profiles/*.toml``), so a
wheel install finds them from any directory.  A name also finds a profile the user
calibrated into ``./calibration/NAME.toml``; a path finds any file.
"""

from __future__ import annotations

from pathlib import Path

from simgpu.errors import UserError

#: Where the shipped profiles are (package data).
SHIPPED_DIR = Path(__file__).resolve().parent / "profiles"
#: Where `simgpu calibrate --out calibration/NAME.toml` puts a user's own, by convention.
USER_DIR = Path("calibration")
DEFAULT_PROFILE = "seed-rtx5070ti"


def shipped_profiles() -> list[Path]:
    """The profiles that ship with simgpu, by name."""
    return sorted(SHIPPED_DIR.glob("*.toml"))


def find_profile(name_or_path: str | None) -> Path:
    """A profile by path, by name among the shipped ones, or by name under ./calibration."""
    if not name_or_path:
        name_or_path = DEFAULT_PROFILE
    p = Path(name_or_path)
    if p.suffix == ".toml" or p.exists():
        return p
    for base in (SHIPPED_DIR, Path.cwd() / USER_DIR):
        cand = base / f"{name_or_path}.toml"
        if cand.exists():
            return cand
    known = ", ".join(x.stem for x in shipped_profiles())
    raise UserError(
        f"profile {name_or_path!r} not found (shipped: {known}; or ./calibration/NAME.toml, or a path)"
    )
