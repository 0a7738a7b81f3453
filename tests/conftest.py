"""Shared helpers: the hand-made tiny profile and a one-call prediction."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path
from typing import Any

import pytest

from simgpu.config import PipelineConfig
from simgpu.events import RunResult
from simgpu.model.sim import SimRuntime
from simgpu.profile import Profile, load_profile, profile_from_dict
from simgpu.report.metrics import RunSummary, summarize
from simgpu.sched.registry import resolve_design

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parent.parent


def tiny_profile(**sections: dict[str, Any]) -> Profile:
    """tests/data/tiny.toml, with some keys replaced: tiny_profile(hardware={"vram": "4GiB"})."""
    raw = tomllib.loads((DATA / "tiny.toml").read_text())
    data = copy.deepcopy(raw)
    for section, values in sections.items():
        target = data
        for part in section.split("."):
            target = target.setdefault(part, {})
        target.update(values)
    return profile_from_dict(data, "tiny")


def seed_profile() -> Profile:
    return load_profile(ROOT / "simgpu" / "profile" / "profiles" / "seed-rtx5070ti.toml")


def simulate(profile: Profile, design: str, seed: int = 0, **config: Any) -> tuple[RunResult, RunSummary]:
    """Run the daemon once on the model: (raw result, its metrics)."""
    cfg = PipelineConfig().with_overrides(**config)
    wl = profile.workload()
    if cfg.partitions or cfg.constraints:
        from simgpu.config import Workload

        wl = Workload(wl.name, cfg.partitions or wl.partitions, cfg.constraints or wl.constraints)
    rt = SimRuntime(profile, cfg, wl, seed=seed)
    result = rt.run(resolve_design(design).fn)
    return result, summarize(result)


def gpu_available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """GPU tests skip cleanly where there is no CUDA device (CI)."""
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA and CuPy (run with `pytest -m gpu` on a GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
