"""Where the real prover's device pool peaks: every allocation's used bytes, and at each
new peak what the prover's own records hold, what they do not, and who allocated.

    python experiments/vram_peak_probe.py --json out/vram-probe.json -- run --backend cupy ...

Wraps CuPy's allocator (process-wide) around the default pool, so it sees allocations
made outside the prover's named buffers too (kernel temporaries, CuPy's own scratch).
At each new maximum of the pool's used bytes in a thread other than the main one
(the run's GPU workers, not the key setup and warm-up) it stores: the bytes the named buffers
account for, their holders (simgpu.prover.device.LiveBuffers), the allocating thread
and the innermost simgpu frames.  The difference, used less named, is what the memory
plan cannot see.  Issue #19's peak-VRAM under-count is what this was written for.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import traceback
from typing import Any

MiB = 1 << 20
KEYS = ("worker", "proof", "partition", "buffer", "bytes", "stage")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("args", nargs=argparse.REMAINDER, help="-- then the simgpu command")
    a = ap.parse_args()
    argv = a.args[1:] if a.args[:1] == ["--"] else a.args

    import cupy as cp

    from simgpu.prover import device as device_mod

    registry: list[Any] = []
    original_init = device_mod.LiveBuffers.__init__

    def init(self: Any) -> None:
        original_init(self)
        registry.append(self)

    device_mod.LiveBuffers.__init__ = init  # type: ignore[method-assign]
    pool = cp.get_default_memory_pool()
    lock = threading.Lock()
    state: dict[str, Any] = {"peak": 0, "snapshots": [], "allocs": 0}

    def alloc(size: int) -> Any:
        mem = pool.malloc(size)
        used = int(pool.used_bytes())
        state["allocs"] += 1
        # the run's peaks only: the key setup and warm-up allocate on the main thread
        if used > state["peak"] and threading.current_thread() is not threading.main_thread():
            with lock:
                if used > state["peak"]:
                    state["peak"] = used
                    holders = [h for live in registry for h in live.holders()]
                    named = sum(int(h.get("bytes", 0)) for h in holders)
                    frames = [
                        f"{f.filename.split('simgpu/')[-1]}:{f.lineno} {f.name}"
                        for f in traceback.extract_stack()[:-1]
                        if "simgpu" in f.filename
                    ][-6:]
                    state["snapshots"].append(
                        {
                            "used_mib": used / MiB,
                            "named_mib": named / MiB,
                            "unnamed_mib": (used - named) / MiB,
                            "request_mib": size / MiB,
                            "thread": threading.current_thread().name,
                            "frames": frames,
                            "holders": [{k: h.get(k) for k in KEYS} for h in holders],
                        }
                    )
        return mem

    cp.cuda.set_allocator(alloc)
    from simgpu.cli import main as simgpu_main

    rc = simgpu_main(argv)
    snaps = state["snapshots"]
    with open(a.json, "w") as f:
        json.dump({"argv": argv, "rc": rc, "allocs": state["allocs"], "snapshots": snaps}, f, indent=1)
    last = snaps[-1] if snaps else None
    if last:
        print(
            f"peak {last['used_mib']:.0f} MiB: named {last['named_mib']:.0f}, "
            f"unnamed {last['unnamed_mib']:.0f}; thread {last['thread']}; at {last['frames'][-2:]}",
            file=sys.stderr,
        )
        for h in sorted(last["holders"], key=lambda h: -(h["bytes"] or 0))[:8]:
            print(f"   {h}", file=sys.stderr)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
