"""Building a profile from measurements, and the `simgpu calibrate` entry point.

Footprints come from the prover's memory plan (exact, and checked against the device
pool's peak, which is recorded beside it); times from the fitted laws; the raw
measurements go into the profile too, so that a fit can be redone (calibrate.refit).
An interrupted calibration (Ctrl-C, or VRAM exhausted at the top size) still writes
what it measured and says what is missing.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from simgpu.calibrate.arrays import arrays_table
from simgpu.calibrate.fit import (
    DEFAULT_DEVICE_LAW,
    LAW_PAIRS,
    SIZE_LAWS,
    alone_readings,
    buffer_law,
    device_law,
    fit_device_queue,
    fit_gil,
    fit_handoff,
    fit_pressure,
    fit_synthesis_contention,
    phase_means,
    pooled_alone,
    sync_gap,
    time_law,
    time_laws,
)
from simgpu.calibrate.measure import (
    LOCK,
    TRIP,
    Contention,
    SizeRun,
    measure_contention,
    measure_h2d,
    measure_size,
    measure_stage_contention,
    serialized_share,
    spread,
)
from simgpu.calibrate.pins import burst_summary, fit_pins, measure_pins
from simgpu.errors import OutOfMemory, UserError
from simgpu.profile.laws import fit_law
from simgpu.profile.schema import phase_key
from simgpu.profile.tomlwrite import Inline, dumps


def _hardware_facts(runs: list[SizeRun], membw: float | None, h2d: float | None) -> dict[str, Any]:
    """The executor's account of the machine, with the bandwidths calibrate measured
    (defaults where it could not: no contention runs, no GPU)."""
    hw = dict(runs[0].hardware)
    hw.pop("vram_resident", None)  # fitted over the ladder below
    hw["membw_gbps"] = round(membw, 2) if membw else 50.0
    hw["h2d_gbps"] = round(h2d, 2) if h2d else 25.0
    return hw


def build_profile(
    name: str,
    runs: list[SizeRun],
    contention: Contention | None,
    settings: Any,
    h2d: float | None,
    partitions: int,
    missing: list[str],
    device_law: str = "proportional",
    more: list[Contention] | None = None,
    pins: dict[str, list[list[float]]] | None = None,
) -> tuple[dict[str, Any], dict[str, float]]:
    """The profile document and the fit error of each law; `device_law`: the law the
    device's uses are fitted for (simgpu.calibrate.fit.device_law); `more`: the stages'
    contention read at other sizes (measure.measure_stage_contention); `pins`: what
    locking a, b, c where they land cost (simgpu.calibrate.pins.measure_pins), for a
    prover that did."""
    more = more or []
    from simgpu.prover.memory_plan import ProverShape, footprint_tables, prover_plan

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
            **(
                {
                    "vram_peak_b_g2_msm": r.vram_peak["b_g2_msm"],
                    "plan_peak_b_g2_msm": r.plan_peak.get("b_g2_msm", 0),
                }
                if "b_g2_msm" in r.vram_peak
                else {}
            ),
            "baseline_vram": r.buffers["_baseline_vram"],
            **({"arrays": r.arrays} if r.arrays else {}),
        }
        for r in runs
    }

    rows = list(measurements.values())
    queue = contention.device_queue if contention else {}
    gap = sync_gap(rows, (queue.get("kernels beside kernel_load") or (None,))[0], contention and contention.n)
    read = [contention, *more] if contention else []
    rows, pooled = pooled_alone(rows, {c.n: alone_readings(c) for c in read})

    def fitted(key: str) -> Inline:
        ys = phase_means(rows, key.replace(".", "_"), gap)
        law, errors[key] = time_law(ns, ys, time_laws(key.partition(".")[0]))
        return law

    top = runs[-1]
    spec = settings.spec(top.constraints)
    plan_settings = {
        "stream_batch": stream_batch_of(settings),
        "resident_bases": settings.resident_bases,
        "b_g2_on": settings.b_g2_on,
        "msm_capacity": settings.msm_capacity,
    }
    plan = prover_plan(ProverShape.estimate(spec), **plan_settings)
    _, stages_fp, _, _ = footprint_tables(plan)
    # the measured sizes' plans (their own witnesses), and the plan alone between them
    by_size = {r.constraints: r.buffers for r in runs} | {
        n: plan_buffers(settings.circuit, n, **plan_settings) for n in unmeasured_sizes(ns)
    }
    buffers, buffer_errors = buffer_laws(stages_buffers(stages_fp), by_size)
    errors.update({f"buffer {b}": e for b, e in buffer_errors.items()})
    resident = fit_law(ns, [float(max(1, r.buffers["_baseline_vram"])) for r in runs], SIZE_LAWS)
    errors["vram_resident"] = resident.max_rel_error
    hw = _hardware_facts(runs, contention.membw_gbps if contention else None, h2d)
    hw["vram_resident"] = resident.law_table()
    uses = stage_uses_over(
        [contention, *more] if contention else [],
        float(hw["h2d_gbps"]),
        settings.b_g2_on,
        settings.b_g2_threads,
        device_law=device_law,
    )
    uses.pop(LOCK, None)  # no stage: [pins] lock_pressure, read at the contention size below

    def cv(key: str) -> float:
        vals = [spread(r.seconds[key]) for r in runs if len(r.seconds[key]) > 1]
        return round(float(max(0.01, statistics.median(vals))) if vals else 0.02, 4)

    stages: dict[str, Any] = {}
    for st, fp in stages_fp.items():
        entry: dict[str, Any] = {"on": fp.get("on") or ("gpu" if st in ("prestage", "kernels") else "cpu")}
        entry.update({k: v for k, v in fp.items() if k != "phases"})
        entry["noise_cv"] = cv(st)
        if st in uses:
            entry["uses"] = Inline(uses[st])
        if "phases" in fp:
            # the kernels' phases are timed apart; another stage's one phase is the stage
            entry["phases"] = [dict(ph, time=fitted(phase_key(st, ph["name"]))) for ph in fp["phases"]]
        elif st == "synthesis" and all("synthesis.transfer" in r.seconds for r in runs):
            # Computing in a worker leans on cores and memory bandwidth (the stage's uses);
            # the way back shares the driver's result channel with every other result.
            entry["phases"] = [
                {"name": "compute", "time": fitted("synthesis.compute")},
                {
                    "name": "transfer",
                    "time": fitted("synthesis.transfer"),
                    # the reader is held for the result's receive only: its share of the
                    # trip is both what it draws of the channel and what waits on it; the
                    # worker's pickling is host work, as sensitive to busy cores as
                    # measure_pressure found the trip (where it timed it)
                    "uses": Inline(
                        driver_rx=Inline(
                            demand=(rx := driver_rx_share([(r.constraints, r.seconds) for r in runs])),
                            bound=rx,
                        ),
                        **uses.get(TRIP, {}),
                    ),
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
        # the prover's arrays in each buffer, from the device pool's trace (a caching pool's grain)
        **({"buffer_arrays": arrays} if (arrays := arrays_table(stages, _traced(runs))) else {}),
        "calibration": {
            "backend": settings.backend,
            "circuit": settings.circuit,
            "b_g2_threads": settings.b_g2_threads,
            "b_g2_on": settings.b_g2_on,
            "msm_capacity": settings.msm_capacity,
            "device_law": device_law_of(contention, device_law),
            "sizes": ns,
            "repeats": len(top.seconds["kernels"]),
            "host_drift": round(host_drift(runs)[0], 3),
            **({"abc_upload": upload} if (upload := abc_upload(runs)) else {}),
            "missing": missing,
            "fit_max_rel_error": {
                k.replace(".", "_").replace(" ", "_"): round(v, 4) for k, v in errors.items()
            },
            "measurements": measurements,
            # each driver stage's time alone read over every reading of it (fit.pooled_alone)
            **({"alone_pooled": {f"n{n}": Inline(**f) for n, f in sorted(pooled.items())}} if pooled else {}),
            **({"contention": contention_record(contention)} if contention else {}),
            # what the stages met at the other sizes read (contention_at_record)
            **({"contention_at": {f"n{c.n}": contention_at_record(c) for c in more}} if more else {}),
            **(
                {
                    "device_queue": {
                        k.replace(" ", "_"): [round(a, 6), round(b, 6)]
                        for k, (a, b) in contention.device_queue.items()
                    }
                }
                if contention and contention.device_queue
                else {}
            ),
            **(
                {
                    "pressure": {
                        "syntheses_beside": contention.pressure_load,
                        **{s: [round(a, 6), round(b, 6)] for s, (a, b) in contention.loaded.items()},
                    }
                }
                if contention and contention.loaded
                else {}
            ),
        },
    }
    if pins and pins.get("rows") and doc["calibration"].get("abc_upload") != "staged":
        doc["pins"] = fit_pins(pins["rows"])
        if (lock := lock_pressure(contention)) is not None:
            doc["pins"]["lock_pressure"] = lock
        doc["calibration"]["pins"] = {
            key: [[round(x, 6) for x in r] for r in pins[key]] for key in ("rows", "bursts") if pins.get(key)
        }
    set_device_law(doc, contention, device_law)
    return doc, errors


def lock_pressure(contention: Contention | None) -> float | None:
    """The [pins] lock_pressure: a page-lock's sensitivity to busy cores, read as a
    stage's (fit.fit_pressure) from its calls alone and beside the pressure load
    (measure.measure_pressure's LOCK) at the contention size; None where not timed."""
    if contention is None or LOCK not in contention.loaded:
        return None
    got = fit_pressure(contention, 1).get(LOCK)
    return None if got is None else float(got["pressure"]["bound"])


#: Below this share of k locks' time, a row of k locks asked for at once ran side by side
#: more than one at a time, which the model assumes (model.interpreter.pin_pause).
IN_A_ROW_WARN = 0.75


def pins_warning(pins: dict[str, Any]) -> str | None:
    """A warning where the pins probe's locks asked for at once did not run one at a time,
    as the model's turns at the driver assume (the forty-fifth lease's H100: 0.92 x four
    locks' time); None where they did, or where no row was timed."""
    bursts, rows = pins.get("bursts"), pins.get("rows")
    if not bursts or not rows:
        return None
    top = max(r[0] for r in rows)
    lock = statistics.median(r[1] for r in rows if r[0] == top)
    in_a_row, _ = burst_summary(bursts, lock)
    if in_a_row >= IN_A_ROW_WARN:
        return None
    return (
        f"warning: {bursts[0][1]:.0f} page-locks asked for at once took {in_a_row:.2f} x their time "
        "one after another: this driver runs them side by side more than the model's one-at-a-time "
        "turns assume, so its pauses as results land will read long"
    )


def stream_batch_of(settings: Any) -> int:
    """The rows per streamed batch the calibrated backend used (its default unless set)."""
    from simgpu.prover.cpu_device import DEFAULT_CPU_STREAM_BATCH
    from simgpu.prover.device import DEFAULT_STREAM_BATCH

    default = DEFAULT_CPU_STREAM_BATCH if settings.backend == "cpu" else DEFAULT_STREAM_BATCH
    return int(settings.stream_batch or default)


def unmeasured_sizes(ns: list[int]) -> list[int]:
    """The powers of two between the ladder's ends that it did not measure: where the
    profile's buffers come from the memory plan alone.  An MSM's temporaries step with
    its window (simgpu.gpu.footprint.choose_window), so between two measured sizes they
    are not the two sizes' interpolation (at 2^21, from 2^20 and 2^22, b_g2_msm's were
    17% high, and the peak VRAM of the nineteenth lease's Q and R 4.6% high)."""
    lo, hi = min(ns), max(ns)
    return [1 << k for k in range(lo.bit_length(), hi.bit_length()) if lo < 1 << k < hi and 1 << k not in ns]


def buffer_laws(
    names: Iterable[str], by_size: Mapping[int, Mapping[str, float]]
) -> tuple[dict[str, Any], dict[str, float]]:
    """Each named buffer's law over the sizes it is given at (fit.buffer_law; 0 where it
    is empty everywhere), and each law's fit error."""
    laws: dict[str, Any] = {}
    errors: dict[str, float] = {}
    xs = sorted(by_size)
    for buf in names:
        ys = [float(by_size[n][buf]) for n in xs]
        if max(ys) == 0:
            laws[buf] = 0
            continue
        laws[buf], errors[buf] = buffer_law(xs, ys)
    return laws, errors


def plan_buffers(circuit: str, n: int, **plan: Any) -> dict[str, int]:
    """The memory plan's buffers (bytes) for `circuit` at n constraints, its expected
    shape (no circuit built); `plan`: prover_plan's settings."""
    from simgpu.prover.circuits import circuit_spec
    from simgpu.prover.memory_plan import ProverShape, prover_plan

    return {
        k: int(v)
        for k, v in prover_plan(ProverShape.estimate(circuit_spec(circuit, n)), **plan)["buffers"].items()
    }


def device_law_of(contention: Contention | None, wanted: str = "proportional") -> str:
    """The law the device's stages are fitted for (simgpu.calibrate.fit.device_law)."""
    if contention and contention.device_queue:
        return device_law(contention.device_queue, wanted)
    return "proportional"


def set_device_law(doc: dict[str, Any], contention: Contention | None, wanted: str = "proportional") -> None:
    """Write into the profile `doc` the law its device's uses were fitted for: the device
    shared as its one stream (``[contention.gpu] law = "in-order"``) where that was
    `wanted` and calibrate timed the pairings it needs, else the default; the rest of
    ``[contention]`` is kept."""
    table = doc.setdefault("contention", {})
    gpu = table.setdefault("gpu", {})
    if device_law_of(contention, wanted) == "in-order":
        gpu["law"] = "in-order"
    elif gpu.get("law") == "in-order":
        del gpu["law"]
    if not gpu:
        del table["gpu"]
    if not table:
        del doc["contention"]


def stage_uses(
    contention: Contention | None,
    h2d_gbps: float,
    b_g2_on: str,
    b_g2_threads: int,
    gil: bool = False,
    device_law: str = "proportional",
) -> dict[str, dict[str, Inline]]:
    """Every stage's uses of the shared resources, fitted from what calibrate measured
    beside loads (the one place they are fitted: calibrate and refit_uses call it).

    `gil`: also fit the stages' hand-overs of the interpreter lock from the measure_gil
    runs (fit_gil: each stage's asks and the wait it makes others' asks meet).  Off by
    default until a lease has shown it predicts the pipeline's driver stages
    (refit_uses(..., gil=True) tries it on a stored calibration).
    `device_law`: the law the device queue is read with (fit_device_queue)."""
    uses: dict[str, dict[str, Inline]] = {"kernels": {"gpu": Inline(demand=1.0, bound=1.0)}}
    uses["prestage"] = {"h2d": Inline(demand=h2d_gbps, bound=1.0)}
    if contention:
        uses["synthesis"] = fit_synthesis_contention(contention)
        uses["prep"] = {"cores": Inline(demand=1.0, bound=1.0)}  # compiled loops: a core's work
        uses["b_g2_msm"] = {"cores": Inline(demand=float(b_g2_threads), bound=1.0)}
    if b_g2_on == "gpu":
        # bellperson's choice: the G2 MSM is the device's work, beside the next kernels
        uses["b_g2_msm"] = {"gpu": Inline(demand=1.0, bound=1.0)}
    if contention and contention.device_queue:
        # how the device shares its work between workers, as measured
        uses.update(fit_device_queue(contention.device_queue, h2d_gbps, device_law))
    if contention:
        b_g2_cores = b_g2_threads if b_g2_on == "cpu" else 1
        pressure = fit_pressure(contention, b_g2_cores)
        sensitivity = {st: float(u["pressure"]["bound"]) for st, u in pressure.items()}
        if gil:
            for stage, extra in fit_gil(contention, sensitivity).items():
                # asks times waits: a sensitivity, not a share (SCALING_RESOURCES)
                uses[stage] = uses.get(stage, {}) | extra
        for stage, extra in pressure.items():
            # a sensitivity beside the stage's shares, not one of them (SCALING_RESOURCES)
            uses[stage] = uses.get(stage, {}) | extra
        if handoff := fit_handoff(contention, sensitivity):
            for stage, extra in handoff.items():  # a sensitivity too
                uses[stage] = uses.get(stage, {}) | extra
            # each result on its way back is one the driver's stages are slowed by
            uses[TRIP] = uses.get(TRIP, {}) | {"handoff": Inline(demand=1.0, bound=0.0)}
    return uses


def stage_uses_over(
    contentions: list[Contention],
    h2d_gbps: float,
    b_g2_on: str,
    b_g2_threads: int,
    gil: bool = False,
    device_law: str = "proportional",
) -> dict[str, dict[str, Inline]]:
    """stage_uses at every size calibrate read what the stages meet (the first: the
    full contention runs; the others measure.measure_stage_contention's), as one law a
    use: a plain number where every size read the same, else the sizes' readings as
    points, held flat beyond the first and the last (a share or a sensitivity read at
    2^22 says nothing of its trend at 2^26).  The host's readings, the k-at-once
    syntheses, are the first size's at every size, and so is the interpreter lock where
    a size did not read it (calibrations before it was read at every size)."""
    if len(contentions) <= 1:
        return stage_uses(
            contentions[0] if contentions else None, h2d_gbps, b_g2_on, b_g2_threads, gil, device_law
        )
    first = contentions[0]
    per = {
        c.n: stage_uses(
            replace(
                c,
                synthesis=first.synthesis,
                gil=c.gil or first.gil,
                gil_waits=c.gil_waits if c.gil else first.gil_waits,
                membw_gbps=first.membw_gbps,
            ),
            h2d_gbps,
            b_g2_on,
            b_g2_threads,
            gil,
            device_law,
        )
        for c in sorted(contentions, key=lambda c: c.n)
    }
    out: dict[str, dict[str, Inline]] = {}
    # stages and resources in the order met, so that a profile is written the same every time
    for stage in dict.fromkeys(st for uses in per.values() for st in uses):
        resources = dict.fromkeys(r for uses in per.values() for r in uses.get(stage, {}))
        out[stage] = {r: _use_over(stage, r, per) for r in resources}
    return out


def _use_over(stage: str, res: str, per: Mapping[int, Mapping[str, Mapping[str, Inline]]]) -> Inline:
    """One use's readings at every size as one law (stage_uses_over): a size that did
    not read it (no pair timed there) takes its demand from the sizes that did, bound 0."""
    got = {n: uses[stage][res] for n, uses in per.items() if res in uses.get(stage, {})}
    demand = next(iter(got.values()))["demand"]
    rows = [
        (n, float(got[n]["demand"]) if n in got else demand, float(got[n]["bound"]) if n in got else 0.0)
        for n in per
    ]
    return Inline(
        demand=_over([(n, d) for n, d, _ in rows]),
        bound=_over([(n, b) for n, _, b in rows]),
    )


#: Where a law read at a few sizes is held flat: below the first and beyond the last.
_FLAT_BELOW, _FLAT_BEYOND = 1, 1 << 32


def _over(points: list[tuple[int, float]]) -> float | Inline:
    values = {round(v, 6) for _, v in points}
    if len(values) == 1:
        return points[0][1]
    pts = [[_FLAT_BELOW, points[0][1]], *[[n, v] for n, v in points], [_FLAT_BEYOND, points[-1][1]]]
    return Inline(points=pts)


def contention_record(c: Contention) -> dict[str, Any]:
    """What the profile keeps of the contention runs besides the pairs it stores apart
    (device_queue, pressure), so that refit_uses can fit the uses again."""
    return {
        "constraints": c.n,
        "cores": c.cores,
        "membw_gbps": round(c.membw_gbps, 2),
        "synthesis_at_once": {str(k): round(v, 6) for k, v in sorted(c.synthesis.items())},
        # k at once -> each of those syntheses' seconds (their spread under load)
        **(
            {
                "synthesis_at_once_calls": {
                    str(k): [round(x, 6) for x in v] for k, v in sorted(c.synthesis_calls.items())
                }
            }
            if c.synthesis_calls
            else {}
        ),
        # stage -> [alone, beside a Python thread, the share of its rounds that thread
        # lost, the wait a request for the interpreter lock met beside it, beside a
        # bursty Python thread]
        **({"gil": {s: [round(x, 7) for x in v] for s, v in c.gil.items()}} if c.gil else {}),
        # the wait a request for the lock met beside the Python thread, and beside the
        # bursty one (seconds)
        **({"gil_loop_wait": round(c.gil_waits[0], 7)} if c.gil_waits[0] else {}),
        **({"gil_burst_wait": round(c.gil_waits[1], 7)} if c.gil_waits[1] else {}),
        # stage -> each repeat's [alone, beside the pressure load], back to back
        **(
            {
                "pressure_pairs": {
                    s: [[round(a, 6), round(b, 6)] for a, b in ps] for s, ps in c.loaded_pairs.items()
                }
            }
            if c.loaded_pairs
            else {}
        ),
        # stage -> each repeat's [alone, beside results coming back, results on their way
        # back beside it, syntheses computing beside it]
        **(
            {"handoff": {s: [[round(x, 6) for x in row] for row in rows] for s, rows in c.handoff.items()}}
            if c.handoff
            else {}
        ),
    }


def contention_at_record(c: Contention) -> dict[str, Any]:
    """What the profile keeps of one more size's readings (measure_stage_contention), in
    the shape of the first size's record and its [calibration] device_queue and
    pressure tables together, for refit_uses."""
    rec = contention_record(c)
    del rec["synthesis_at_once"]  # the host's, read at the first size only
    rec.pop("synthesis_at_once_calls", None)
    rec["device_queue"] = {
        k.replace(" ", "_"): [round(a, 6), round(b, 6)] for k, (a, b) in c.device_queue.items()
    }
    rec["pressure"] = {
        "syntheses_beside": c.pressure_load,
        **{s: [round(a, 6), round(b, 6)] for s, (a, b) in c.loaded.items()},
    }
    return rec


def trips_share(alone: float, together: float, k: int) -> float:
    """The share of a synthesis result's trip that holds the driver's one reader, read
    from its time alone and the mean of k trips started at once: they reach the reader
    together and queue there, the i-th waiting for the i - 1 receives before it (the
    trips' times rise in a staircase), so together = alone * (1 + share * (k - 1) / 2)."""
    if k <= 1 or alone <= 0:
        return 1.0
    return min(1.0, max(0.0, 2.0 * (together / alone - 1.0) / (k - 1)))


def _trips_at_once(seconds: Mapping[str, list[float]]) -> tuple[int, list[float]] | None:
    for key, xs in seconds.items():
        if key.startswith("synthesis.trip_x"):
            return int(key.removeprefix("synthesis.trip_x")), xs
    return None


def result_share(seconds: Mapping[str, list[float]]) -> float | None:
    """At one size, from its measured seconds (SizeRun.seconds keys): the share of a
    result's trip the driver's reader serves, from the trips alone and several at once
    (`measure_trips`, `trips_share`); where those were not measured, all of the trip
    but the worker's pickling (`serialized_share`); None where neither was."""
    mean = statistics.mean
    got = _trips_at_once(seconds)
    if got is not None and seconds.get("synthesis.trip"):
        k, together = got
        return round(trips_share(mean(seconds["synthesis.trip"]), mean(together), k), 3)
    if "synthesis.pickle" in seconds:
        transfer, pickling = mean(seconds["synthesis.transfer"]), mean(seconds["synthesis.pickle"])
        return round(serialized_share(transfer, pickling), 3)
    return None


def driver_rx_share(sizes: list[tuple[int, Mapping[str, list[float]]]]) -> float | Inline:
    """`result_share` at each calibrated size, given as (constraints, its measured
    seconds): a points law over them; 1, every second of a trip shared, where a size
    measured neither."""
    shares = [result_share(seconds) for _, seconds in sizes]
    if any(x is None for x in shares):
        return 1.0
    if len(sizes) == 1:
        return shares[0]
    return Inline(points=[[n, x] for (n, _), x in zip(sizes, shares, strict=True)])


#: A calibration whose host ran a fixed loop this much faster at one size than at another
#: mixes host speeds in its fit (the H200 machines are VMs whose cores change speed 1.5-2x
#: for minutes): calibrate says so, and records it as [calibration] host_drift.
HOST_DRIFT_WARN = 1.25
#: Repeats of each pin size (simgpu.calibrate.pins): a lock reads within 5% of its median.
PIN_REPEATS = 3


def abc_upload(runs: list[SizeRun]) -> str | None:
    """How the calibrated repeats' a, b, c reached the device: "pinned" (page-locked where
    they landed), "staged" (through the staging), "mixed" where both, None where nothing
    was counted (a backend that pins nothing).  The prestage differs between the two."""
    total: dict[str, int] = {}
    for r in runs:
        for way, k in r.abc_uploads.items():
            total[way] = total.get(way, 0) + k
    ways = [w for w in ("pinned", "staged") if total.get(w)]
    return None if not ways else ways[0] if len(ways) == 1 else "mixed"


def host_drift(runs: list[SizeRun]) -> tuple[float, list[float]]:
    """How much the host's speed moved over the ladder: the largest over the smallest of
    each size's median reference-loop time (measure.reference_seconds), and those times."""
    refs = [statistics.median(r.seconds["epilogue.ref"]) for r in runs if r.seconds.get("epilogue.ref")]
    return (max(refs) / min(refs) if refs else 1.0), refs


def _traced(runs: list[SizeRun]) -> list[tuple[int, dict[str, int], dict[str, list[int]]]]:
    """The sizes whose last repeat traced the device pool: (size, buffer bytes, arrays)."""
    return [(r.constraints, r.buffers, r.arrays) for r in runs if r.arrays]


def stages_buffers(stages_fp: dict[str, dict[str, Any]]) -> list[str]:
    """The buffers the stage footprints name (what they leave, take and release, and their
    phases' staging, temporaries and releases), each once, in first-seen order."""
    names: list[str] = []
    for fp in stages_fp.values():
        for key in ("host_out", "vram_out", "vram_in", "host_release"):
            names += [b for b in fp.get(key, []) if b not in names]
        for ph in fp.get("phases", []):
            held = ph.get("staging", []) + ph.get("transient", []) + ph.get("release", [])
            names += [b for b in held if b not in names]
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
    device_law: str = DEFAULT_DEVICE_LAW,
    stage_sizes: list[int] | None = None,
) -> tuple[dict[str, Any], dict[str, float]]:
    """Measure, fit, write `out`.  Returns (profile document, fit errors).
    `device_law`: the law the device's uses are fitted for (fit.device_law).
    `stage_sizes`: more sizes at which to read what each stage meets beside others
    (measure_stage_contention): its uses then follow the size (stage_uses_over)."""
    runs: list[SizeRun] = []
    missing: list[str] = []
    contention = None
    more: list[Contention] = []
    h2d = None
    pins = None
    try:
        if settings.backend == "cupy":
            h2d = measure_h2d()
            log(f"host-to-device copy: {h2d:.1f} GB/s")
            if settings.abc_upload == "pinned":
                # a, b and c of the largest size, and of a quarter of it (32-byte scalars)
                top = 3 * 32 * max(sizes)
                try:
                    pins = measure_pins([top // 4, top], PIN_REPEATS, log)
                except Exception as e:  # noqa: BLE001 - said, and kept in the profile's `missing`
                    # CUDA refused the lock, or the probe failed: the profile has no [pins]
                    log(f"pins not measured: {type(e).__name__}: {e}")
                    missing.append(f"pins: not measured ({type(e).__name__}: {e})")
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
            measured = {r.constraints for r in runs}
            for m in sorted(set(stage_sizes or []) - {cn}):
                if m not in measured:  # its stages ran out of memory or were never timed
                    missing.append(f"contention at n={m}: not measured (its stages were not)")
                    continue
                log(f"what the stages meet at n = {m:,}")
                more.append(
                    measure_stage_contention(m, settings, contention.cores, contention.membw_gbps, log)
                )
    except KeyboardInterrupt:
        done = {r.constraints for r in runs}
        missing += [f"n={n}: not measured (interrupted)" for n in sizes if n not in done]
        if contention is None:
            missing.append("contention: not measured (interrupted)")
        missing += [
            f"contention at n={m}: not measured (interrupted)"
            for m in sorted(set(stage_sizes or []) - {c.n for c in more})
            if (contention is None or m != contention.n) and f"contention at n={m}:" not in " ".join(missing)
        ]
        log("interrupted: writing what was measured")
    if not runs:
        raise UserError("calibration measured nothing: no profile written")
    if contention is None and "contention: not measured (interrupted)" not in missing:
        missing.append("contention: not measured")
    doc, errors = build_profile(
        name or out.stem,
        runs,
        contention,
        settings,
        h2d,
        partitions,
        missing,
        device_law=device_law,
        more=more,
        pins=pins,
    )
    if device_law != device_law_of(contention, device_law):
        log(
            f"warning: --device-law {device_law} needs calibrate to have timed "
            f"{', '.join(LAW_PAIRS[device_law])}; without them the device is fitted proportionally"
        )
    if pins and (warning := pins_warning(pins)):
        log(warning)
    drift, refs = host_drift(runs)
    if drift > HOST_DRIFT_WARN:
        log(
            f"warning: the host's speed moved {drift:.2f}x during calibration (a fixed loop took "
            f"{min(refs) * 1e3:.2f}-{max(refs) * 1e3:.2f} ms over the sizes): the fit mixes host "
            "speeds, and predictions will carry it; calibrate again on a quieter host"
        )
    header = (
        f"simgpu profile written by `simgpu calibrate` on {time.strftime('%Y-%m-%d %H:%M')}.\n"
        "Stage times are fitted laws (see [calibration] for the raw measurements and fit errors);\n"
        "buffers and stage footprints come from the prover's memory plan (simgpu.prover.memory_plan)."
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dumps(doc, header))
    return doc, errors
