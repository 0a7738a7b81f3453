"""The scheduler code must run unchanged on any runtime: it imports no simpy, threading,
multiprocessing or cupy, and nothing from the runtimes that implement it."""

from __future__ import annotations

import ast
from pathlib import Path

import simgpu.sched

FORBIDDEN = {"simpy", "threading", "multiprocessing", "concurrent", "cupy", "asyncio", "time"}
FORBIDDEN_INTERNAL = ("simgpu.model", "simgpu.real")


def test_sched_imports_no_runtime():
    root = Path(simgpu.sched.__file__).parent
    for path in root.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] not in FORBIDDEN, f"{path.name} imports {name}"
                assert not name.startswith(FORBIDDEN_INTERNAL), f"{path.name} imports {name}"
