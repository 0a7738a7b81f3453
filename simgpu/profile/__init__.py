"""Profiles: what a machine + prover costs, as laws in the partition size.

laws (the one evaluator, and fitting) -> schema (a profile's tables, checked as it
loads) -> resolve (the profile at one size: seconds, bytes, each stage's plan) ->
catalog (the shipped profiles, and finding one by name).
"""

from simgpu.profile.catalog import DEFAULT_PROFILE, SHIPPED_DIR, find_profile, shipped_profiles
from simgpu.profile.laws import Law, PointsLaw, fit_law
from simgpu.profile.resolve import Resolved, ResolvedPhase, ResolvedStage, Use
from simgpu.profile.schema import (
    DEVICE_RESOURCES,
    HOST_RESOURCES,
    STAGES,
    Hardware,
    Phase,
    Profile,
    StageSpec,
    Thrashing,
    UseLaw,
    load_profile,
    profile_from_dict,
)

__all__ = [
    "DEFAULT_PROFILE",
    "DEVICE_RESOURCES",
    "HOST_RESOURCES",
    "SHIPPED_DIR",
    "STAGES",
    "Hardware",
    "Law",
    "Phase",
    "PointsLaw",
    "Profile",
    "Resolved",
    "ResolvedPhase",
    "ResolvedStage",
    "StageSpec",
    "Thrashing",
    "Use",
    "UseLaw",
    "find_profile",
    "fit_law",
    "load_profile",
    "profile_from_dict",
    "shipped_profiles",
]
