"""How long Python's cyclic collector holds the driver, with and without set-up frozen.

The collector runs holding the interpreter lock, on whichever thread allocated last, and
a full pass (generation 2) visits every object it tracks; every GPU worker's launch loop
stands still through it.  simgpu.real.executor freezes what set-up leaves (gc.freeze)
unless SIMGPU_GC_AS_USUAL is set.  This runs `simgpu run` in this process, both ways,
and prints each generation's passes during the run (after set-up): how many, the
longest, their sum, and the objects the collector tracks at the end.

    python experiments/collector_pauses.py --constraints 2^16 --backend cpu
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from typing import Any

from simgpu.real.executor import GC_AS_USUAL_ENV


class Passes:
    """Every pass of the collector while installed, once the executor's set-up is done
    (its own last collection, before it freezes, is set-up's): (seconds, generation)."""

    def __init__(self) -> None:
        self.rows: list[tuple[float, int]] = []
        self._began = 0.0
        self.run_began: float | None = None

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        elif self.run_began is not None and self._began >= self.run_began:
            self.rows.append((time.perf_counter() - self._began, info["generation"]))


def one_run(argv: list[str], frozen: bool) -> tuple[Passes, int]:
    """`simgpu run ARGV` in this process; (its collector passes, objects tracked at the end)."""
    from simgpu.cli import main
    from simgpu.real import executor

    if frozen:
        os.environ.pop(GC_AS_USUAL_ENV, None)
    else:
        os.environ[GC_AS_USUAL_ENV] = "1"
    gc.collect()
    passes = Passes()
    real = executor._freeze_setup

    def set_up_done() -> bool:
        out = real()
        passes.run_began = time.perf_counter()
        return out

    executor._freeze_setup = set_up_done
    gc.callbacks.append(passes)
    sys.argv = ["simgpu", "run", *argv]
    try:
        main()
    except SystemExit as e:
        if e.code not in (0, None):
            raise
    finally:
        gc.callbacks.remove(passes)
        executor._freeze_setup = real
    return passes, len(gc.get_objects())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--constraints", default="2^16")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--proofs", default="4")
    args = ap.parse_args()
    argv = [
        "--backend", args.backend, "--constraints", args.constraints, "--partitions", "4", "-n", args.proofs,
        "-j", "2", "--gpu-workers", "2", "--partition-workers", "2", "--circuit", "porep",
    ]  # fmt: skip
    rows = []
    for frozen in (False, True):
        passes, tracked = one_run(argv, frozen)
        rows.append((frozen, passes, tracked))
    print("| set-up | generation | passes | longest ms | sum ms | objects tracked at the end |")
    print("|---|---:|---:|---:|---:|---:|")
    for frozen, passes, tracked in rows:
        for g in (0, 1, 2):
            xs = [s for s, gen in passes.rows if gen == g]
            if xs:
                way = "frozen" if frozen else "as usual"
                print(
                    f"| {way} | {g} | {len(xs)} | {max(xs) * 1e3:.1f} | {sum(xs) * 1e3:.1f} | {tracked:,} |"
                )


if __name__ == "__main__":
    main()
