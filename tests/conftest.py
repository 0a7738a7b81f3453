"""Shared helpers: the hand-made tiny profile and a one-call prediction."""

from __future__ import annotations

import copy
import importlib.util
import os
import sys
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from simgpu.config import PipelineConfig, Workload
from simgpu.events import RunResult
from simgpu.model.sim import SimRuntime
from simgpu.profile import Profile, load_profile, profile_from_dict
from simgpu.prover.circuits import CircuitSpec
from simgpu.prover.memory_plan import prover_profile_dict
from simgpu.real.executor import ProverExecutor, ProverSettings
from simgpu.report.metrics import RunSummary, summarize
from simgpu.sched.registry import resolve_design

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parent.parent

# The property tests draw the same examples on every run (derived from each test's own
# source), so that a red CI is the change's and can be replayed, not the draw's: one
# design invariant once failed on a case a random draw met for the first time.  To
# search afresh, `SIMGPU_HYPOTHESIS=explore python3 -m pytest`; what it finds, pin
# with @example.
# The device machine has no hypothesis and runs only `pytest -m gpu`, which draws nothing.
try:
    from hypothesis import settings
except ImportError:
    settings = None
if settings is not None:
    settings.register_profile("replayable", derandomize=True, database=None)
    settings.register_profile("explore")
    settings.load_profile(os.environ.get("SIMGPU_HYPOTHESIS", "replayable"))


def load_experiment(name: str) -> ModuleType:
    """experiments/NAME.py as a module named NAME (registered, so that its dataclasses
    and the scripts it imports beside it find it)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "experiments" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


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


@pytest.fixture(autouse=True)
def _gpu_pool_given_back(request: pytest.FixtureRequest):
    """After each GPU test, give CuPy's cache of freed blocks back.  A large freed block
    that a later test's persistent array (a key's constants, an NTT's tables) is carved
    from stays in the pool, split, and a later VRAM cap counts its free part as room:
    test_groth16_gpu's cap test then met no VramExhausted, once after test_transfer_gpu
    (whose own fixture this was).  Blocks split within one test stay all the same: the
    cap test fills them first (its _fill_split_blocks)."""
    yield
    if request.node.get_closest_marker("gpu") is not None and gpu_available():
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()


# --------------------------------------------------------------------- the real prover (CPU)

#: The circuit the CPU-backend tests prove: 64 constraints, milliseconds a stage.
SPEC = CircuitSpec(log_constraints=6)


def make_executor(keys_dir, vram_limit=None) -> ProverExecutor:
    """The real prover on the CPU backend, keys cached in `keys_dir`."""
    return ProverExecutor(
        SPEC,
        ProverSettings(
            backend="cpu", partition_workers=2, b_g2_threads=1, keys_dir=keys_dir, vram_limit=vram_limit
        ),
    )


def sim_run(ex, design, vram=None, **config):
    """The model of this very prover: footprints from its memory plan, VRAM as measured."""
    hw = ex.hardware() | {"vram_resident": ex.baseline[0]}
    if vram is not None:
        hw["vram"] = vram
    data = prover_profile_dict(
        ex.plan,
        name="cpu-prover",
        hardware=hw,
        workload={"name": "w", "partitions": 2, "constraints": SPEC.constraints},
        times={"kernels": {"h_msm": 0.01}},
    )
    prof = profile_from_dict(data)
    # the model books the plan's resident buffers on top of the measured baseline, which
    # already holds them: take them back out
    data["hardware"]["vram_resident"] = ex.baseline[0]
    prof = profile_from_dict(data)
    cfg = PipelineConfig(proofs=2, concurrency=2, partition_workers=2).with_overrides(**config)
    fn = design if callable(design) else resolve_design(design).fn
    return SimRuntime(prof, cfg, prof.workload()).run(fn)
