"""`simgpu calibrate`: measure the real prover on this machine and write a profile.

For each size of a ladder (ascending) the prover is set up (keys cached), warmed up, and
each stage of a fresh partition is timed `repeats` times, one stage at a time, with the
device synchronised: synthesis in a worker process (as runs do), prep, prestage, kernels
(per phase: ntt, h_msm, l_msm, a_msm, b1_msm), b_g2_msm, epilogue (with verification).
Footprints come from the prover's memory plan (exact, and checked against the device
pool's peak, which is recorded beside it).  Then contention: host memory bandwidth
(k processes streaming large arrays), k syntheses at once, and prep / b_g2_msm under a
full synthesis load, to fit the shared-resource terms of the model.  Each stage time
is fitted (scipy, non-negative least squares on relative error) by the best of a few
laws in n, or by the one law its algorithm gives (STAGE_LAWS); buffer sizes likewise.
The epilogue, milliseconds of interpreter work, is fitted at the calibration's mean
host speed (HOST_SPEED_ADJUSTED).  The raw measurements go into the profile too, so a
fit can be redone (e.g. on the small sizes only, to test extrapolation).

An interrupted calibration (Ctrl-C, or VRAM exhausted at the top size) still writes
what it measured and says what is missing.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simgpu.errors import OutOfMemory, UserError
from simgpu.tomlwrite import Inline, dumps

#: Candidate laws for a stage time or a buffer size: basis functions of (n, N).
LAWS: dict[str, tuple[str, ...]] = {
    "a": ("1",),
    "a + b*n": ("1", "n"),
    "a + b*N*log2(N)": ("1", "N*log2(N)"),
    "a + b*n/log2(n)": ("1", "n/log2(n)"),
    "a + b*N": ("1", "N"),
    "a + b*n + c*N": ("1", "n", "N"),
    "a + b*sqrt(n) + c*n": ("1", "sqrt(n)", "n"),
}
TIME_LAWS = ("a + b*n", "a + b*N*log2(N)", "a + b*n/log2(n)", "a + b*sqrt(n) + c*n")
#: Stages whose cost law follows from their algorithm: only its coefficients are fitted.
#: A free pick among TIME_LAWS over five sizes of three noisy repeats bends with the noise
#: (b_g2_msm took N log N from one slow repeat at 2^20, and overshot 2^22 by 51%).
STAGE_LAWS: dict[str, tuple[str, ...]] = {
    # blinds and assembles three curve points, checks one pairing equation: any size
    "epilogue": ("a",),
    # copies a, b and c (N field elements each) to the device
    "prestage": ("a + b*N",),
    # Pippenger on the CPU: windows of ~log n bits, so ~n/log n point additions
    "b_g2_msm": ("a + b*n/log2(n)",),
}
#: Stages fitted at the calibration's mean host speed: each sample is taken right after
#: a fixed pure-Python reference loop on the same thread, and scaled by it.  The H200
#: machines are virtual machines whose cores run such code 1.5-2x slower for
#: stretches, with no steal time showing; the epilogue (interpreter and arkworks calls,
#: milliseconds) slows by the reference loop's factor (experiments/host_noise.py).
#: prep does not: it is numpy over hundreds of MB, and scaling it added noise.
HOST_SPEED_ADJUSTED = ("epilogue",)
#: The epilogue takes milliseconds and varies by tens of percent from call to call: each
#: repeat times it this often (on the same inputs), so that its mean is worth fitting.
EPILOGUE_SAMPLES = 8
SIZE_LAWS = ("a + b*N", "a + b*n", "a + b*n + c*N")
PHASES = ("ntt", "h_msm", "l_msm", "a_msm", "b1_msm")
#: A buffer law that misses a measured size by more than this is replaced by the points.
EXACT = 0.002
#: A time law that misses a measured size by more than this is replaced by the measured
#: means (linear between sizes, the nearest segment's slope beyond): the model then
#: reproduces every calibrated size, and the fit error is still reported.  Means, not
#: medians: the model's stage noise has mean 1 around the law, and a pipeline's pace is
#: set by mean stage times; a median drops the slow tail that real runs do see.
TIME_EXACT = 0.05


def time_laws(stage: str) -> tuple[str, ...]:
    """The candidate laws for the time of a stage (and of each of its phases)."""
    return STAGE_LAWS.get(stage, TIME_LAWS)


def reference_seconds() -> float:
    """Seconds a fixed pure-Python loop takes on this thread now (about 1 ms on the
    H200 machines' cores): the host's speed at this moment, for HOST_SPEED_ADJUSTED."""
    best = math.inf
    for _ in range(2):  # the faster of two: one interrupt should not count as a slow host
        t = time.perf_counter()
        x = 0
        for i in range(20_000):
            x += i * i % 7
        best = min(best, time.perf_counter() - t)
    return best


def mean_reference(rows: list[dict[str, Any]], key: str) -> float | None:
    """The mean reference time taken before the samples of a HOST_SPEED_ADJUSTED stage
    over `rows` (a profile's measurements, one row per size); None for other stages and
    for profiles written before references were taken."""
    if key not in HOST_SPEED_ADJUSTED or not all(f"{key}_ref" in r for r in rows):
        return None
    return statistics.mean(x for r in rows for x in r[f"{key}_ref"])


def stage_means(rows: list[dict[str, Any]], key: str, at: float | None = None) -> list[float]:
    """The mean seconds of one stage or phase ('kernels_h_msm') at each of `rows`.  The
    samples of a HOST_SPEED_ADJUSTED stage are scaled to the host speed whose reference
    time is `at` (by default mean_reference over the rows): t * at / ref."""
    own = mean_reference(rows, key)
    if own is None:  # not a scaled stage, or measured before references were taken
        return [statistics.mean(r[key]) for r in rows]
    at = at or own
    pairs = [zip(r[key], r[f"{key}_ref"], strict=True) for r in rows]
    return [statistics.mean(t * at / ref for t, ref in p) for p in pairs]


def _basis(term: str, n: float) -> float:
    N = float(1 << max(0, (int(n) - 1).bit_length()))
    env = {"n": float(n), "N": N, "log2": math.log2, "sqrt": math.sqrt}
    return float(eval(term, {"__builtins__": {}}, env))  # noqa: S307


@dataclass
class Fit:
    law: str
    coeffs: dict[str, float]
    max_rel_error: float

    def law_table(self) -> Inline:
        expr = self.law
        return Inline(law=expr, **self.coeffs)

    def __call__(self, n: float) -> float:
        names = "abc"
        return sum(self.coeffs[names[i]] * _basis(t, n) for i, t in enumerate(LAWS[self.law]))


def fit_law(ns: list[float], ys: list[float], candidates: tuple[str, ...]) -> Fit:
    """The candidate law with the smallest worst relative error, coefficients >= 0 fitted
    by NNLS on relative residuals.  A law needs more points than coefficients, except the
    one-point case, which is fitted as proportional."""
    from scipy.optimize import nnls

    ns = [float(x) for x in ns]
    ys = [float(y) for y in ys]
    best: Fit | None = None
    for law in candidates:
        terms = LAWS[law]
        if len(ns) < len(terms) and not (len(ns) == 1 and len(terms) == 2):
            continue
        use = terms if len(ns) >= len(terms) else terms[1:]
        w = np.array([1.0 / max(abs(y), 1e-12) for y in ys])
        A = np.array([[_basis(t, n) for t in use] for n in ns]) * w[:, None]
        coef, _ = nnls(A, np.ones(len(ys)))
        if len(use) < len(terms):
            coef = np.concatenate([[0.0], coef])
        fit = Fit(law, {"abc"[i]: float(c) for i, c in enumerate(coef)}, 0.0)
        fit.max_rel_error = max(abs(fit(n) - y) / max(abs(y), 1e-12) for n, y in zip(ns, ys, strict=True))
        if best is None or fit.max_rel_error < best.max_rel_error - 1e-9:
            best = fit
    if best is None:
        raise UserError("nothing to fit: no measurements")
    return best


# --------------------------------------------------------------------- measuring


@dataclass
class SizeRun:
    """Measurements at one partition size."""

    constraints: int
    seconds: dict[str, list[float]] = field(default_factory=dict)  # stage or kernels.phase
    vram_peak: dict[str, int] = field(default_factory=dict)  # stage -> device pool peak
    buffers: dict[str, int] = field(default_factory=dict)  # the plan's buffer sizes
    plan_peak: dict[str, int] = field(default_factory=dict)
    setup_seconds: float | None = None

    def add(self, key: str, seconds: float) -> None:
        self.seconds.setdefault(key, []).append(seconds)


def _timed(fn: Callable[[], Any], sync: Callable[[], None]) -> tuple[Any, float]:
    sync()
    t = time.perf_counter()
    out = fn()
    sync()
    return out, time.perf_counter() - t


def time_synthesis_trip(pool: Any, spec: Any, seed: int) -> tuple[Any, float, float, float]:
    """One synthesis in a worker of `pool`, as the prover runs it: (result, wall seconds
    from submit to result, seconds computing, seconds the worker spends pickling the
    result).  The wall time less the computing is the result's trip back: pickled in the
    worker, piped, and unpickled by the one thread of the driver that receives every
    worker's results.  The timing pickles the result once more in the worker; that extra
    copy is taken off the wall time."""
    from simgpu.real.synthesis import synthesize_timed

    t = time.perf_counter()  # before the submit: the worker's compute lies within
    synth, compute, pickling = pool.submit(synthesize_timed, spec, seed).result()
    wall = time.perf_counter() - t - pickling
    return synth, wall, compute, pickling


def serialized_share(transfer: float, pickling: float) -> float:
    """The part of a result's trip that the driver's one result thread serializes: all of
    it but the worker's pickling (which every worker does for itself, at once)."""
    if transfer <= 0:
        return 1.0
    return min(1.0, max(0.0, 1.0 - pickling / transfer))


def measure_size(n: int, settings: Any, repeats: int, log: Callable[[str], None]) -> SizeRun:
    """Time every stage at size n (see the module docstring)."""
    from simgpu.real import groth16
    from simgpu.real.circuits import CircuitSpec
    from simgpu.real.executor import ProverExecutor
    from simgpu.real.prover_footprint import ProverShape, prover_plan, stage_peak

    spec = CircuitSpec(constraints=n)
    ex = ProverExecutor(spec, settings)
    run = SizeRun(n, setup_seconds=ex.setup_seconds)
    backend = ex.backends[0]
    sync = backend.synchronize
    try:
        ex.pool().submit(groth16.synthesize, spec, 999).result()  # start the worker process
        for rep in range(repeats):
            seed = 1000 + rep
            synth, wall, compute, pickling = time_synthesis_trip(ex.pool(), spec, seed)
            run.add("synthesis", wall)
            run.add("synthesis.compute", compute)
            run.add("synthesis.transfer", max(0.0, wall - compute))
            run.add("synthesis.pickle", min(pickling, max(0.0, wall - compute)))
            prepared, dt = _timed(lambda s=synth: groth16.prep(s, ex.pk), lambda: None)
            run.add("prep", dt)
            plan = prover_plan(
                ProverShape.from_prepared(prepared),
                stream_batch=backend.stream_batch,
                resident_bases=backend.resident_bases,
            )
            with backend.peak_scope() as meter:
                buffers, dt = _timed(lambda p=prepared: groth16.prestage(p, backend), sync)
            run.add("prestage", dt)
            run.vram_peak["prestage"] = max(run.vram_peak.get("prestage", 0), meter.peak)
            phases: dict[str, float] = {}
            with backend.peak_scope() as meter:
                out, dt = _timed(
                    lambda p=prepared, b=buffers, t=phases: groth16.kernels(p, ex.pk, backend, b, timings=t),
                    sync,
                )
            buffers.free()
            run.add("kernels", dt)
            run.vram_peak["kernels"] = max(run.vram_peak.get("kernels", 0), meter.peak)
            for ph in PHASES:
                run.add(f"kernels.{ph}", phases[ph])
            g2, dt = _timed(lambda p=prepared: ex.g2.msm(p, settings.b_g2_threads), lambda: None)
            run.add("b_g2_msm", dt)
            rng = np.random.default_rng(seed)

            def finish(p=prepared, o=out, g=g2, r=rng):
                proof = groth16.epilogue(p, ex.pk, o, g, r)
                if not groth16.verify(ex.vk, p.public_inputs, proof):
                    raise RuntimeError(f"calibration proof at n={n} does not verify")
                return proof

            for _ in range(EPILOGUE_SAMPLES):
                run.add("epilogue.ref", reference_seconds())
                _, dt = _timed(finish, lambda: None)
                run.add("epilogue", dt)
            log(f"  n={n:,} repeat {rep + 1}/{repeats}: kernels {run.seconds['kernels'][-1] * 1e3:.1f} ms")
        run.buffers = {k: int(v) for k, v in plan["buffers"].items()}
        run.plan_peak = {s: stage_peak(plan, s) for s in ("prestage", "kernels")}
        run.buffers["_resident_vram"] = sum(plan["buffers"][x] for x in plan["resident"]["vram"])
        run.buffers["_baseline_vram"] = int(ex.baseline[0])
    finally:
        ex.close()
    return run


def _stream(nbytes: int, seconds: float) -> float:
    """One process copying a large array for about `seconds`: GB/s moved (read + write)."""
    a = np.ones(nbytes // 8, dtype=np.float64)
    b = np.empty_like(a)
    moved = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        np.copyto(b, a)
        moved += 2 * a.nbytes
    return moved / (time.perf_counter() - t0) / 1e9


def measure_membw(procs: int, nbytes: int = 256 << 20, seconds: float = 1.5) -> float:
    """Aggregate host memory bandwidth (GB/s) of `procs` processes streaming at once."""
    import multiprocessing

    with ProcessPoolExecutor(procs, mp_context=multiprocessing.get_context("spawn")) as pool:
        return float(sum(pool.map(_stream, [nbytes] * procs, [seconds] * procs)))


def measure_h2d(nbytes: int = 1 << 30) -> float | None:
    """Pinned host -> device copy bandwidth (GB/s), or None without CuPy."""
    try:
        from simgpu.real.gpu import get_cupy

        cp = get_cupy()
    except Exception:
        return None
    host = cp.cuda.alloc_pinned_memory(nbytes)
    src = np.frombuffer(host, dtype=np.uint8, count=nbytes)
    src[:] = np.random.default_rng(0).integers(0, 255, nbytes, dtype=np.uint8)
    dst = cp.empty(nbytes, dtype=cp.uint8)
    dst.set(src)
    cp.cuda.Device().synchronize()
    t = time.perf_counter()
    for _ in range(3):
        dst.set(src)
    cp.cuda.Device().synchronize()
    gbps = 3 * nbytes / (time.perf_counter() - t) / 1e9
    del dst
    return gbps


def _synth_task(spec_n: int, seed: int) -> float:
    from simgpu.real.circuits import CircuitSpec
    from simgpu.real.synthesis import synthesize

    t = time.perf_counter()
    synthesize(CircuitSpec(constraints=spec_n), seed)
    return time.perf_counter() - t


@dataclass
class Contention:
    n: int
    cores: int
    membw_gbps: float
    synthesis: dict[int, float]  # k at once -> mean seconds each
    loaded: dict[str, tuple[float, float]]  # stage -> (alone, under full synthesis load)


def measure_contention(n: int, settings: Any, ks: list[int], log: Callable[[str], None]) -> Contention:
    """k syntheses at once for k in ks (each in its own process: CPU-bound Python), and
    prep / b_g2_msm alone and beside a full load of syntheses."""
    import multiprocessing

    from simgpu.real import groth16
    from simgpu.real.circuits import CircuitSpec
    from simgpu.real.executor import ProverExecutor
    from simgpu.real.synthesis import synthesize

    cores = os.cpu_count() or 1
    membw = measure_membw(cores)
    log(f"  host memory bandwidth, {cores} processes: {membw:.1f} GB/s")
    ctx = multiprocessing.get_context("spawn")
    times: dict[int, float] = {}
    with ProcessPoolExecutor(max(ks), mp_context=ctx) as pool:
        list(pool.map(_synth_task, [64] * max(ks), range(max(ks))))  # start the workers
        for k in ks:
            times[k] = statistics.mean(pool.map(_synth_task, [n] * k, range(k)))
            log(f"  {k} syntheses at once: {times[k]:.3f} s each")
        spec = CircuitSpec(constraints=n)
        ex = ProverExecutor(spec, settings)
        try:
            synth = synthesize(spec, 7)
            prepared = groth16.prep(synth, ex.pk)
            loaded: dict[str, tuple[float, float]] = {}
            fns = {
                "prep": lambda: groth16.prep(synth, ex.pk),
                "b_g2_msm": lambda: ex.g2.msm(prepared, settings.b_g2_threads),
            }
            for name, fn in fns.items():
                _, alone = _timed(fn, lambda: None)
                load = [pool.submit(_synth_task, n, 100 + i) for i in range(max(ks))]
                time.sleep(0.2)  # let the load start
                _, busy = _timed(fn, lambda: None)
                for f in load:
                    f.result()
                loaded[name] = (alone, busy)
                log(f"  {name}: {alone:.3f} s alone, {busy:.3f} s beside {max(ks)} syntheses")
        finally:
            ex.close()
    return Contention(n, cores, membw, times, loaded)


def fit_synthesis_contention(c: Contention) -> dict[str, Inline]:
    """Bound fractions of synthesis on cores and on memory bandwidth, and its bandwidth
    demand, from the k-at-once times: slowdown(k) = 1 + fc (max(1, k/C) - 1) + fm (max(1,
    k d / B) - 1)."""
    from scipy.optimize import least_squares

    ks = sorted(c.synthesis)
    base = c.synthesis[ks[0]]
    slow = np.array([c.synthesis[k] / base for k in ks])

    def model(p: np.ndarray) -> np.ndarray:
        fc, fm, d = p
        return np.array(
            [1 + fc * (max(1.0, k / c.cores) - 1) + fm * (max(1.0, k * d / c.membw_gbps) - 1) for k in ks]
        )

    res = least_squares(
        lambda p: model(p) - slow,
        x0=[0.5, 0.3, c.membw_gbps / c.cores],
        bounds=([0, 0, 0], [1, 1, c.membw_gbps]),
    )
    fc, fm, d = (float(x) for x in res.x)
    if fc + fm > 1:
        fc, fm = fc / (fc + fm), fm / (fc + fm)
    return {
        "cores": Inline(demand=1.0, bound=round(fc, 4)),
        "membw": Inline(demand=round(d, 3), bound=round(fm, 4)),
    }


def fit_loaded(c: Contention, stage: str, threads: int) -> dict[str, Inline]:
    """A CPU stage's bound fraction on cores from its time beside a full synthesis load."""
    alone, busy = c.loaded[stage]
    load = max(c.synthesis) + threads
    over = max(1.0, load / c.cores)
    f = 0.0 if over <= 1.0 else min(1.0, max(0.0, (busy / alone - 1) / (over - 1)))
    return {"cores": Inline(demand=float(threads), bound=round(f, 4))}


# --------------------------------------------------------------------- the profile


def _hardware_facts(
    settings: Any, runs: list[SizeRun], membw: float | None, h2d: float | None
) -> dict[str, Any]:
    from simgpu.real.executor import host_ram

    gpu, vram, driver = "CPU backend (emulated device)", settings.vram_limit or (1 << 40), ""
    if settings.backend == "cupy":
        from simgpu.real.gpu import get_cupy

        cp = get_cupy()
        props = cp.cuda.runtime.getDeviceProperties(0)
        gpu = props["name"].decode()
        vram = settings.vram_limit or int(cp.cuda.runtime.memGetInfo()[1])
        driver = str(cp.cuda.runtime.driverGetVersion())
    return {
        "gpu": gpu,
        "vram": int(vram),
        "cpu_cores": os.cpu_count() or 1,
        "host_ram": host_ram(),
        "host_resident": 0,
        "membw_gbps": round(membw, 2) if membw else 50.0,
        "h2d_gbps": round(h2d, 2) if h2d else 25.0,
        "driver": driver,
    }


def build_profile(
    name: str,
    runs: list[SizeRun],
    contention: Contention | None,
    settings: Any,
    h2d: float | None,
    partitions: int,
    missing: list[str],
) -> tuple[dict[str, Any], dict[str, float]]:
    """The profile document and the fit error of each law."""
    from simgpu.real.circuits import CircuitSpec
    from simgpu.real.prover_footprint import ProverShape, prover_plan
    from simgpu.real.prover_profile import footprint_tables

    ns = [r.constraints for r in runs]
    errors: dict[str, float] = {}
    measurements = {
        f"n{r.constraints}": {
            "constraints": r.constraints,
            **{k.replace(".", "_"): [round(x, 6) for x in v] for k, v in r.seconds.items()},
            "vram_peak_prestage": r.vram_peak.get("prestage", 0),
            "vram_peak_kernels": r.vram_peak.get("kernels", 0),
            "plan_peak_prestage": r.plan_peak.get("prestage", 0),
            "plan_peak_kernels": r.plan_peak.get("kernels", 0),
            "baseline_vram": r.buffers["_baseline_vram"],
        }
        for r in runs
    }

    def fitted(key: str) -> Inline:
        ys = stage_means(list(measurements.values()), key.replace(".", "_"))
        law, errors[key] = time_law(ns, ys, time_laws(key.partition(".")[0]))
        return law

    top = runs[-1]
    spec = CircuitSpec(constraints=top.constraints)
    plan = prover_plan(
        ProverShape.estimate(spec),
        stream_batch=settings.stream_batch or (1 << 22),
        resident_bases=settings.resident_bases,
    )
    _, stages_fp, _, _ = footprint_tables(plan)
    buffers: dict[str, Any] = {}
    for buf in stages_buffers(stages_fp):
        ys = [float(r.buffers[buf]) for r in runs]
        if max(ys) == 0:
            buffers[buf] = 0
            continue
        f = fit_law(ns, ys, SIZE_LAWS)
        if f.max_rel_error > EXACT:
            # a footprint that steps with the MSM window: keep the measured points
            buffers[buf] = Inline(points=[[n, int(y)] for n, y in zip(ns, ys, strict=True)])
            errors[f"buffer {buf}"] = 0.0
        else:
            errors[f"buffer {buf}"] = f.max_rel_error
            buffers[buf] = f.law_table()
    resident = fit_law(ns, [float(max(1, r.buffers["_baseline_vram"])) for r in runs], SIZE_LAWS)
    errors["vram_resident"] = resident.max_rel_error
    hw = _hardware_facts(settings, runs, contention.membw_gbps if contention else None, h2d)
    hw["vram_resident"] = resident.law_table()
    uses: dict[str, dict[str, Inline]] = {"kernels": {"gpu": Inline(demand=1.0, bound=1.0)}}
    uses["prestage"] = {"h2d": Inline(demand=float(hw["h2d_gbps"]), bound=1.0)}
    if contention:
        uses["synthesis"] = fit_synthesis_contention(contention)
        uses["prep"] = fit_loaded(contention, "prep", 1)
        uses["b_g2_msm"] = fit_loaded(contention, "b_g2_msm", settings.b_g2_threads)

    def cv(key: str) -> float:
        vals = [
            x
            for r in runs
            for x in [np.std(r.seconds[key]) / np.mean(r.seconds[key])]
            if len(r.seconds[key]) > 1
        ]
        return round(float(max(0.01, statistics.median(vals))) if vals else 0.02, 4)

    stages: dict[str, Any] = {}
    for st, fp in stages_fp.items():
        entry: dict[str, Any] = {"on": "gpu" if st in ("prestage", "kernels") else "cpu"}
        entry.update({k: v for k, v in fp.items() if k != "phases"})
        entry["noise_cv"] = cv(st)
        if st in uses:
            entry["uses"] = Inline(uses[st])
        if "phases" in fp:
            entry["phases"] = [dict(ph, time=fitted(f"kernels.{ph['name']}")) for ph in fp["phases"]]
        elif st == "synthesis" and all("synthesis.transfer" in r.seconds for r in runs):
            # Computing in a worker leans on cores and memory bandwidth (the stage's uses);
            # the way back shares the driver's result channel with every other result.
            entry["phases"] = [
                {"name": "compute", "time": fitted("synthesis.compute")},
                {
                    "name": "transfer",
                    "time": fitted("synthesis.transfer"),
                    "uses": Inline(driver_rx=Inline(demand=1.0, bound=driver_rx_bound(runs))),
                },
            ]
        else:
            entry["time"] = fitted(st)
        stages[st] = entry
    wl_name = f"groth16-n{top.constraints}"
    estimate = fit_law(
        ns,
        [float(r.buffers["host_abc"] + r.buffers["host_aux"] + r.buffers["host_prep"]) for r in runs],
        SIZE_LAWS,
    )
    doc = {
        "profile": {
            "name": name,
            "description": f"the simgpu Groth16 prover ({settings.backend}) measured on {hw['gpu']}",
            "source": f"simgpu calibrate, {time.strftime('%Y-%m-%d')}, {platform.node()}",
            "default_workload": wl_name,
        },
        "hardware": hw,
        "workloads": {wl_name: {"partitions": partitions, "constraints": top.constraints}},
        "memory": {"partition_estimate": estimate.law_table()},
        "buffers": buffers,
        "stages": stages,
        "calibration": {
            "backend": settings.backend,
            "b_g2_threads": settings.b_g2_threads,
            "sizes": ns,
            "repeats": len(top.seconds["kernels"]),
            "missing": missing,
            "fit_max_rel_error": {
                k.replace(".", "_").replace(" ", "_"): round(v, 4) for k, v in errors.items()
            },
            "measurements": measurements,
        },
    }
    return doc, errors


def driver_rx_bound(runs: list[SizeRun]) -> float | Inline:
    """How much of a synthesis result's trip waits on the driver's result thread: the
    serialized share at each calibrated size (1 where the worker's pickling was not
    timed: every second of the trip is then taken as shared)."""
    if not all("synthesis.pickle" in r.seconds for r in runs):
        return 1.0
    mean = statistics.mean
    shares = [
        round(serialized_share(mean(r.seconds["synthesis.transfer"]), mean(r.seconds["synthesis.pickle"])), 3)
        for r in runs
    ]
    if len(runs) == 1:
        return shares[0]
    return Inline(points=[[r.constraints, s] for r, s in zip(runs, shares, strict=True)])


def time_law(ns: list[int], ys: list[float], candidates: tuple[str, ...] = TIME_LAWS) -> tuple[Inline, float]:
    """The best time law over the ladder, or the measured points where no law is within
    TIME_EXACT of every size, with that law for the sizes beyond them.  Returns (TOML
    law, worst relative error of the best law)."""
    f = fit_law(ns, ys, candidates)
    if f.max_rel_error > TIME_EXACT:
        pts = [[n, round(y, 7)] for n, y in zip(ns, ys, strict=True)]
        return Inline(points=pts, beyond=f.law_table()), f.max_rel_error
    return f.law_table(), f.max_rel_error


def measured_means(
    doc: dict[str, Any], key: str, max_size: int | None = None
) -> tuple[list[int], list[float]]:
    """(sizes, mean seconds, as `stage_means`) of one stage or kernels phase
    ('kernels_h_msm') from a profile's [calibration.measurements]."""
    rows = sorted(doc["calibration"]["measurements"].values(), key=lambda r: r["constraints"])
    rows = [r for r in rows if max_size is None or r["constraints"] <= max_size]
    return [r["constraints"] for r in rows], stage_means(rows, key)


def refit_times(doc: dict[str, Any], max_size: int | None = None) -> dict[str, float]:
    """Fit every stage time of a calibrated profile again from its stored measurements
    (only sizes <= max_size if given), in place.  Returns the fit errors."""
    errors: dict[str, float] = {}
    for name, st in doc["stages"].items():
        if "phases" in st:
            for ph in st["phases"]:
                key = f"{name}_{ph['name']}"
                ph["time"], errors[key] = time_law(*measured_means(doc, key, max_size), time_laws(name))
        else:
            st["time"], errors[name] = time_law(*measured_means(doc, name, max_size), time_laws(name))
    return errors


def _inline_laws(doc: Any, key: str = "") -> Any:
    """A profile read back from TOML, with laws and resource uses marked inline again."""
    if isinstance(doc, dict):
        if key == "uses" or "law" in doc or "points" in doc:
            return Inline({k: _inline_laws(v, k) for k, v in doc.items()})
        return {k: _inline_laws(v, k) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_inline_laws(v) for v in doc]
    return doc


def refit_profile(src: Path, out: Path, max_size: int | None = None) -> dict[str, float]:
    """Refit the stage times of the calibrated profile `src` from its stored
    measurements (sizes <= max_size if given) and write it to `out`."""
    import tomllib

    try:
        doc = tomllib.loads(src.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise UserError(f"cannot read profile {src}: {e}") from None
    if "measurements" not in doc.get("calibration", {}):
        raise UserError(f"{src} has no [calibration.measurements]: it was not written by calibrate")
    errors = refit_times(doc, max_size)
    cal = doc["calibration"]
    cal["refit_max_size"] = max_size or max(r["constraints"] for r in cal["measurements"].values())
    cal["fit_max_rel_error"].update({k: round(v, 4) for k, v in errors.items()})
    refit_note = "Stage times refitted from the stored measurements"
    header = profile_header(src.read_text(), drop=refit_note)
    header += f"\n{refit_note} (sizes <= {cal['refit_max_size']})."
    out.write_text(dumps(_inline_laws(doc), header))
    return errors


def profile_header(text: str, drop: str | None = None) -> str:
    """The comment block of a profile's TOML text (less lines starting with `drop`), to
    write back above a changed profile."""
    lines = [
        line[2:]
        for line in text.splitlines()
        if line.startswith("# ") and not (drop and line[2:].startswith(drop))
    ]
    return "\n".join(lines) or "simgpu profile"


def stages_buffers(stages_fp: dict[str, dict[str, Any]]) -> list[str]:
    names: list[str] = []
    for fp in stages_fp.values():
        for key in ("host_out", "vram_out", "vram_in", "host_release"):
            names += [b for b in fp.get(key, []) if b not in names]
        for ph in fp.get("phases", []):
            names += [b for b in ph.get("transient", []) + ph.get("release", []) if b not in names]
    return names


def calibrate(
    out: Path,
    sizes: list[int],
    settings: Any,
    repeats: int = 3,
    contention_size: int | None = None,
    partitions: int = 4,
    name: str | None = None,
    log: Callable[[str], None] = print,
) -> tuple[dict[str, Any], dict[str, float]]:
    """Measure, fit, write `out`.  Returns (profile document, fit errors)."""
    runs: list[SizeRun] = []
    missing: list[str] = []
    contention = None
    h2d = None
    try:
        if settings.backend == "cupy":
            h2d = measure_h2d()
            log(f"host-to-device copy: {h2d:.1f} GB/s")
        for i, n in enumerate(sizes):
            log(f"[{i + 1}/{len(sizes)}] n = {n:,} constraints")
            try:
                runs.append(measure_size(n, settings, repeats, log))
            except OutOfMemory as e:
                missing += [
                    f"n={m}: not measured ({'VRAM exhausted: ' + str(e) if m == n else 'after an OOM'})"
                    for m in sizes[i:]
                ]
                log(f"  stopped: {e}")
                break
        if runs:
            cn = contention_size or runs[len(runs) // 2].constraints
            cores = os.cpu_count() or 1
            ks = sorted({1, 2, max(1, cores // 2), cores, 2 * cores})
            log(f"contention at n = {cn:,}: k = {ks}")
            contention = measure_contention(cn, settings, ks, log)
    except KeyboardInterrupt:
        done = {r.constraints for r in runs}
        missing += [f"n={n}: not measured (interrupted)" for n in sizes if n not in done]
        if contention is None:
            missing.append("contention: not measured (interrupted)")
        log("interrupted: writing what was measured")
    if not runs:
        raise UserError("calibration measured nothing: no profile written")
    if contention is None and "contention: not measured (interrupted)" not in missing:
        missing.append("contention: not measured")
    doc, errors = build_profile(name or out.stem, runs, contention, settings, h2d, partitions, missing)
    header = (
        f"simgpu profile written by `simgpu calibrate` on {time.strftime('%Y-%m-%d %H:%M')}.\n"
        "Stage times are fitted laws (see [calibration] for the raw measurements and fit errors);\n"
        "buffers and stage footprints come from the prover's memory plan (simgpu.real.prover_footprint)."
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dumps(doc, header))
    return doc, errors
