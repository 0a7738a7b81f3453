"""Finding a design by name, or loading a user's own from a Python file."""

from __future__ import annotations

import importlib.util
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from simgpu.errors import UserError
from simgpu.sched import designs

DesignFn = Callable[..., object]


@dataclass(frozen=True)
class Design:
    """A design ready to run: its name, its generator function (rt, worker, part), the first
    paragraph of its docstring, and where it came from ("builtin" or the user's file)."""

    name: str
    fn: DesignFn
    summary: str
    source: str = "builtin"

    @property
    def label(self) -> str:
        """How reports name it: a shipped design by name, a user's by file:name."""
        return self.name if self.source == "builtin" else f"{self.source}:{self.name}"


def _summary(fn: DesignFn) -> str:
    doc = inspect.getdoc(fn) or ""
    first = doc.split("\n\n", 1)[0].replace("\n", " ").strip()
    return first


BUILTIN: dict[str, DesignFn] = {
    "serial": designs.serial,
    "single-lock": designs.single_lock,
    "two-lock": designs.two_lock,
    "two-lock-reserve": designs.two_lock_reserve,
    "split-finalizer": designs.split_finalizer,
}


def builtin_designs() -> list[Design]:
    """The shipped designs, in BUILTIN's order."""
    return [Design(name, fn, _summary(fn)) for name, fn in BUILTIN.items()]


def _load_file(path: Path, attr: str, ref: str) -> Design:
    if not path.is_file():
        raise UserError(f"design file not found: {path}")
    modname = f"simgpu_user_design_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None or spec.loader is None:
        raise UserError(f"cannot load design file {path} (is it a .py file?)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the user's file: any error is theirs, reported in one line
        del sys.modules[modname]
        raise UserError(f"design file {path} failed to load: {type(e).__name__}: {e}") from None
    fn = getattr(module, attr, None)
    if fn is None:
        raise UserError(f"design file {path} has no {attr!r}")
    if not inspect.isgeneratorfunction(fn):
        raise UserError(f"{ref}: {attr} must be a generator function design(rt, worker, part) that yields")
    params = list(inspect.signature(fn).parameters)
    if len(params) < 3:
        raise UserError(f"{ref}: {attr} must take (rt, worker, part)")
    return Design(attr, fn, _summary(fn) or f"user design from {path.name}", str(path))


def resolve_design(ref: str) -> Design:
    """'two-lock' (a shipped design) or 'path/to/file.py:name' (a user's)."""
    if ref in BUILTIN:
        fn = BUILTIN[ref]
        return Design(ref, fn, _summary(fn))
    if ":" in ref:
        file, _, attr = ref.rpartition(":")
        if file.endswith(".py") and attr:
            return _load_file(Path(file), attr, ref)
    if ref.endswith(".py"):
        raise UserError(f"design {ref!r}: say which function, as {ref}:name")
    known = ", ".join(BUILTIN)
    raise UserError(f"unknown design {ref!r} (known: {known}; or path/to/file.py:name)")
