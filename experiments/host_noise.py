"""Where does a calibration's repeat-to-repeat noise come from?  (issue: calibrate)

On the H200 machines (virtual machines on shared hosts) some calibration repeats run a
CPU stage up to 2x slower than the others: the epilogue, whose work does not depend on
the circuit, took 4.4 ms in most repeats and 8.1 ms in a few, all eight samples of a
repeat alike.  This script runs calibrate's sequence of stages at one size and, around
each timed stage, reads what else the machine did meanwhile:

- steal: CPU time the hypervisor gave to other guests (/proc/stat), over all cores;
- this process's other threads and its worker processes (CPU seconds, /proc);
- calibrate's fixed pure-Python reference loop, timed beside the epilogue samples.

If slow repeats coincide with steal, or with the reference loop slowing down as well,
the noise is the host's and no cost law should fit it; if with our own threads or
workers, it is the prover's.

    python experiments/host_noise.py [--size 2^20] [--repeats 6] [--out out/host_noise.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
from pathlib import Path

import numpy as np

from simgpu.calibrate.measure import reference_seconds
from simgpu.prover import groth16
from simgpu.prover.circuits import CircuitSpec
from simgpu.real.executor import ProverExecutor, ProverSettings
from simgpu.units import parse_count

SAMPLES = 8


def _proc_stat() -> dict[str, int]:
    """Jiffies over all cores: busy (user+nice+system+irq+softirq), idle (+iowait), steal."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return {"busy": user + nice + system + irq + softirq, "idle": idle + iowait, "steal": steal}


def _cpu_of(pid: int) -> float:
    """CPU seconds (user + system) of one process, all its threads."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
        return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def _children() -> list[int]:
    me = os.getpid()
    out = []
    for task in os.listdir("/proc"):
        if task.isdigit():
            try:
                with open(f"/proc/{task}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                        out.append(int(task))
            except OSError:
                pass
    return out


class Window:
    """What the machine did while one stage ran."""

    def __init__(self) -> None:
        self.stat0 = _proc_stat()
        self.kids = _children()
        self.kid0 = {p: _cpu_of(p) for p in self.kids}
        self.me0 = _cpu_of(os.getpid())
        self.th0 = time.thread_time()
        self.t0 = time.perf_counter()

    def close(self) -> dict[str, float]:
        wall = time.perf_counter() - self.t0
        th = time.thread_time() - self.th0
        me = _cpu_of(os.getpid()) - self.me0
        s1 = _proc_stat()
        d = {k: s1[k] - self.stat0[k] for k in s1}
        total = max(1, sum(d.values()))
        return {
            "wall_ms": 1e3 * wall,
            "thread_cpu_ms": 1e3 * th,
            "other_threads_cpu_ms": 1e3 * max(0.0, me - th),
            "workers_cpu_ms": 1e3 * sum(_cpu_of(p) - self.kid0[p] for p in self.kids),
            "steal_share": d["steal"] / total,
            "busy_share": d["busy"] / total,
        }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="2^20")
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--backend", default="cupy")
    ap.add_argument("--out", default="out/host_noise.json")
    args = ap.parse_args()
    n = parse_count(args.size, "--size", 16)
    settings = ProverSettings(backend=args.backend)
    spec = CircuitSpec(constraints=n)
    ex = ProverExecutor(spec, settings)
    backend = ex.backends[0]
    rows = []
    try:
        ex.pool().submit(groth16.synthesize, spec, 999).result()
        print(f"threads in this process at start: {threading.active_count()}, workers: {len(_children())}")
        for rep in range(args.repeats):
            row: dict[str, object] = {"repeat": rep}
            w = Window()
            synth = ex.pool().submit(groth16.synthesize, spec, 1000 + rep).result()
            row["synthesis"] = w.close()
            w = Window()
            prepared = groth16.prep(synth, ex.pk)
            row["prep"] = w.close()
            w = Window()
            buffers = groth16.prestage(prepared, backend)
            backend.synchronize()
            row["prestage"] = w.close()
            w = Window()
            out = groth16.kernels(prepared, ex.pk, backend, buffers)
            backend.synchronize()
            row["kernels"] = w.close()
            buffers.free()
            w = Window()
            g2 = ex.g2.msm(prepared, settings.b_g2_threads)
            row["b_g2_msm"] = w.close()
            rng = np.random.default_rng(rep)
            samples, refs = [], []
            for _ in range(SAMPLES):
                w = Window()
                proof = groth16.epilogue(prepared, ex.pk, out, g2, rng)
                if not groth16.verify(ex.vk, prepared.public_inputs, proof):
                    raise RuntimeError("proof does not verify")
                samples.append(w.close())
                refs.append(1e3 * reference_seconds())
            row["epilogue"] = samples
            row["reference_ms"] = refs
            rows.append(row)
            ep = [s["wall_ms"] for s in samples]
            steal = 100 * statistics.mean(s["steal_share"] for s in samples)
            print(
                f"repeat {rep}: epilogue {statistics.median(ep):.2f} ms (thread cpu "
                f"{statistics.median(s['thread_cpu_ms'] for s in samples):.2f}), reference "
                f"{statistics.median(refs):.2f} ms, steal {steal:.1f}%, "
                f"other threads {sum(s['other_threads_cpu_ms'] for s in samples):.1f} ms, "
                f"workers {sum(s['workers_cpu_ms'] for s in samples):.1f} ms | b_g2 "
                f"{row['b_g2_msm']['wall_ms']:.0f} ms steal {100 * row['b_g2_msm']['steal_share']:.1f}%"
            )
    finally:
        ex.close()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"size": n, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
