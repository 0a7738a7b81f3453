"""b_g2_msm beside the next worker's prestage, with one crew of staging copiers for the
process or one per thread (issue #19, item 4; simgpu.gpu.transfer).

In the pipeline a worker's b_g2_msm starts as the next worker's prestage does (the lock
passes between them).  Both pack their uploads into page-locked blocks with copier
threads.  With one crew for the process b_g2_msm's uploads wait for the prestage's.  This
times, on one partition and interleaved, b_g2_msm:

  alone          nothing beside it
  shared         beside one prestage, one crew for the process (SIMGPU_SHARED_COPIERS)
  own            beside one prestage, a crew per thread (the prover's default)
  shared+k, own+k  the same, the prestage followed by that partition's kernels, as in
                 the pipeline

and for each its time to its first upload and to its first stream synchronize (the
host stretch before it first waits for the device).  Every b_g2_msm result must equal
the alone one, and at the smallest size the CPU's (arkworks) too.  The side worker is one
long-lived thread, as a GPU worker is.

`--predict PROFILE --json FILE` plays the same scenes in the model's runtime (no GPU): the
b_g2_msm stage started with the other worker's prestage (and kernels), each case's
prediction (the mean of SEEDS runs of the model) beside the measured median.

    python experiments/copier_ab.py --sizes 2^20 2^22 --repeats 8 --json out/copier-ab.json
    python experiments/copier_ab.py --predict docs/data/h100-2026-12-05/call1/h100-cupy-key.toml \
        --json docs/data/h100-2026-12-05/ab/copier-ab.json
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import queue
import statistics
import threading
import time
from typing import Any

import numpy as np

from simgpu.gpu import transfer
from simgpu.profile import find_profile, load_profile
from simgpu.prover import groth16
from simgpu.real.executor import ProverExecutor, ProverSettings
from simgpu.sched.work import Partition, Proof
from simgpu.units import parse_size

#: Monte Carlo runs of each scene in the model (its stage noise, mean 1).
SEEDS = 40
CASES = ("alone", "shared", "own", "shared+k", "own+k", "next alone")


class Marks:
    """Times of a thread's first upload and first read-back (the first stream wait)."""

    def __init__(self) -> None:
        self.tid: int | None = None
        self.first: dict[str, float] = {}
        self._up, self._down = transfer.to_device, transfer.to_host

        def up(*a: Any, **k: Any) -> Any:
            if threading.get_ident() == self.tid:
                self.first.setdefault("upload", time.perf_counter())
            return self._up(*a, **k)

        def down(*a: Any, **k: Any) -> Any:
            if threading.get_ident() == self.tid:
                self.first.setdefault("sync", time.perf_counter())
            return self._down(*a, **k)

        transfer.to_device, transfer.to_host = up, down

    def arm(self) -> None:
        self.tid, self.first = threading.get_ident(), {}


class SideWorker:
    """A long-lived thread that runs what it is handed, as a GPU worker thread does."""

    def __init__(self) -> None:
        self.jobs: queue.Queue = queue.Queue()
        threading.Thread(target=self._run, name="side-worker", daemon=True).start()

    def _run(self) -> None:
        while True:
            fn, done, out = self.jobs.get()
            try:
                out["value"] = fn()
            except BaseException as e:  # handed back to the caller
                out["error"] = e
            done.set()

    def start(self, fn: Any) -> tuple[threading.Event, dict]:
        done, out = threading.Event(), {}
        self.jobs.put((fn, done, out))
        return done, out


def fresh(ex: ProverExecutor, n: int, i: int) -> Partition:
    part = Partition(Proof(700 + i, 1, n), 0, n)
    part.host = ex.run_stage("synthesis", part, None, {})
    ex.run_stage("prep", part, None, {})
    return part


def measure(n: int, repeats: int, log: Any, backend_name: str = "cupy") -> dict[str, Any]:
    settings = ProverSettings.as_calibrated(
        load_profile(find_profile("h200-cupy")), backend=backend_name
    ).check(n)
    ex = ProverExecutor(settings.spec(n), settings)
    backend = ex.backends[0]
    marks, side = Marks(), SideWorker()
    try:
        target, other = fresh(ex, n, 0), fresh(ex, n, 1)
        kept = tuple(
            np.array(x) for x in (other.host.prepared.a, other.host.prepared.b, other.host.prepared.c)
        )

        def restore() -> None:  # prestage lets a, b, c go: give them back before it starts
            prepared = other.host.prepared
            prepared.a, prepared.b, prepared.c = (x.copy() for x in kept)

        def next_worker(kernels: bool) -> tuple[float, float, Any]:
            """The other worker's prestage (and kernels): their seconds, the kernels' points."""
            t = time.perf_counter()
            buffers = ex.run_stage("prestage", other, 0, {})
            t1 = time.perf_counter()
            points, t2 = None, float("nan")
            try:
                if kernels:
                    points = ex.run_stage("kernels", other, 0, {"buffers": buffers})
                    t2 = time.perf_counter() - t1
            finally:
                buffers.free()
            return t1 - t, t2, points

        def b_g2() -> Any:
            marks.arm()
            t = time.perf_counter()
            g = groth16.b_g2_msm(target.host.prepared, ex.pk, backend=backend)
            backend.synchronize()
            end = time.perf_counter()
            return g, end - t, marks.first.get("upload", end) - t, marks.first.get("sync", end) - t

        reference, *_ = b_g2()  # warm-up (kernels compiled, pools grown)
        restore()
        *_, kernel_points = next_worker(True)
        if n <= 1 << 20:
            cpu = groth16.b_g2_msm(target.host.prepared, ex.pk, 8)
            if cpu != reference:
                raise SystemExit(f"n={n}: the device's b_g2_msm differs from the CPU's")
            log(f"n={n:,}: the device's b_g2_msm equals the CPU's (arkworks)")
        rows: dict[str, list[tuple[float, ...]]] = {c: [] for c in CASES}
        for rep in range(repeats):
            for case in CASES[rep % len(CASES) :] + CASES[: rep % len(CASES)]:
                if case.startswith("shared"):
                    os.environ[transfer.SHARED_COPIERS_ENV] = "1"
                else:
                    os.environ.pop(transfer.SHARED_COPIERS_ENV, None)
                backend.synchronize()
                nan = float("nan")
                g, total, up, sync, pre, kern, points = reference, nan, nan, nan, nan, nan, None
                if case == "alone":
                    g, total, up, sync = b_g2()
                elif case == "next alone":
                    restore()
                    pre, kern, points = next_worker(True)
                else:
                    restore()
                    done, out = side.start(functools.partial(next_worker, case.endswith("+k")))
                    g, total, up, sync = b_g2()
                    done.wait()
                    if "error" in out:
                        raise out["error"]
                    pre, kern, points = out["value"]
                if g != reference:
                    raise SystemExit(f"n={n} {case}: b_g2_msm differs from its value alone")
                if points is not None and points != kernel_points:
                    raise SystemExit(f"n={n} {case}: the kernels' points differ from their value alone")
                rows[case].append((total, up, sync, pre, kern))
        os.environ.pop(transfer.SHARED_COPIERS_ENV, None)
    finally:
        ex.close()
    return {"n": n, "rows": rows}


def scene(profile: Any, n: int, seed: int, with_g2: bool, beside: bool | None) -> dict[str, float]:
    """One run of a scene in the model, both stages started at 0: the seconds of
    b_g2_msm, of the next worker's prestage and of its kernels, nan where the scene has no
    such stage.  beside: None, no next worker; False, its prestage; True, its prestage
    and kernels."""
    from simgpu.config import PipelineConfig, Workload
    from simgpu.model.sim import SimRuntime
    from simgpu.sched.work import Worker

    rt = SimRuntime(profile, PipelineConfig(), Workload("scene", 2, n), seed=seed, record_phases=False)
    target, other = Partition(Proof(0, 2, n), 0, n), Partition(Proof(0, 2, n), 1, n)
    took = {"b_g2_msm": float("nan"), "prestage": float("nan"), "kernels": float("nan")}

    def g2() -> Any:
        yield rt.stage("b_g2_msm", target, 0)
        took["b_g2_msm"] = rt.now()

    def next_worker() -> Any:
        buffers = yield rt.stage("prestage", other, 0)
        took["prestage"] = rt.now()
        if beside:
            t = rt.now()
            yield rt.stage("kernels", other, 0, buffers=buffers)
            took["kernels"] = rt.now() - t
        rt.free(buffers)

    if with_g2:
        rt.spawn(g2(), "b_g2_msm", worker=Worker(0, 0).name)
    if beside is not None:
        rt.spawn(next_worker(), "next", worker=Worker(0, 1).name)
    rt.env.run()
    return took


def predicted(profile_path: str, n: int) -> dict[str, tuple[float, float]]:
    """(b_g2_msm's, the next worker's kernels') seconds in the model in each scene, on one
    device of the profile: the mean of SEEDS runs."""
    profile = load_profile(profile_path)
    scenes = {"alone": (True, None), "own": (True, False), "own+k": (True, True), "next alone": (False, True)}
    out: dict[str, tuple[float, float]] = {}
    for case, (with_g2, beside) in scenes.items():
        runs = [scene(profile, n, seed, with_g2, beside) for seed in range(SEEDS)]
        out[case] = tuple(statistics.mean(r[stage] for r in runs) for stage in ("b_g2_msm", "kernels"))
    return out


def compare(profile_path: str, results: list[dict[str, Any]]) -> str:
    out = [
        "| n | case | b_g2_msm ms, model / card | error | next worker's kernels ms, model / card | error |",
        "|---|---|---:|---:|---:|---:|",
    ]

    def cell(p: float, xs: list[float]) -> str:
        xs = [x for x in xs if x == x]
        if p != p or not xs:
            return "- | -"
        real = statistics.median(xs)
        return f"{p * 1e3:.1f} / {real * 1e3:.1f} | {p / real - 1:+.1%}"

    for r in results:
        for case, (g2, kern) in predicted(profile_path, r["n"]).items():
            rows = r["rows"].get(case, [])
            size = f"2^{r['n'].bit_length() - 1}"
            kern_real = [x[4] for x in rows if len(x) > 4]
            out.append(f"| {size} | {case} | {cell(g2, [x[0] for x in rows])} | {cell(kern, kern_real)} |")
    return "\n".join(out)


def table(results: list[dict[str, Any]]) -> str:
    out = [
        "| n | case | b_g2_msm ms | spread | to first upload ms | to first sync ms "
        "| next worker's prestage ms | its kernels ms |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]

    def med(xs: list[float], fmt: str = "{:.1f}") -> str:
        xs = [x * 1e3 for x in xs if x == x]  # nan: not run in this case
        return fmt.format(statistics.median(xs)) if xs else "-"

    for r in results:
        for case, rows in r["rows"].items():
            tot = [x[0] * 1e3 for x in rows if x[0] == x[0]]
            spread = f"{(max(tot) - min(tot)) / statistics.median(tot):.0%}" if tot else "-"
            col = list(zip(*rows, strict=True)) + [[float("nan")] * len(rows)]  # older files: no kernels
            out.append(
                f"| 2^{r['n'].bit_length() - 1} | {case} | {med(col[0])} | {spread} | {med(col[1])} "
                f"| {med(col[2])} | {med(col[3])} | {med(col[4])} |"
            )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", nargs="+", default=["2^20", "2^22"])
    ap.add_argument("--repeats", type=int, default=8)
    ap.add_argument("--json", default=None)
    ap.add_argument("--backend", default="cupy", help="cpu: a dry run of the script, no copies to time")
    ap.add_argument("--predict", metavar="PROFILE", help="the model's b_g2_msm for --json's measured scenes")
    args = ap.parse_args()
    if args.predict:
        with open(args.json) as f:
            print(compare(args.predict, json.load(f)))
        return
    results = []
    for s in args.sizes:
        results.append(measure(parse_size(s), args.repeats, print, args.backend))
        print(f"n={s}: done", flush=True)
        if args.json:  # after each size: a call that runs out of time keeps what it measured
            with open(args.json, "w") as f:
                json.dump(results, f)
    print(table(results))


if __name__ == "__main__":
    main()
