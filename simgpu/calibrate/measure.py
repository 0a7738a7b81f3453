"""Measuring the real prover: each stage at each size of a ladder, and under contention.

For each size of a ladder (ascending) the prover is set up (keys cached), warmed up, and
each stage of a fresh partition is timed `repeats` times, one stage at a time, with the
device synchronised: synthesis in a worker process (as runs do), prep, prestage, kernels
(per phase: ntt, h_msm, l_msm, a_msm, b1_msm), b_g2_msm, epilogue (with verification).
Footprints come from the prover's memory plan (exact, and checked against the device
pool's peak, which is recorded beside it).  Then contention: host memory bandwidth
(k processes streaming large arrays), k syntheses at once, and prep / b_g2_msm under a
full synthesis load, to fit the shared-resource terms of the model; and the device's
queue: prestage, kernels and b_g2_msm each timed beside a continuous load of the other
kind of device work (`measure_device_queue`), and the driver's interpreter lock
(simgpu.calibrate.lock).  Each driver stage is called through the driver's chain
(simgpu.calibrate.chain).  Each stage time
is fitted (scipy, non-negative least squares on relative error) by the best of a few
laws in n, or by the one law its algorithm gives (STAGE_LAWS); buffer sizes likewise.
The epilogue, milliseconds of interpreter work, is fitted at the calibration's mean
host speed (HOST_SPEED_ADJUSTED).  The raw measurements go into the profile too, so a
fit can be redone (e.g. on the small sizes only, to test extrapolation).

An interrupted calibration (Ctrl-C, or VRAM exhausted at the top size) still writes
what it measured and says what is missing.
"""

from __future__ import annotations

import functools
import math
import mmap
import multiprocessing
import os
import queue
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simgpu.calibrate.arrays import phase_arrays
from simgpu.calibrate.chain import LOCK, PRESSURE_STAGES, TRIP, driver_chain, result_trip, spanned
from simgpu.calibrate.lock import measure_gil
from simgpu.calibrate.pins import time_lock
from simgpu.workers import pool_of

#: The epilogue takes milliseconds and varies by tens of percent from call to call: each
#: repeat times it this often (on the same inputs), so that its mean is worth fitting.
EPILOGUE_SAMPLES = 8
PHASES = ("ntt", "h_msm", "l_msm", "a_msm", "b1_msm")


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


@dataclass
class SizeRun:
    """Measurements at one partition size."""

    constraints: int
    seconds: dict[str, list[float]] = field(default_factory=dict)  # stage or kernels.phase
    vram_peak: dict[str, int] = field(default_factory=dict)  # stage -> device pool peak
    buffers: dict[str, int] = field(default_factory=dict)  # the plan's buffer sizes
    plan_peak: dict[str, int] = field(default_factory=dict)
    setup_seconds: float | None = None
    hardware: dict[str, Any] = field(default_factory=dict)  # the executor's [hardware] facts
    #: the last repeat's device pool trace, as the arrays live at each stage's (or kernels
    #: phase's) peak (simgpu.calibrate.arrays.phase_arrays); empty without a pool
    arrays: dict[str, list[int]] = field(default_factory=dict)
    #: how the repeats' a, b, c reached the device (ProverExecutor.abc_uploads)
    abc_uploads: dict[str, int] = field(default_factory=dict)

    def add(self, key: str, seconds: float) -> None:
        self.seconds.setdefault(key, []).append(seconds)


def serialized_share(transfer: float, pickling: float) -> float:
    """The part of a result's trip that the driver's one result thread serializes: all of
    it but the worker's pickling (which every worker does for itself, at once)."""
    if transfer <= 0:
        return 1.0
    return min(1.0, max(0.0, 1.0 - pickling / transfer))


def measure_size(n: int, settings: Any, repeats: int, log: Callable[[str], None]) -> SizeRun:
    """Time every stage at size n through the prover executor's own stage hook
    (`ProverExecutor.run_stage`, as a real run calls it), one fresh partition per repeat,
    one stage at a time, the device synchronised at each boundary."""
    from simgpu.prover import handoff
    from simgpu.prover.memory_plan import ProverShape, prover_plan, stage_peak
    from simgpu.real.executor import ProverExecutor, StageProbe
    from simgpu.sched.work import Partition, Proof

    spec = settings.spec(n)
    ex = ProverExecutor(spec, settings)
    run = SizeRun(n, setup_seconds=ex.setup_seconds, hardware=ex.hardware())
    device = ex.backends[0]
    probe = ex.probe = StageProbe()

    def timed(stage: str, part: Partition, dev: int | None, **inputs: Any) -> tuple[Any, float]:
        device.synchronize()
        t = time.perf_counter()
        out = ex.run_stage(stage, part, dev, inputs)
        return out, time.perf_counter() - t

    try:
        for rep in range(repeats):
            trace = _trace_last(device, rep == repeats - 1)
            part = Partition(Proof(1000 + rep, 1, n), 0, n)
            part.host, wall = timed("synthesis", part, None)
            # Timing work in the worker (one pickle more, where there is no shared memory)
            # is no part of the trip.
            compute, pickling = probe.seconds["compute"], probe.seconds["pickle"]
            transfer = result_trip(wall, probe.seconds)
            run.add("synthesis", wall - probe.seconds["extra"])
            run.add("synthesis.compute", compute)
            run.add("synthesis.transfer", transfer)
            run.add("synthesis.pickle", min(pickling, transfer))
            _, dt = timed("prep", part, None)
            run.add("prep", dt)
            abc = _abc_kept(part.host.prepared, ex.pin)  # prestage lets them go
            plan = prover_plan(
                ProverShape.from_prepared(part.host.prepared),
                stream_batch=device.stream_batch,
                resident_bases=device.resident_bases,
                b_g2_on=settings.b_g2_on,
                msm_capacity=settings.msm_capacity,
            )
            buffers, dt = timed("prestage", part, 0)
            run.add("prestage", dt)
            run.vram_peak["prestage"] = max(run.vram_peak.get("prestage", 0), probe.vram_peak)
            # a, b, c unlocked before the kernels are timed: the unlock stalls the device,
            # and the model adds that as a pause of its own ([pins]), beside every stage
            handoff.settled()
            _, dt = timed("kernels", part, 0, buffers=buffers)
            ex.free(buffers)  # as a run frees them (so that a pool trace sees it)
            run.add("kernels", dt)
            run.vram_peak["kernels"] = max(run.vram_peak.get("kernels", 0), probe.vram_peak)
            for ph in PHASES:
                run.add(f"kernels.{ph}", probe.seconds[ph])
            again, unsynced = _kernels_unsynced(ex, part, abc, timed)
            run.add("prestage.again", again)
            run.add("kernels.unsynced", unsynced)
            _, dt = timed("b_g2_msm", part, 0 if settings.b_g2_on == "gpu" else None)
            run.add("b_g2_msm", dt)
            if settings.b_g2_on == "gpu":  # the device pool's peak, to check its plan too
                run.vram_peak["b_g2_msm"] = max(run.vram_peak.get("b_g2_msm", 0), probe.vram_peak)
            for _ in range(EPILOGUE_SAMPLES):  # the executor's epilogue verifies every proof
                run.add("epilogue.ref", reference_seconds())
                _, dt = timed("epilogue", part, None)
                run.add("epilogue", dt)
            part.host.free()
            if trace is not None:
                device.alloc_trace = None
                run.arrays = phase_arrays(trace.rows)
            log(f"  n={n:,} repeat {rep + 1}/{repeats}: kernels {run.seconds['kernels'][-1] * 1e3:.1f} ms")
        together = min(TRIPS_AT_ONCE, ex.settings.partition_workers)
        if together > 1:
            alone, at_once = measure_trips(ex, n, together, repeats)
            run.seconds["synthesis.trip"] = alone
            run.seconds[f"synthesis.trip_x{together}"] = at_once
            log(
                f"  n={n:,} results' trip back: {statistics.mean(alone) * 1e3:.1f} ms alone, "
                f"{statistics.mean(at_once) * 1e3:.1f} ms each with {together} at once"
            )
        run.buffers = {k: int(v) for k, v in plan["buffers"].items()}
        checked = ("prestage", "kernels", *(("b_g2_msm",) if settings.b_g2_on == "gpu" else ()))
        run.plan_peak = {s: stage_peak(plan, s) for s in checked}
        run.buffers["_resident_vram"] = sum(plan["buffers"][x] for x in plan["resident"]["vram"])
        run.buffers["_baseline_vram"] = int(ex.baseline[0])
        run.abc_uploads = dict(ex.abc_uploads)
    finally:
        ex.close()
    return run


def _abc_kept(prepared: Any, pin: Callable[[np.ndarray], Any] | None) -> tuple[Any, ...]:
    """A copy of a partition's a, b, c for `_kernels_unsynced`'s second prestage, and
    their pin: lying as a received result's do (one run of pages, page-locked where the
    first were), so that the second prestage uploads them the same way."""
    arrays = (prepared.a, prepared.b, prepared.c)
    if prepared.abc_pin is None or pin is None:
        return (*(np.array(x) for x in arrays), None)
    raw = mmap.mmap(-1, sum(x.nbytes for x in arrays))
    region = np.frombuffer(raw, dtype=np.uint32).reshape(3, *arrays[0].shape)
    for row, x in zip(region, arrays, strict=True):
        row[...] = x
    return (*region, pin(region))


def _kernels_unsynced(
    ex: Any, part: Any, abc: tuple[Any, ...], timed: Callable[..., Any]
) -> tuple[float, float]:
    """The kernels stage of `part` once more, uploaded again from `abc` (its a, b, c and
    their pin, `_abc_kept`), as a
    run launches it: without the probe, whose phase clock syncs the device after each
    phase (simgpu.calibrate.fit.unsynced_scale).  Seconds of (the prestage again, the
    kernels); the pool's trace, if one is on, does not see them.  The prestage's second
    reading is kept beside the first: on the 25th and 26th leases' H200s the first read
    24-32% over what a prestage with nothing beside it took in the pipeline (median of
    105-113 spans, experiments/stage_overlap.py), the kernels 4-5%."""
    from simgpu.prover import handoff

    device = ex.backends[0]
    prepared = part.host.prepared
    prepared.a, prepared.b, prepared.c, prepared.abc_pin = abc
    probe, ex.probe = ex.probe, None
    trace = getattr(device, "alloc_trace", None)
    if trace is not None:
        device.alloc_trace = None
    try:
        buffers, again = timed("prestage", part, 0)
        try:
            handoff.settled()  # the copy's pin unlocked first, as measure_size's
            _, dt = timed("kernels", part, 0, buffers=buffers)
        finally:
            ex.free(buffers)
    finally:
        ex.probe = probe
        if trace is not None:
            device.alloc_trace = trace
    return again, dt


def _trace_last(device: Any, last: bool) -> Any:
    """An AllocTrace on `device` for the last repeat, where the device has a pool to trace
    (None otherwise): the arrays a caching pool sees (simgpu.calibrate.arrays)."""
    if not last or not hasattr(device, "alloc_trace"):
        return None
    from simgpu.prover.device import AllocTrace

    device.alloc_trace = AllocTrace()
    return device.alloc_trace


#: How many synthesis results `measure_trips` brings back at once: a proof's partitions
#: are synthesized together, so their results come back together.
TRIPS_AT_ONCE = 4


def measure_trips(ex: Any, n: int, k: int, repeats: int) -> tuple[list[float], list[float]]:
    """A synthesis result's trip back to the driver (its wall time less its compute, as
    the executor's synthesis stage makes it: the worker hands it off, the driver receives
    it on the calling thread), alone and with k handed back at once from k threads:
    (trips alone, each trip of the k together), `repeats` rounds of each.  The k queue
    for what the driver serializes of them, one after another (`build.trips_share`)."""
    from simgpu.prover import handoff
    from simgpu.sched.work import Partition, Proof

    seeds = iter(range(5000, 10**9))

    def trip(out: list[float], start: threading.Barrier | None) -> None:
        part = Partition(Proof(next(seeds), 1, n), 0, n)
        if start is not None:
            start.wait()
        t = time.perf_counter()
        job = ex.pool().submit(handoff.synthesize_handed_off_timed, ex.spec, ex.partition_seed(part), ex._tag)
        result, compute, _, extra = job.result()
        synth = handoff.receive(result, ex.pin)
        out.append(max(0.0, time.perf_counter() - t - extra - compute))
        del synth  # its memory goes back with its arrays

    alone: list[float] = []
    together: list[float] = []
    for _ in range(repeats):
        trip(alone, None)
        barrier = threading.Barrier(k)
        threads = [threading.Thread(target=trip, args=(together, barrier)) for _ in range(k)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    if len(together) < k * repeats:
        raise RuntimeError("a synthesis of the trips-at-once measurement failed (see its thread's error)")
    return alone, together


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

    with pool_of(procs) as pool:
        return float(sum(pool.map(_stream, [nbytes] * procs, [seconds] * procs)))


def measure_h2d(nbytes: int = 1 << 30) -> float | None:
    """Pinned host -> device copy bandwidth (GB/s), or None without CuPy."""
    try:
        from simgpu.gpu.cuda import get_cupy

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


#: How long a worker waits for the others of its round before the measurement gives up.
BARRIER_TIMEOUT = 120.0


def _arrive(barrier: Any) -> None:
    """Wait until every worker of the pool has a task: the pool starts its processes on
    demand, so only tasks that wait for each other make it start all of them."""
    barrier.wait(BARRIER_TIMEOUT)


def _synth_together(circuit: str, spec_n: int, seed: int, barrier: Any) -> float:
    """One synthesis, started when the k of its round are all ready (barrier: k
    parties): k at once, not k handed out one by one to whichever worker is free."""
    barrier.wait(BARRIER_TIMEOUT)
    return _synth_task(circuit, spec_n, seed)


def _synth_task(circuit: str, spec_n: int, seed: int) -> float:
    from simgpu.prover.circuits import circuit_spec
    from simgpu.prover.synthesis import synthesize

    t = time.perf_counter()
    synthesize(circuit_spec(circuit, spec_n), seed)
    return time.perf_counter() - t


def pair_ratio(pairs: list[tuple[float, float]]) -> float | None:
    """The median of (alone, beside) pairs' ratios beside / alone (None without a pair
    whose call alone took any time)."""
    ratios = [b / a for a, b in pairs if a > 0]
    return statistics.median(ratios) if ratios else None


@dataclass
class Contention:
    """Contention measurements at one partition size (measure_contention): syntheses k at
    once, the driver's stages alone and beside a load, the device queue and the interpreter
    lock, with the host's cores and memory bandwidth."""

    n: int
    cores: int
    membw_gbps: float
    synthesis: dict[int, float]  # k at once -> mean seconds each
    loaded: dict[str, tuple[float, float]]  # stage -> (alone, beside `pressure_load` syntheses)
    #: "<stage> beside <load>" -> (alone, beside); empty where not measured
    device_queue: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: how many syntheses ran, continuously, beside the `loaded` stages
    pressure_load: int = 0
    #: stage -> (alone, beside a thread of pure Python, the share of its rounds that
    #: thread lost while the stage ran, the mean wait a request for the interpreter lock
    #: met beside it, beside a bursty thread of Python; each 0 where not measured); measure_gil
    gil: dict[str, tuple[float, float, float, float, float]] = field(default_factory=dict)
    #: stage -> each repeat's (alone, beside) in the order measured, the two calls back to
    #: back; empty where not kept (profiles calibrated before they were)
    loaded_pairs: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    #: stage -> each repeat's (alone, beside results coming back, the results on their
    #: way back beside it, the syntheses computing beside it), measure_handoff; empty
    #: where not measured (profiles calibrated before it was)
    handoff: dict[str, list[tuple[float, float, float, float]]] = field(default_factory=dict)
    #: the wait a request for the interpreter lock meets beside a thread of pure Python
    #: and beside a bursty one (seconds; 0 where not measured: profiles calibrated
    #: before measure_gil timed them)
    gil_waits: tuple[float, float] = (0.0, 0.0)
    #: k at once -> each of those syntheses' seconds, round by round: their
    #: spread beside each other, where a lone synthesis's six repeats (the stage's
    #: noise_cv) miss what a loaded host's cores do to one call (docs/validation-log.md,
    #: the fifty-second lease); empty where not kept (profiles calibrated before)
    synthesis_calls: dict[int, list[float]] = field(default_factory=dict)


def measure_contention(n: int, settings: Any, ks: list[int], log: Callable[[str], None]) -> Contention:
    """The host's memory bandwidth, k syntheses at once for k in ks (each in its own
    process), and what the driver's stages meet beside others (`driver_readings`)."""
    cores = os.cpu_count() or 1
    membw = measure_membw(cores)
    log(f"  host memory bandwidth, {cores} processes: {membw:.1f} GB/s")
    times: dict[int, float] = {}
    calls: dict[int, list[float]] = {}
    # Each worker builds the circuit of size n as it starts: a worker's first synthesis at
    # a size also builds its circuit (seconds at 2^22), which no timed load may hold.
    with (
        pool_of(max(ks), _synth_task, (settings.circuit, n, 0)) as pool,
        multiprocessing.get_context("spawn").Manager() as mgr,  # the rounds' barriers
    ):
        circ = [settings.circuit] * max(ks)
        list(pool.map(_arrive, [mgr.Barrier(max(ks))] * max(ks)))  # every worker started
        for k in ks:
            each: list[float] = []
            for rnd in range(SYNTHESIS_ROUNDS):
                together = [mgr.Barrier(k)] * k
                each += pool.map(_synth_together, circ[:k], [n] * k, range(rnd * k, (rnd + 1) * k), together)
            times[k], calls[k] = statistics.mean(each), each
            log(f"  {k} syntheses at once: {times[k]:.3f} s each, spread {spread(each):.3f}")
        readings = driver_readings(n, settings, pool, cores, log)
    return Contention(n, cores, membw, times, **readings, synthesis_calls=calls)


def spread(xs: list[float]) -> float:
    """The coefficient of variation of calls' seconds (0 for fewer than two)."""
    mean = statistics.fmean(xs) if len(xs) > 1 else 0.0
    return statistics.pstdev(xs) / mean if mean else 0.0


def measure_stage_contention(
    n: int, settings: Any, cores: int, membw_gbps: float, log: Callable[[str], None]
) -> Contention:
    """At one more size, what each stage meets beside others, as measure_contention
    times it at its own: the driver's stages beside the pressure load, the device's
    pairings, the interpreter lock and results coming back (not the k-at-once syntheses
    or the host's bandwidth, which are the host's and read once).  A stage's share of
    the device and its sensitivity to busy cores change with its size: a launch loop of
    13 ms at 2^20 is more of its own host work than one of 58 ms at 2^22 (the thirtieth
    lease's b_g2_msm at 2^20, read with 2^22's shares, 20-34% fast), and one pairing read
    at one size sets the share at every size (docs/validation-log.md, the thirty-first
    lease).  simgpu.calibrate.build.stage_uses_over turns the sizes' readings into laws."""
    with pool_of(pressure_syntheses(cores), _synth_task, (settings.circuit, n, 0)) as pool:
        readings = driver_readings(n, settings, pool, cores, log)
    return Contention(n, cores, membw_gbps, {}, **readings)


def pressure_syntheses(cores: int) -> int:
    """The syntheses measure_pressure keeps running beside each stage: a pipeline's load,
    below saturation, where pressure shows."""
    return max(1, cores // 2)


def driver_readings(
    n: int, settings: Any, pool: Any, cores: int, log: Callable[[str], None]
) -> dict[str, Any]:
    """What the driver's stages meet beside others at size n, on a prover set up with
    `settings`: the pressure load of syntheses in `pool` (its workers' circuits built),
    the device's pairings, the interpreter lock and results coming back, as
    Contention's fields."""
    from simgpu.real.executor import ProverExecutor

    k = pressure_syntheses(cores)
    ex = ProverExecutor(settings.spec(n), settings)
    try:
        pairs = measure_pressure(ex, pool, settings.circuit, n, k, log)
        queue = measure_device_queue(ex, n, log)
        gil, gil_waits = measure_gil(ex, n, log)
        handoff = measure_handoff(ex, n, log)
    finally:
        ex.close()
    return {
        "loaded": {s: (min(a for a, _ in ps), min(b for _, b in ps)) for s, ps in pairs.items()},
        "device_queue": queue,
        "pressure_load": k,
        "gil": gil,
        "loaded_pairs": pairs,
        "handoff": handoff,
        "gil_waits": gil_waits,
    }


#: Rounds of k syntheses at once that measure_contention averages, per k.
SYNTHESIS_ROUNDS = 2


def measure_pressure(
    ex: Any, pool: Any, circuit: str, n: int, k: int, log: Callable[[str], None], repeats: int = 6
) -> dict[str, list[tuple[float, float]]]:
    """Each of the driver's stages (PRESSURE_STAGES) on a fresh partition, alone and
    beside k syntheses kept running in `pool` (worker processes whose circuits are
    built) until it ends, and the way back of that partition's synthesis result (TRIP):
    stage -> `repeats` pairs (alone, beside), each pair two calls back to back.  k below
    the cores: what busy cores cost each other before any is oversubscribed (the
    `pressure` resource; simgpu.calibrate.fit.fit_pressure reads each pair's ratio).

    The driver's stages are bimodal on a VM (the epilogue 15 or 30 ms), and a ratio of
    medians, or of the fastest calls each way, can read a change of mode as pressure
    (0.04 on one lease, 1.0 on the next; prestage 1.41x at 2^20 where six other
    calibrations read 0.99-1.25).  The two calls of a pair run within a second of each
    other, mostly in one mode."""
    seeds = iter(range(700, 10**9))
    # a prover that page-locks a, b, c as they land: the lock too, as a stage of its own
    lock_bytes = 3 * 32 * n if (ex.settings.backend, ex.settings.abc_upload) == ("cupy", "pinned") else 0
    lock_failed: list[str] = []

    def chain() -> dict[str, float]:
        times = driver_chain(ex, n, next(seeds), trip=True)
        if lock_bytes and not lock_failed:
            try:
                times[LOCK] = time_lock(lock_bytes)
            except Exception as e:  # noqa: BLE001 - said once; the stages' readings stand
                lock_failed.append(f"{type(e).__name__}: {e}")
                log(f"  {LOCK}: not measured ({lock_failed[0]})")
        return times

    futures: list[Any] = []

    def load() -> None:  # keeps k syntheses in flight
        while len(futures) < k:
            futures.append(pool.submit(_synth_task, circuit, n, 900 + len(futures)))
        futures.pop(0).result()

    chain()  # warm
    samples: dict[tuple[str, bool], list[float]] = {}
    for _ in range(repeats):
        for beside in (False, True):
            stop, started, errors = threading.Event(), threading.Event(), []
            thread = None
            if beside:
                thread = threading.Thread(target=_loop, args=(load, stop, started, errors), daemon=True)
                thread.start()
                started.wait()  # one synthesis of the load done: the others are running
            try:
                if errors:
                    raise errors[0]
                times = chain()
            finally:
                stop.set()
                if thread is not None:
                    thread.join()
                for f in futures:
                    f.result()
                futures.clear()
            if errors:
                raise errors[0]
            for stage, dt in times.items():
                samples.setdefault((stage, beside), []).append(dt)
    timed = (*PRESSURE_STAGES, TRIP) + ((LOCK,) if lock_bytes and not lock_failed else ())
    out = {s: list(zip(samples[(s, False)], samples[(s, True)], strict=True)) for s in timed}
    for s, pairs in out.items():
        ratio = pair_ratio(pairs) or 0.0
        log(
            f"  {s}: {min(a for a, _ in pairs) * 1e3:.1f} ms alone, "
            f"{min(b for _, b in pairs) * 1e3:.1f} ms beside {k} syntheses (fastest); "
            f"{ratio:.3f}x pair by pair (median)"
        )
    return out


#: How many synthesis results measure_handoff keeps coming back at once: each driver
#: stage of the stored 2^22 grids had 1.2-1.5 results on their way back beside it.
HANDOFF_STREAMS = 2


def measure_handoff(
    ex: Any, n: int, log: Callable[[str], None], repeats: int = 6
) -> dict[str, list[tuple[float, float, float, float]]]:
    """Each driver stage (PRESSURE_STAGES) on a fresh partition, alone and beside
    synthesis results coming back into this process as a pipeline's do: HANDOFF_STREAMS
    threads, each over and over a synthesis in the executor's pool, its result handed
    off, received (mapped into the driver, not page-locked: the pins' own cost is
    measured apart, simgpu.calibrate.pins, and the model adds it as pauses; read here it
    would count twice, and noisily: the 38th lease's prestage read 0.43, the median of
    four repeats two of which took 1.8x and 4.4x as long beside, where a pin's unlock
    stands the device still) and dropped.  stage -> `repeats` tuples
    (alone, beside, the results on their way back beside it, the syntheses computing
    beside it), the two calls back to back; the last two are mean counts over the call
    beside, from each result's trip (its wall time less its compute, as measure_trips
    reads it) and compute, timed in its stream.

    Why: in the stored grids every driver stage ran 2-21% longer for each result on its
    way back beside it (prestage most), and -4..+4% for each synthesis computing beside
    it (experiments/stage_overlap.py --split-synthesis, four leases), where the pressure
    load of measure_pressure computes and brings nothing back.  This times the first
    alone; simgpu.calibrate.fit.fit_handoff reads the pairs into the `handoff` resource.
    On the thirty-first lease (an H100) it read 0 for every stage, where that lease's
    spans gave +3..+18%: the spans' correlation, not the result's own doing
    (docs/validation-log.md)."""
    from simgpu.prover import handoff
    from simgpu.sched.work import Partition, Proof

    seeds = iter(range(3700, 10**9))
    load_seeds = iter(range(4700, 10**9))
    trips: list[tuple[float, float]] = []  # (start, end) of each result's way back
    computes: list[tuple[float, float]] = []

    def stream(stop: threading.Event, errors: list[BaseException]) -> None:
        try:
            while not stop.is_set():
                part = Partition(Proof(next(load_seeds), 1, n), 0, n)
                t = time.perf_counter()
                job = ex.pool().submit(
                    handoff.synthesize_handed_off_timed, ex.spec, ex.partition_seed(part), ex._tag
                )
                result, compute, _, extra = job.result()
                # not page-locked: what the pins cost the driver's stages is [pins]'s
                # (simgpu.calibrate.pins), which the model adds as pauses of its own
                synth = handoff.receive(result)
                end = time.perf_counter()
                del synth  # its memory goes back with its arrays, as a pipeline's does
                trip = max(0.0, end - t - extra - compute)
                trips.append((end - trip, end))
                computes.append((end - trip - compute, end - trip))
        except BaseException as e:  # noqa: BLE001 - handed to the measuring thread
            errors.append(e)

    def mean_count(spans: list[tuple[float, float]], a: float, b: float) -> float:
        return sum(max(0.0, min(b, y) - max(a, x)) for x, y in spans) / max(1e-12, b - a)

    # a stream waiting for a worker would count the wait as its result's trip
    streams = max(1, min(HANDOFF_STREAMS, ex.settings.partition_workers))
    driver_chain(ex, n, next(seeds))  # warm
    out: dict[str, list[tuple[float, float, float, float]]] = {s: [] for s in PRESSURE_STAGES}
    for _ in range(repeats):
        alone = driver_chain(ex, n, next(seeds))
        trips.clear()
        computes.clear()
        stop, errors = threading.Event(), []
        threads = [threading.Thread(target=stream, args=(stop, errors), daemon=True) for _ in range(streams)]
        for th in threads:
            th.start()
        while len(trips) < streams and not errors:  # every stream past its first result
            time.sleep(0.001)
        spans: dict[str, tuple[float, float]] = {}
        try:
            beside = driver_chain(ex, n, next(seeds), spanned(spans)) if not errors else {}
        finally:
            stop.set()
            for th in threads:
                th.join()
        if errors:
            raise errors[0]
        for s in PRESSURE_STAGES:
            a, b = spans[s]
            out[s].append((alone[s], beside[s], mean_count(trips, a, b), mean_count(computes, a, b)))
    for s, rows in out.items():
        ratio = statistics.median(b / a for a, b, _, _ in rows if a > 0)
        m = statistics.mean(r for _, _, r, _ in rows)
        log(f"  {s}: {ratio:.3f}x beside results coming back ({m:.2f} on their way back on average)")
    return out


def measure_beside_prep(
    ex: Any, n: int, log: Callable[[str], None], repeats: int = 6
) -> dict[str, tuple[float, float]]:
    """Each driver stage (PRESSURE_STAGES) on a fresh partition, alone and beside another
    thread of the driver that runs prep over and over (on a partition of its own):
    stage -> (fastest alone, fastest beside).  In the pipeline prep is the driver's
    most common neighbour (2.7 of them beside each prep at 2^22 on the twenty-fourth
    lease), and the host stages' spans run 8-30% longer for each prep that overlapped
    them there, where a busy core's pressure gives 2%.  This times the loss where
    nothing else runs (experiments/beside_prep.py; docs/validation-log.md: at 2^20 on an
    H100 there was none, so calibrate does not run it).  The fastest of `repeats` each
    way, as measure_pressure (the driver's stages are bimodal from call to call on these
    VMs)."""
    from simgpu.prover import groth16
    from simgpu.sched.work import Partition, Proof

    seeds = iter(range(2700, 10**9))
    neighbour = Partition(Proof(2600, 1, n), 0, n)
    host = ex.run_stage("synthesis", neighbour, None, {})

    def prep_once() -> None:  # prep only reads the synthesis: the same one serves every round
        groth16.prep(host.synth, ex.pk)

    alone: dict[str, list[float]] = {s: [] for s in PRESSURE_STAGES}
    beside: dict[str, list[float]] = {s: [] for s in PRESSURE_STAGES}
    try:
        driver_chain(ex, n, next(seeds))  # warm
        for _ in range(repeats):
            for stage, dt in driver_chain(ex, n, next(seeds)).items():
                alone[stage].append(dt)
            stop, started, errors = threading.Event(), threading.Event(), []
            thread = threading.Thread(target=_loop, args=(prep_once, stop, started, errors), daemon=True)
            thread.start()
            started.wait()  # one prep done: the neighbour is in its stride
            try:
                if errors:
                    raise errors[0]
                times = driver_chain(ex, n, next(seeds))
            finally:
                stop.set()
                thread.join()
            if errors:
                raise errors[0]
            for stage, dt in times.items():
                beside[stage].append(dt)
    finally:
        host.free()
    out = {s: (min(alone[s]), min(beside[s])) for s in PRESSURE_STAGES}
    for s, (a, b) in out.items():
        log(f"  {s}: {a * 1e3:.1f} ms alone, {b * 1e3:.1f} ms beside another thread's prep")
    return out


class ReadyCopies:
    """Fresh copies of some arrays, made ahead on a side thread: a load that consumes its
    inputs (prestage lets a, b, c go) takes the next copy ready, as a pipeline's next
    worker takes a partition already synthesised, instead of copying on its own time (at
    2^22 that was 400 MB a round, and the device idled meanwhile: docs/validation-log.md,
    the twenty-sixth lease).  `depth` copies are kept ready; `close` stops the thread."""

    def __init__(self, arrays: tuple[np.ndarray, ...], depth: int = 2) -> None:
        self._arrays = arrays
        self._ready: queue.Queue[tuple[np.ndarray, ...]] = queue.Queue(maxsize=depth)
        self._closed = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._keep, name="ready_copies", daemon=True)
        self._thread.start()

    def _keep(self) -> None:
        try:
            while not self._closed.is_set():
                copies = tuple(x.copy() for x in self._arrays)
                while not self._closed.is_set():
                    try:
                        self._ready.put(copies, timeout=0.05)
                        break
                    except queue.Full:
                        continue
        except BaseException as e:  # handed to `take`, which would otherwise wait for ever
            self._error = e

    def take(self, poll: float = 1.0) -> tuple[np.ndarray, ...]:
        """The next copy; raises, rather than waiting for ever, if the thread has died
        (out of host memory, say: its error is the cause)."""
        while True:
            try:
                return self._ready.get(timeout=poll)
            except queue.Empty:
                if not self._thread.is_alive():
                    raise RuntimeError("the thread copying a load's inputs stopped") from self._error

    def close(self) -> None:
        self._closed.set()
        self._thread.join()


def _loop(
    fn: Callable[[], None],
    stop: threading.Event,
    started: threading.Event,
    errors: list[BaseException],
    rounds: list[tuple[float, float]] | None = None,
) -> None:
    """Run fn until stopped; `started` once one call has ended (the load's steady state),
    or it failed (into `errors`: whoever waits on `started` must not wait for ever).
    `rounds`, if given, gets each call's start and end (perf_counter)."""
    try:
        while not stop.is_set():
            t = time.perf_counter()
            fn()
            if rounds is not None:
                rounds.append((t, time.perf_counter()))
            started.set()
    except BaseException as e:
        errors.append(e)
    finally:
        started.set()


def rounds_within(rounds: list[tuple[float, float]], start: float, end: float) -> float:
    """How many of a load's `rounds` (start, end) ran within [start, end]: each round
    counts by the share of it inside the window (its progress taken as even through it)."""
    done = 0.0
    for a, b in rounds:
        if b > a:
            done += max(0.0, min(b, end) - max(a, start)) / (b - a)
    return done


#: What `measure_device_queue` times, each beside which continuous load.
QUEUE_PAIRS = (
    ("kernels", "kernel_load"),
    ("kernels", "copy_load"),
    ("prestage", "kernel_load"),
    ("b_g2_msm", "copy_load"),
    ("kernels", "one_prestage"),
    ("b_g2_msm", "one_prestage"),
    # the in-order stream's pairings (fit_device_queue): b_g2_msm beside its own loop
    # and beside another GPU worker's prestage + kernels; the kernels and prestage
    # beside that worker, the law's check
    ("b_g2_msm", "kernel_load"),
    ("b_g2_msm", "gpu_load"),
    ("kernels", "gpu_load"),
    ("prestage", "gpu_load"),
)


def measure_device_queue(
    ex: Any, n: int, log: Callable[[str], None], repeats: int = 3
) -> dict[str, tuple[float, float]]:
    """Each device stage alone and beside a continuous load of device work on another
    thread, as a second GPU worker would run it: `kernel_load`, the G2 MSM of a partition
    (pure kernels, repeatable); `copy_load`, uploads of prestage's bytes (host to device,
    freed at once).  How much each slows the other says how the device shares its work
    between workers: as one in-order queue (a driver whose workers all launch into one
    stream: everything serialises), or as copy engine beside compute (separate streams:
    copies overlap kernels).  And the kernels and b_g2_msm beside `one_prestage`: one
    prestage of another partition started with them, as the next worker's in a pipeline
    (reported with "one_prestage": that prestage alone, and as long as it lasted there).  Fitted by
    simgpu.calibrate.fit.fit_device_queue.  b_g2_msm is timed only where the settings put
    it on the device.

    Each pairing is also read from the load's side, under "<load> beside <stage>": the
    seconds a round of the load takes alone (the median of its rounds run on their own)
    and while the stage ran (the stage's time over the rounds done in it).  A stage and a
    load that share the device without loss split its time: the two slowdowns then
    satisfy 1/s_stage + 1/s_load = 1 for work wholly on the device; both sides are what
    tells a loss of device time from a share (docs/validation-log.md, the twenty-fourth
    lease)."""
    from simgpu.prover import groth16
    from simgpu.sched.work import Partition, Proof

    backend = ex.backends[0]

    def fresh(i: int) -> Partition:
        part = Partition(Proof(300 + i, 1, n), 0, n)
        part.host = ex.run_stage("synthesis", part, None, {})
        ex.run_stage("prep", part, None, {})
        return part

    load_part = fresh(0)
    copy_bytes = np.random.default_rng(n).integers(0, 1 << 32, (3 * n, 8), dtype=np.uint32)

    def kernel_load() -> None:
        groth16.b_g2_msm(load_part.host.prepared, ex.pk, backend=backend)
        backend.synchronize()

    def copy_load() -> None:
        buf = backend.upload("copy_load", copy_bytes)
        backend.synchronize()
        backend.free(buf)

    gpu_load_part = fresh(200)
    kept = gpu_load_part.host.prepared

    def gpu_load() -> None:
        prepared = gpu_load_part.host.prepared
        prepared.a, prepared.b, prepared.c = inputs.take()
        buffers = ex.run_stage("prestage", gpu_load_part, 0, {})
        try:
            ex.run_stage("kernels", gpu_load_part, 0, {"buffers": buffers})
        finally:
            buffers.free()

    loads = {"kernel_load": kernel_load, "copy_load": copy_load, "gpu_load": gpu_load}

    def gpu_part(part: Partition) -> dict[str, tuple[float, float]]:
        t = time.perf_counter()
        buffers = ex.run_stage("prestage", part, 0, {})
        t1 = time.perf_counter()
        ex.run_stage("kernels", part, 0, {"buffers": buffers})
        t2 = time.perf_counter()
        buffers.free()
        return {"prestage": (t, t1), "kernels": (t1, t2)}

    def b_g2(part: Partition) -> dict[str, tuple[float, float]]:
        t = time.perf_counter()
        ex.run_stage("b_g2_msm", part, 0, {})
        return {"b_g2_msm": (t, time.perf_counter())}

    def round_alone(load: str) -> float:
        """Seconds one round of `load` takes on its own (the median of three)."""
        times = []
        for _ in range(3):
            t = time.perf_counter()
            loads[load]()
            times.append(time.perf_counter() - t)
        return statistics.median(times)

    def beside_one_prestage(fn: Callable[[], None], i: int) -> tuple[float, float]:
        """fn timed while another worker's prestage, started with it, uploads a fresh
        partition: (fn's seconds, the prestage's)."""
        side = fresh(100 + i)
        start = threading.Barrier(2)
        got: dict[str, Any] = {}

        def upload() -> None:
            try:
                start.wait()
                t = time.perf_counter()
                got["buffers"] = ex.run_stage("prestage", side, 0, {})
                got["seconds"] = time.perf_counter() - t
            except BaseException as e:
                got["error"] = e
                start.abort()

        thread = threading.Thread(target=upload, name="one_prestage", daemon=True)
        thread.start()
        try:
            start.wait()
            t = time.perf_counter()
            fn()
            dt = time.perf_counter() - t
        finally:
            thread.join()
            if "buffers" in got:
                got["buffers"].free()
            side.host.free()
        if "error" in got:
            raise got["error"]
        return dt, got["seconds"]

    on_device = ex.settings.b_g2_on == "gpu"
    sums: dict[tuple[str, str], list[float]] = {}
    # prestage lets a, b, c go, so each round needs a fresh copy: made ahead on a side
    # thread, as the pipeline's next worker finds its inputs synthesised, so that the
    # loop is the device work it stands for
    inputs = ReadyCopies(tuple(np.array(x) for x in (kept.a, kept.b, kept.c)))
    try:
        for rep in range(repeats):
            # the kernels and b_g2_msm each beside one prestage started with them
            part = fresh(50 + rep)
            buffers = ex.run_stage("prestage", part, 0, {})
            try:
                kernels = functools.partial(ex.run_stage, "kernels", part, 0, {"buffers": buffers})
                dt, up = beside_one_prestage(kernels, 2 * rep)
            finally:
                buffers.free()
            sums.setdefault(("kernels", "one_prestage"), []).append(dt)
            sums.setdefault(("one_prestage", "kernels"), []).append(up)
            if on_device:
                g2_call = functools.partial(ex.run_stage, "b_g2_msm", part, 0, {})
                dt, up = beside_one_prestage(g2_call, 2 * rep + 1)
                sums.setdefault(("b_g2_msm", "one_prestage"), []).append(dt)
                sums.setdefault(("one_prestage", "b_g2_msm"), []).append(up)
            part.host.free()
            for i, load in enumerate((None, "kernel_load", "copy_load", "gpu_load")):
                stop, started, errors = threading.Event(), threading.Event(), []
                rounds: list[tuple[float, float]] = []
                if load is not None:
                    sums.setdefault((load, "alone"), []).append(round_alone(load))

                part = fresh(1 + 4 * rep + i)  # made before the load starts: only device work overlaps it
                thread = None
                if load is not None:
                    thread = threading.Thread(
                        target=_loop,
                        args=(loads[load], stop, started, errors, rounds),
                        name=load,
                        daemon=True,
                    )
                    thread.start()
                    started.wait()  # timed in the load's steady state, not its start
                try:
                    if errors:
                        raise errors[0]
                    times = gpu_part(part)
                    if on_device:
                        times |= b_g2(part)
                finally:
                    stop.set()
                    if thread is not None:
                        thread.join()
                    part.host.free()
                if errors:  # the load failed while the stage ran: the timing is not beside it
                    raise errors[0]
                for stage, (t0, t1) in times.items():
                    sums.setdefault((stage, load or "alone"), []).append(t1 - t0)
                    done = rounds_within(rounds, t0, t1) if load is not None else 0.0
                    if done > 0:  # the load's side: its seconds a round while the stage ran
                        sums.setdefault((load, stage), []).append((t1 - t0) / done)
    finally:
        inputs.close()
    load_part.host.free()
    gpu_load_part.host.free()
    out: dict[str, tuple[float, float]] = {}
    for stage, load in QUEUE_PAIRS:
        if (stage, load) in sums:
            alone = statistics.median(sums[(stage, "alone")])
            beside = statistics.median(sums[(stage, load)])
            out[f"{stage} beside {load}"] = (alone, beside)
            what = {"one_prestage": "prestage started with it", "gpu_load": "another GPU worker's loop"}.get(
                load, "a " + load.replace("_", " ")
            )
            side = sums.get((load, stage))
            if side and (load, "alone") in sums:
                # the load's round alone, and as long as a round took while the stage ran
                pace = (statistics.median(sums[(load, "alone")]), statistics.median(side))
                out[f"{load} beside {stage}"] = pace
                what += f", whose rounds took {pace[1] / pace[0]:.2f}x as long meanwhile"
            log(f"  {stage}: {alone * 1e3:.1f} ms alone, {beside * 1e3:.1f} ms beside {what}")
    started = {st: xs for st in ("kernels", "b_g2_msm") if (xs := sums.get(("one_prestage", st)))}
    if started:
        # the prestage they ran beside: alone, and as long as it lasted beside them all
        alone = statistics.median(sums[("prestage", "alone")])
        out["one_prestage"] = (alone, statistics.median(x for xs in started.values() for x in xs))
        # and beside each apart: a single lock hands the next worker's prestage over
        # while the last holder's b_g2_msm runs, two locks start it beside its kernels
        # (on the thirty-third lease's card 2.2x and 1.4-1.5x its time alone)
        for stage, xs in started.items():
            out[f"one_prestage beside {stage}"] = (alone, beside := statistics.median(xs))
            log(f"  prestage: {alone * 1e3:.1f} ms alone, {beside * 1e3:.1f} ms started with {stage}")
    return out
