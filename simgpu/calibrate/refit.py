"""Refitting a calibrated profile from the measurements it stores (e.g. on the small
sizes only, to test how its laws extrapolate)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simgpu.calibrate.chain import TRIP
from simgpu.calibrate.fit import alone_readings, phase_means, pooled_alone, sync_gap, time_law, time_laws
from simgpu.calibrate.measure import Contention
from simgpu.errors import UserError
from simgpu.profile.schema import phase_key
from simgpu.profile.tomlwrite import Inline, dumps


def measured_means(
    doc: dict[str, Any], key: str, max_size: int | None = None
) -> tuple[list[int], list[float]]:
    """(sizes, mean seconds, as `phase_means`) of one stage or kernels phase
    ('kernels_h_msm') from a profile's [calibration.measurements], each driver stage's
    time alone pooled over its other readings as calibrate pools it (pooled_alone)."""
    cal = doc["calibration"]
    alone = (cal.get("device_queue", {}).get("kernels_beside_kernel_load") or (None,))[0]
    # the syncs' gap from the stored measurements, as calibrate reads it before pooling
    raw = sorted(cal["measurements"].values(), key=lambda r: r["constraints"])
    gap = sync_gap(raw, alone, cal.get("contention", {}).get("constraints"))
    every, _ = pooled_measurements(doc)
    rows = [r for r in every if max_size is None or r["constraints"] <= max_size]
    return [r["constraints"] for r in rows], phase_means(rows, key, gap)


def pooled_measurements(doc: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[int, dict[str, float]]]:
    """A profile's [calibration.measurements] by size, each driver stage's time alone
    pooled over the other readings its contention runs took (fit.pooled_alone), and the
    factors that pooling applied."""
    cal = doc["calibration"]
    every = sorted(cal["measurements"].values(), key=lambda r: r["constraints"])
    readings = {c.n: alone_readings(c) for c in contentions_of(doc)} if "contention" in cal else {}
    return pooled_alone(every, readings)


def refit_times(doc: dict[str, Any], max_size: int | None = None) -> dict[str, float]:
    """Fit every stage time of a calibrated profile again from its stored measurements
    (only sizes <= max_size if given), in place.  Returns the fit errors."""
    errors: dict[str, float] = {}
    for name, st in doc["stages"].items():
        if "phases" in st:
            for ph in st["phases"]:
                key = phase_key(name, ph["name"]).replace(".", "_")
                ph["time"], errors[key] = time_law(*measured_means(doc, key, max_size), time_laws(name))
        else:
            st["time"], errors[name] = time_law(*measured_means(doc, name, max_size), time_laws(name))
    return errors


def contentions_of(doc: dict[str, Any]) -> list[Contention]:
    """Every size's contention readings a calibrated profile stores: the first size's
    (contention_of), then each of [calibration.contention_at] (build.contention_at_record)."""
    first = contention_of(doc)
    out = [first]
    for rec in doc["calibration"].get("contention_at", {}).values():
        at = {
            "calibration": {
                "contention": rec | {"synthesis_at_once": {}},
                "pressure": rec.get("pressure", {}),
                "device_queue": rec.get("device_queue", {}),
            }
        }
        out.append(contention_of(at))
    return out


def contention_of(doc: dict[str, Any]) -> Contention:
    """The contention runs a calibrated profile stores ([calibration.contention],
    .device_queue, .pressure), as calibrate measured them."""
    cal = doc.get("calibration", {})
    rec = cal.get("contention")
    if rec is None:
        raise UserError("the profile has no [calibration.contention]: no contention runs to refit from")
    pressure = dict(cal.get("pressure", {}))
    load = int(pressure.pop("syntheses_beside", 0))
    return Contention(
        n=int(rec["constraints"]),
        cores=int(rec["cores"]),
        membw_gbps=float(rec["membw_gbps"]),
        synthesis={int(k): float(v) for k, v in rec["synthesis_at_once"].items()},
        synthesis_calls={
            int(k): [float(x) for x in v] for k, v in rec.get("synthesis_at_once_calls", {}).items()
        },
        loaded={s: (float(a), float(b)) for s, (a, b) in pressure.items()},
        device_queue={
            k.replace("_beside_", " beside "): (float(a), float(b))
            for k, (a, b) in cal.get("device_queue", {}).items()
        },
        pressure_load=load,
        gil={s: _gil_row(v) for s, v in rec.get("gil", {}).items()},
        gil_waits=(float(rec.get("gil_loop_wait", 0.0)), float(rec.get("gil_burst_wait", 0.0))),
        loaded_pairs={
            s: [(float(a), float(b)) for a, b in ps] for s, ps in rec.get("pressure_pairs", {}).items()
        },
        handoff={
            s: [(float(a), float(b), float(m), float(k)) for a, b, m, k in rows]
            for s, rows in rec.get("handoff", {}).items()
        },
    )


def _gil_row(v: list[float]) -> tuple[float, float, float, float, float]:
    """A stored interpreter-lock row; those calibrated before the waits, or the bursty
    neighbour, were timed have three or four values (the rest read 0: not measured)."""
    a, b, d, *rest = (float(x) for x in v)
    w, bb = (*rest, 0.0, 0.0)[:2]
    return a, b, d, w, bb


def refit_uses(doc: dict[str, Any], gil: bool = False, device_law: str | None = None) -> None:
    """Fit every stage's uses of the shared resources again from the contention runs
    the profile stores (simgpu.calibrate.build.stage_uses), in place: what a profile
    calibrated before a change of the fits would have said with the fits of now.
    `gil`: with the interpreter lock's uses too, from the runs calibrate recorded.
    `device_law`: the law to fit the device for (None: the one the profile has)."""
    from simgpu.calibrate.build import device_law_of, lock_pressure, set_device_law, stage_uses_over

    cal = doc["calibration"]
    h2d = float(doc["hardware"]["h2d_gbps"])
    c = contention_of(doc)
    if gil and not c.gil:
        raise UserError("the profile has no gil runs: it was calibrated before measure_gil")
    law = (
        device_law
        or cal.get("device_law")
        or doc.get("contention", {}).get("gpu", {}).get("law", "proportional")
    )
    uses = stage_uses_over(
        contentions_of(doc), h2d, cal["b_g2_on"], int(cal["b_g2_threads"]), gil=gil, device_law=law
    )
    for stage, u in uses.items():
        if stage in doc["stages"]:
            doc["stages"][stage]["uses"] = {r: dict(v) for r, v in u.items()}
    for ph in doc["stages"].get("synthesis", {}).get("phases", []):
        if ph.get("name") == "transfer" and TRIP in uses:  # the trip's pressure, beside its channel
            kept = {r: v for r, v in ph.get("uses", {}).items() if r == "driver_rx"}
            ph["uses"] = kept | {r: dict(v) for r, v in uses[TRIP].items()}
    if "pins" in doc and (lock := lock_pressure(c)) is not None:  # the lock's pressure, as a stage's
        doc["pins"]["lock_pressure"] = lock
    set_device_law(doc, c, law)  # the law the uses were fitted for goes with them
    cal["device_law"] = device_law_of(c, law)


def result_channel_use(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The synthesis transfer's use of the driver's result channel, read again from the
    trips the profile stores (simgpu.calibrate.build.driver_rx_share): what
    calibrate writes now.  None where the profile's synthesis has no transfer phase."""
    from simgpu.calibrate.build import driver_rx_share

    phases = doc["stages"].get("synthesis", {}).get("phases", [])
    if not any(ph.get("name") == "transfer" for ph in phases):
        return None
    rows = sorted(doc["calibration"]["measurements"].values(), key=lambda r: r["constraints"])
    # the record's keys are SizeRun.seconds' with "_" for the stage's "."
    sizes = [
        (
            r["constraints"],
            {
                "synthesis." + k.removeprefix("synthesis_"): v
                for k, v in r.items()
                if k.startswith("synthesis_")
            },
        )
        for r in rows
    ]
    share = driver_rx_share(sizes)
    return {"demand": share, "bound": share}


def restage_footprints(doc: dict[str, Any], stream_batch: int = 1 << 22) -> list[str]:
    """Split each MSM phase's footprint of a profile calibrated before the prover's
    memory plan had staging (simgpu.prover.memory_plan) into its staging and its
    temporaries, in place; returns the phases split.

    The stored points are each phase's whole peak, measured; the staging at each stored
    size is the plan's for the calibrated circuit (its expected shape: within 0.1% of
    the measured peaks on the porep family), and the temporaries the rest of the peak.
    `stream_batch` is calibrate's (the bases streamed per batch)."""
    from simgpu.prover.circuits import circuit_spec
    from simgpu.prover.memory_plan import ProverShape, prover_plan

    cal = doc["calibration"]
    split: list[str] = []
    for st in doc["stages"].values():
        for ph in st.get("phases", []):
            name = ph["name"]
            if ph.get("staging") or ph.get("transient") != [name] or not name.endswith("_msm"):
                continue
            points = doc["buffers"][name].get("points") if isinstance(doc["buffers"][name], dict) else None
            if points is None:
                raise UserError(f"[buffers] {name} is not a table of measured points: cannot split it")
            staged, temporaries = [], []
            for n, peak in points:
                shape = ProverShape.estimate(circuit_spec(cal["circuit"], int(n)))
                plan = prover_plan(
                    shape,
                    stream_batch=stream_batch,
                    b_g2_on=cal.get("b_g2_on", "cpu"),
                    msm_capacity=cal.get("msm_capacity", "witness"),
                )
                part = int(plan["buffers"].get(f"{name}_staging", 0))
                staged.append([n, part])
                temporaries.append([n, int(peak) - part])
            if not any(b for _, b in staged):
                continue
            doc["buffers"][f"{name}_staging"] = {"points": staged}
            doc["buffers"][name] = {"points": temporaries}
            ph["staging"] = [f"{name}_staging"]
            split.append(name)
    return split


def replan_buffers(doc: dict[str, Any], stream_batch: int = 1 << 22) -> list[int]:
    """Give a calibrated profile's buffers, in place, the memory plan's bytes at the
    powers of two its ladder did not measure, as calibrate now writes them
    (simgpu.calibrate.build.unmeasured_sizes): each buffer's bytes at the measured sizes
    as the profile has them, then buffer_law over both.  Returns the sizes added."""
    from simgpu.calibrate.build import buffer_laws, plan_buffers, unmeasured_sizes
    from simgpu.profile.schema import profile_from_dict

    cal = doc["calibration"]
    ns = sorted(int(r["constraints"]) for r in cal["measurements"].values())
    extra = unmeasured_sizes(ns)
    if not extra:
        return []
    prof = profile_from_dict(doc)
    plan = {
        "stream_batch": stream_batch,
        "b_g2_on": cal.get("b_g2_on", "cpu"),
        "msm_capacity": cal.get("msm_capacity", "witness"),
    }
    by_size = {n: prof.resolve(n).buffers for n in ns} | {
        n: plan_buffers(cal["circuit"], n, **plan) for n in extra
    }
    names = [b for b in doc["buffers"] if all(b in at for at in by_size.values())]
    laws, errors = buffer_laws(names, by_size)
    doc["buffers"].update(laws)
    cal.setdefault("fit_max_rel_error", {}).update({f"buffer_{b}": round(e, 4) for b, e in errors.items()})
    return extra


def inline_laws(doc: Any, key: str = "") -> Any:
    """A profile read back from TOML, with laws and resource uses marked inline again."""
    if isinstance(doc, dict):
        if key == "uses" or "law" in doc or "points" in doc:
            return Inline({k: inline_laws(v, k) for k, v in doc.items()})
        return {k: inline_laws(v, k) for k, v in doc.items()}
    if isinstance(doc, list):
        return [inline_laws(v) for v in doc]
    return doc


def refit_profile(
    src: Path,
    out: Path,
    max_size: int | None = None,
    uses: bool = False,
    contention: dict[str, Any] | None = None,
    gil: bool = False,
    staged: bool = False,
    device_law: str | None = None,
    replan: bool = False,
) -> dict[str, float]:
    """Refit the stage times of the calibrated profile `src` from its stored
    measurements (sizes <= max_size if given), and with `uses` the stages' uses of the
    shared resources (refit_uses), and write it to `out`.  `contention`: the
    [calibration.contention] record for a profile written before calibrate kept it
    (read from the same lease's calibrate log).  `staged`: the MSM phases' footprints
    split into staging and temporaries (restage_footprints).  `device_law`: with `uses`,
    the law to fit the device for (None: the profile's).  `replan`: the buffers given
    the memory plan's bytes between the measured sizes too (replan_buffers)."""
    import tomllib

    try:
        doc = tomllib.loads(src.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise UserError(f"cannot read profile {src}: {e}") from None
    if "measurements" not in doc.get("calibration", {}):
        raise UserError(f"{src} has no [calibration.measurements]: it was not written by calibrate")
    added = contention is not None and "contention" not in doc["calibration"]
    if added:
        doc["calibration"]["contention"] = contention
    errors = refit_times(doc, max_size)
    _, pooled = pooled_measurements(doc)
    doc["calibration"].pop("alone_pooled", None)
    if pooled:
        doc["calibration"]["alone_pooled"] = {f"n{n}": Inline(**f) for n, f in sorted(pooled.items())}
    if uses:
        refit_uses(doc, gil=gil, device_law=device_law)
        rx = result_channel_use(doc)
        for ph in doc["stages"].get("synthesis", {}).get("phases", []):
            if rx is not None and ph.get("name") == "transfer":
                ph["uses"] = {**ph.get("uses", {}), "driver_rx": rx}
    restaged = restage_footprints(doc) if staged else []
    replanned = replan_buffers(doc) if replan else []
    cal = doc["calibration"]
    cal["refit_max_size"] = max_size or max(r["constraints"] for r in cal["measurements"].values())
    cal["fit_max_rel_error"].update({k: round(v, 4) for k, v in errors.items()})
    refit_note = "Stage times refitted from the stored measurements"
    header = profile_header(src.read_text(), drop=refit_note)
    header += f"\n{refit_note} (sizes <= {cal['refit_max_size']})"
    header += ", and the uses from the contention runs, with the fits of now" if uses else ""
    header += " (the interpreter lock's too)." if uses and gil else "."
    if added:
        header += "\n[calibration.contention] added from the lease's calibrate log."
    if replanned:
        sizes = ", ".join(map(str, replanned))
        header += f"\nBuffers with the memory plan's bytes at {sizes} constraints too."
    if restaged:
        header += f"\nFootprints split into staging and temporaries: {', '.join(restaged)}."
    out.write_text(dumps(inline_laws(doc), header))
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
