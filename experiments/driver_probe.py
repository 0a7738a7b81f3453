"""What slows the driver's stages in a pipeline: each stage timed alone and beside one
kind of load at a time, on the real prover (issue #19).

In the validated pipelines the driver's stages ran slower than `simgpu calibrate` timed
them alone: at 2^22 prep 186-253 ms against 157, prestage 120-152 against 92.  A pipeline
runs several things beside each stage at once; this probe runs one at a time, so that
each stage's slowdown can be put on the resource it shares:

    none        nothing else
    synth:K     K syntheses looping in worker processes, compute only (cores, memory)
    handoff:K   K driver threads looping synthesis + receive (a partition worker's
                life without prep: results mapped into this process, then dropped)
    worker:K    K driver threads looping synthesis + receive + prep (partition workers)
    prep:K      K driver threads looping prep on one witness
    gpu:K       K driver threads looping prestage + kernels (other GPU workers)
    spin:K      K driver threads looping pure Python (the interpreter lock only)
    membw:K     K processes streaming memory (host memory bandwidth only)

Targets, each on real data (the epilogue's proof is verified): prep (a reused witness),
prep_fresh and prestage (a witness just received, its pages never touched, as in a
pipeline), kernels, b_g2_msm, epilogue.

    python experiments/driver_probe.py --constraints 2^22 --json out/driver-probe.json \
        --loads none worker:1 worker:2 worker:4 gpu:1
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from simgpu.calibrate.measure import _loop, _stream, _synth_task
from simgpu.units import parse_count
from simgpu.workers import pool_of

TARGETS = ("prep", "prep_fresh", "prestage", "kernels", "b_g2_msm", "epilogue")
LOADS = ("none", "synth:8", "handoff:8", "prep:1", "gpu:1", "spin:1", "membw:8")


def _spin() -> None:
    x = 0
    for i in range(50_000):
        x += i * i % 7


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--constraints", default="2^22")
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--pool", type=int, default=9, help="the executor's synthesis processes")
    ap.add_argument("--circuit", default="porep")
    ap.add_argument("--b-g2-on", default="gpu")
    ap.add_argument("--b-g2-threads", type=int, default=8)
    ap.add_argument("--backend", default="cupy")
    ap.add_argument("--json", default="out/driver-probe.json")
    ap.add_argument("--loads", nargs="*", default=list(LOADS))
    args = ap.parse_args()

    from simgpu.real.executor import HostData, ProverExecutor, ProverSettings
    from simgpu.sched.work import Partition, Proof

    n = parse_count(args.constraints, "--constraints", 1)
    settings = ProverSettings(
        backend=args.backend,
        partition_workers=args.pool,
        b_g2_threads=args.b_g2_threads,
        b_g2_on=args.b_g2_on,
        circuit=args.circuit,
    )
    t = time.perf_counter()
    ex = ProverExecutor(settings.spec(n), settings)
    print(f"set up 2^{n.bit_length() - 1} in {time.perf_counter() - t:.1f} s", flush=True)
    seq = iter(range(10_000, 10**9))

    def partition() -> Partition:
        return Partition(Proof(next(seq), 1, n), 0, n)

    def synthesized() -> tuple[Partition, Any]:
        part = partition()
        host = ex.run_stage("synthesis", part, None, {})
        return part, host.synth

    base_part, base_synth = synthesized()

    def prep_on(synth: Any) -> Partition:
        part = partition()
        part.host = HostData(synth=synth)
        ex.run_stage("prep", part, None, {})
        return part

    template = prep_on(base_synth).host.prepared  # its a, b, c refilled for each prestage

    def prepared_part() -> Partition:
        part = partition()
        part.host = HostData(
            prepared=dataclasses.replace(template, a=base_synth.a, b=base_synth.b, c=base_synth.c)
        )
        return part

    # --- loads: each a callable run in a loop on background threads (or a process pool)
    stop = threading.Event()

    def pooled(k: int, fn: Callable[..., Any], args_of: Callable[[int], tuple], init: Any = None) -> Any:
        """A loop keeping k calls of fn in flight in a process pool of k, and its cleanup."""
        ctx = pool_of(k, *init) if init else pool_of(k)
        pool = ctx.__enter__()
        futures: list[Any] = []

        def loop() -> None:
            while len(futures) < k:
                futures.append(pool.submit(fn, *args_of(len(futures))))
            futures.pop(0).result()

        def cleanup() -> None:
            for f in futures:
                f.result()
            ctx.__exit__(None, None, None)

        return pool, loop, cleanup

    def load_threads(spec: str) -> tuple[list[threading.Thread], list[BaseException], Callable[[], None]]:
        name, _, count = spec.partition(":")
        k = int(count or 1)
        errors: list[BaseException] = []
        cleanup: Callable[[], None] = lambda: None  # noqa: E731
        if name == "synth":
            pool, loop, cleanup = pooled(
                k, _synth_task, lambda i: (args.circuit, n, i), (_synth_task, (args.circuit, n, 0))
            )
            fns = [loop]
        elif name == "handoff":

            def handoff_loop() -> None:
                _, synth = synthesized()
                del synth

            fns = [handoff_loop] * k
        elif name == "worker":

            def worker_loop() -> None:
                _, synth = synthesized()
                prep_on(synth).host.free()
                del synth

            fns = [worker_loop] * k
        elif name == "prep":
            fns = [lambda: prep_on(base_synth)] * k
        elif name == "gpu":

            def gpu_loop() -> None:
                part = prepared_part()
                buffers = ex.run_stage("prestage", part, 0, {})
                ex.run_stage("kernels", part, 0, {"buffers": buffers})
                buffers.free()

            fns = [gpu_loop] * k
        elif name == "spin":
            fns = [_spin] * k
        elif name == "membw":
            pool, loop, cleanup = pooled(k, _stream, lambda i: (256 << 20, 0.5))
            fns = [loop]
        else:
            raise SystemExit(f"unknown load {spec!r}")
        threads = []
        for i, fn in enumerate(fns):
            started = threading.Event()
            th = threading.Thread(
                target=_loop, args=(fn, stop, started, errors), name=f"{name}{i}", daemon=True
            )
            th.start()
            threads.append((th, started))
        for _, started in threads:
            started.wait()
        return [th for th, _ in threads], errors, cleanup

    def chain() -> dict[str, float]:
        """One fresh partition through every target, as a pipeline runs it (a witness just
        received, its pages untouched), each stage timed with the device synchronised;
        and prep once more on a witness whose pages are warm."""
        out: dict[str, float] = {}
        dev = ex.backends[0]

        def timed(key: str, stage: str, part: Partition, device: int | None, **inputs: Any) -> Any:
            dev.synchronize()
            t = time.perf_counter()
            r = ex.run_stage(stage, part, device, inputs)
            out[key] = time.perf_counter() - t
            return r

        warm = partition()
        warm.host = HostData(synth=base_synth)
        timed("prep", "prep", warm, None)
        warm.host.free()
        part, synth = synthesized()
        part.host = HostData(synth=synth)
        del synth
        timed("prep_fresh", "prep", part, None)
        buffers = timed("prestage", "prestage", part, 0)
        timed("kernels", "kernels", part, 0, buffers=buffers)
        buffers.free()
        timed("b_g2_msm", "b_g2_msm", part, 0 if args.b_g2_on == "gpu" else None)
        timed("epilogue", "epilogue", part, None)  # raises ProofInvalid unless it verifies
        part.host.free()
        return out

    chain()  # warm
    results: dict[str, dict[str, list[float]]] = {}
    for load in args.loads:
        stop.clear()
        threads, errors, cleanup = ([], [], lambda: None) if load == "none" else load_threads(load)
        samples: dict[str, list[float]] = {k: [] for k in TARGETS}
        try:
            time.sleep(0.3)  # the load's steady state
            for _ in range(args.repeats):
                if errors:
                    raise errors[0]
                for k, v in chain().items():
                    samples[k].append(v)
        finally:
            stop.set()
            for th in threads:
                th.join()
            cleanup()
        if errors:
            raise errors[0]
        results[load] = samples
        print(
            f"{load:8s} " + " ".join(f"{k} {statistics.median(v) * 1e3:7.1f}" for k, v in samples.items()),
            flush=True,
        )
    ex.close()
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"constraints": n, "ms": results}, indent=1))
    base = {k: statistics.median(v) for k, v in results.get("none", {}).items()}
    print("\nmedian ms, and the ratio to the stage alone")
    print(f"{'load':8s} " + " ".join(f"{k:>16s}" for k in TARGETS))
    for load, samples in results.items():
        cells = []
        for k in TARGETS:
            m = statistics.median(samples[k])
            cells.append(f"{m * 1e3:8.1f} x{m / base[k]:5.2f}" if base else f"{m * 1e3:8.1f}")
        print(f"{load:8s} " + " ".join(f"{c:>16s}" for c in cells))


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
