"""The wheel is what a user installs: it must carry the profiles and the kernels' sources.

An editable install reads everything from the checkout, so a file left out of the
package data only shows once simgpu is installed from its wheel.  This test builds the
wheel, installs it alone into a fresh directory (its dependencies come from the test's
own environment), and runs the shipped default from a directory that is not the
checkout.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _backend_here() -> bool:
    """Whether this environment's setuptools can build the wheel itself (70.1 has bdist_wheel)."""
    if importlib.util.find_spec("setuptools") is None:
        return False
    from importlib.metadata import version

    major, minor = (int(x) for x in version("setuptools").split(".")[:2])
    return (major, minor) >= (70, 1) or importlib.util.find_spec("wheel") is not None


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # From a copy of what a clone holds: a build/ left in the checkout would put files the
    # package data misses into the wheel all the same.
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(
        ROOT / "simgpu", src / "simgpu", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    out = tmp_path_factory.mktemp("wheel")
    cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(src)]
    if _backend_here():
        cmd.insert(5, "--no-build-isolation")  # no network needed when the backend is here
    subprocess.run(cmd, check=True, capture_output=True, timeout=600)
    (whl,) = out.glob("simgpu-*.whl")
    return whl


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return target


def _simgpu(installed: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(installed)}
    return subprocess.run(
        [sys.executable, "-m", "simgpu.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_wheel_carries_the_profiles_and_the_kernel_sources(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {p.relative_to(ROOT).as_posix() for p in (ROOT / "simgpu/profile/profiles").glob("*.toml")}
    sources = {p.relative_to(ROOT).as_posix() for p in (ROOT / "simgpu/gpu").glob("*.cu*")}
    assert shipped and sources
    assert shipped <= names, shipped - names
    assert sources <= names, sources - names
    assert not any(n.startswith(("tests/", "experiments/", "benchmarks/")) for n in names)


def test_the_installed_wheel_runs_the_shipped_default_outside_the_checkout(
    installed: Path, tmp_path: Path
) -> None:
    where = subprocess.run(
        [sys.executable, "-c", "import simgpu; print(simgpu.__file__)"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(installed)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(installed), where

    listed = _simgpu(installed, tmp_path, "profiles")
    assert listed.returncode == 0, listed.stderr
    for profile in (ROOT / "simgpu/profile/profiles").glob("*.toml"):
        assert profile.stem in listed.stdout

    predicted = _simgpu(installed, tmp_path, "predict", "--json", "--runs", "1")
    assert predicted.returncode == 0, predicted.stderr
    assert '"schema": "simgpu.report/1"' in predicted.stdout
    assert '"profile": "seed-rtx5070ti"' in predicted.stdout
