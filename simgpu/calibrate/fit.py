"""Fitting what was measured: stage-time laws, their noise, the contention terms.

Which law a stage may take is decided here (STAGE_LAWS: from its algorithm, else the
best of TIME_LAWS); the fitting itself is the profile's (`simgpu.profile.laws.fit_law`),
so a fitted law is evaluated by the same code that evaluates it in a prediction.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

import numpy as np

from simgpu.calibrate.chain import PRESSURE_STAGES
from simgpu.calibrate.measure import pair_ratio
from simgpu.errors import UserError
from simgpu.profile.laws import Fit, fit_law
from simgpu.profile.tomlwrite import Inline

if TYPE_CHECKING:
    from simgpu.calibrate.measure import Contention

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
SIZE_LAWS = ("a + b*N", "a + b*n", "a + b*n + c*N")
#: A buffer law that misses a measured size by more than this is replaced by the points.
EXACT = 0.002
#: ... and so is one that misses a measured size by more bytes than this, even within
#: EXACT: a caching pool reuses a cached block only for a request no larger than it, so a
#: law a few hundred bytes short of the bases batch (the H query has N - 1 rows, the
#: law a + b*N gives 96 * N less 672 B) leaves a block the next 96 * N batch cannot
#: take, and the model grows one the card does not (simgpu.devicepool.UNIT: CuPy's grain).
#: A law within a grain is not enough either: 499 B off at 2^22 (h_msm_staging fitted
#: over five sizes) rounds to another 512 B unit and flipped the capped group's outcome
#: in the model.  So a law stands only where it gives every point to the byte.
EXACT_BYTES = 1
#: A time law that misses a measured size by more than this is replaced by the measured
#: means (linear between sizes, the nearest segment's slope beyond): the model then
#: reproduces every calibrated size, and the fit error is still reported.  Means, not
#: medians: the model's stage noise has mean 1 around the law, and a pipeline's pace is
#: set by mean stage times; a median drops the slow tail that real runs do see.
TIME_EXACT = 0.05


def time_laws(stage: str) -> tuple[str, ...]:
    """The candidate laws for the time of a stage (and of each of its phases)."""
    return STAGE_LAWS.get(stage, TIME_LAWS)


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


#: The stage whose phases calibrate times one by one, a device sync after each
#: (simgpu.prover.groth16's phase clock); a run launches them back to back.
PHASED = "kernels"


def sync_gap(rows: list[dict[str, Any]], alone_unsynced: float | None, at: int | None) -> float | None:
    """What the syncs between PHASED's phases added to it at the contention size `at`, for
    a profile measured before calibrate timed it without them (`unsynced_scale`): the
    synced median there less its device queue's kernels alone (`alone_unsynced`, timed
    without the phase clock), at least 0 (the noise of three repeats).  None where either
    is missing."""
    if alone_unsynced is None or at is None:
        return None
    there = [r for r in rows if r["constraints"] == at and r.get(PHASED)]
    return max(0.0, statistics.median(there[0][PHASED]) - alone_unsynced) if there else None


def unsynced_scale(rows: list[dict[str, Any]], gap: float | None = None) -> list[float]:
    """Per row (a measured size): what the phases of PHASED, timed with a sync after each,
    take together in a run that does not sync between them, as a share of their synced
    time.  Each sync drains the device, and the next phase's first launch starts from the
    host: on the twenty-fourth and twenty-fifth leases the pipeline's serial kernels at
    2^20 ran in 43 and 45 ms, calibrate's unsynced 43.3 and 45.9, its synced 46.0 and
    49.7 (docs/validation-log.md).

    Where calibrate also timed the stage without the syncs (`kernels_unsynced`), the
    share is their medians' ratio.  Before it did, a profile carries one unsynced time,
    at its contention size: that `gap` (sync_gap) comes out of every size, a sync's cost
    being the host's launch latency, whatever the size.  1 where neither was measured."""
    out = []
    for r in rows:
        synced = statistics.median(r[PHASED]) if r.get(PHASED) else 0.0
        if synced <= 0:
            out.append(1.0)
        elif r.get(f"{PHASED}_unsynced"):
            out.append(statistics.median(r[f"{PHASED}_unsynced"]) / synced)
        elif gap is not None:
            out.append(max(0.0, synced - gap) / synced)
        else:
            out.append(1.0)
    return out


def phase_means(rows: list[dict[str, Any]], key: str, gap: float | None = None) -> list[float]:
    """`stage_means` of a stage or phase key ('kernels_h_msm'); a phase of PHASED as a
    run takes it, without the phase clock's syncs (unsynced_scale)."""
    means = stage_means(rows, key)
    if not key.startswith(f"{PHASED}_") or key == f"{PHASED}_unsynced":
        return means
    return [m * f for m, f in zip(means, unsynced_scale(rows, gap), strict=True)]


def alone_readings(c: Contention) -> dict[str, list[float]]:
    """Every other time calibrate took of a driver stage alone at c's size, after the
    ladder's: the first call of each pressure pair and of each results-coming-back pair,
    and the interpreter-lock run's call alone.  Each is the same call of the stage on a
    fresh partition, with nothing of calibrate's beside it."""
    out: dict[str, list[float]] = {}
    for stage, pairs in c.loaded_pairs.items():
        if stage in PRESSURE_STAGES:
            out.setdefault(stage, []).extend(a for a, _ in pairs)
    for stage, rows in c.handoff.items():
        out.setdefault(stage, []).extend(r[0] for r in rows)
    for stage, (alone, *_) in c.gil.items():
        out.setdefault(stage, []).append(alone)
    return {s: [x for x in xs if x > 0] for s, xs in out.items() if any(x > 0 for x in xs)}


def pooled_alone(
    rows: list[dict[str, Any]], readings: dict[int, dict[str, list[float]]]
) -> tuple[list[dict[str, Any]], dict[int, dict[str, float]]]:
    """The ladder's rows with each driver stage's samples at a size scaled so that their
    median is the median of every reading of that stage alone there (the ladder's and
    `readings`, alone_readings at that size), and the factors used, by size and stage.

    A VM's host drifts by 10-25% over minutes (docs/validation-log.md, the thirty-second
    lease: prep read 136 ms on the ladder and 168 ms alone two minutes later, in the
    same calibrate).  The ladder reads a stage in one stretch of seconds; the contention
    runs read it alone again, spread over the minutes after.  Their pooled median samples
    the host's modes instead of one moment.  A stage's phases and its timing without the
    phase clock scale with it (the kernels' are compared on the unsynced timing, as the
    pairs run the stage); the reference loop's samples beside it (`_ref`) do not.  The
    stored measurements stay as measured: this is how they are read."""
    out, factors = [], {}
    for row in rows:
        more = readings.get(row["constraints"], {})
        row = dict(row)
        for stage, extra in more.items():
            base_key = f"{stage}_unsynced" if row.get(f"{stage}_unsynced") else stage
            if not row.get(base_key):
                continue
            f = statistics.median([*row[base_key], *extra]) / statistics.median(row[base_key])
            for key in [k for k in row if k == stage or k.startswith(f"{stage}_")]:
                if isinstance(row[key], list) and not key.endswith("_ref"):
                    row[key] = [x * f for x in row[key]]
            factors.setdefault(row["constraints"], {})[stage] = round(f, 4)
        out.append(row)
    return out, factors


def time_law(ns: list[int], ys: list[float], candidates: tuple[str, ...] = TIME_LAWS) -> tuple[Inline, float]:
    """The best time law over the ladder, or the measured points where no law is within
    TIME_EXACT of every size, with that law for the sizes beyond them.  Returns (TOML
    law, worst relative error of the best law)."""
    f = fit_law(ns, ys, candidates)
    if f.max_rel_error > TIME_EXACT:
        pts = [[n, round(y, 7)] for n, y in zip(ns, ys, strict=True)]
        return Inline(points=pts, beyond=f.law_table()), f.max_rel_error
    return f.law_table(), f.max_rel_error


def buffer_law(ns: list[int], ys: list[float]) -> tuple[Inline, float]:
    """A buffer's bytes over the ladder as a size law, where one gives every measured size
    to within EXACT and EXACT_BYTES; the measured points otherwise: alone where no law
    comes within EXACT (a footprint that steps with the MSM window), with the law for the
    sizes beyond them where one comes close but not to the byte.  Returns (TOML law,
    worst relative error of what is written: 0 at the points)."""
    f = fit_law(ns, ys, SIZE_LAWS)
    points = [[n, int(y)] for n, y in zip(ns, ys, strict=True)]
    if f.max_rel_error > EXACT:
        return Inline(points=points), 0.0
    if not _to_the_byte(f, ns, ys):
        return Inline(points=points, beyond=f.law_table()), 0.0
    f = snapped(f, ns, ys)
    return f.law_table(), f.max_rel_error


def _to_the_byte(f: Fit, ns: list[int], ys: list[float]) -> bool:
    return all(abs(f(n) - y) <= EXACT_BYTES for n, y in zip(ns, ys, strict=True))


def snapped(f: Fit, ns: list[int], ys: list[float]) -> Fit:
    """`f` with its coefficients at the fewest decimals that still give every point to
    within EXACT_BYTES.  Least squares leaves noise in the last bits (96 B a row came out
    95.99999999999999 plus 3e-9 B on one numpy build and 96.0 plus 7e-9 on another), and
    a profile should carry the same law whichever machine wrote it."""
    for decimals in range(13):
        g = Fit(f.law, {k: round(v, decimals) for k, v in f.coeffs.items()}, 0.0)
        if _to_the_byte(g, ns, ys):
            g.max_rel_error = max(abs(g(n) - y) / max(abs(y), 1e-12) for n, y in zip(ns, ys, strict=True))
            return g
    return f


def synthesis_pressure(c: Contention) -> float:
    """Synthesis's sensitivity to the others' busy cores, from the k-at-once times up to
    the cores (none oversubscribed): the burst law's slowdown(k) = 1 + b (k - 1) / C,
    fitted through the origin by least squares."""
    ks = sorted(k for k in c.synthesis if 1 < k <= c.cores)
    if not ks or min(c.synthesis) != 1:
        return 0.0
    x = np.array([(k - 1) / c.cores for k in ks])
    y = np.array([c.synthesis[k] / c.synthesis[1] - 1 for k in ks])
    return round(min(1.0, max(0.0, float(x @ y / (x @ x)))), 4)


def pressure_ratio(c: Contention, stage: str) -> float | None:
    """How many times its time alone `stage` took beside the pressure load: the median of
    its pairs' ratios, each pair two calls back to back (measure.measure_pressure), where
    calibrate kept them; else, in a profile calibrated before it did, its fastest call
    beside over its fastest alone.  A pair's calls mostly share the host's mode, which
    the two fastest calls of six each way need not."""
    if (ratio := pair_ratio(c.loaded_pairs.get(stage, []))) is not None:
        return ratio
    alone, beside = c.loaded.get(stage, (0.0, 0.0))
    return beside / alone if alone > 0 else None


def fit_pressure(c: Contention, b_g2_cores: int) -> dict[str, dict[str, Inline]]:
    """Every measured stage's use of `pressure` (simgpu.model.contention, "Pressure"):
    demand the cores it keeps busy (one; b_g2_msm `b_g2_cores`: its threads on the CPU,
    one, the driver's, where it runs on the device), bound read from
    the burst law backwards: beside k busy cores of C a stage takes r = 1 + b k / C times
    its time alone (pressure_ratio), so b = (r - 1) C / k.  Synthesis's from its
    k-at-once times."""
    out = {"synthesis": {"pressure": Inline(demand=1.0, bound=synthesis_pressure(c))}}
    k = c.pressure_load
    for stage in c.loaded:
        ratio = pressure_ratio(c, stage)
        if k <= 0 or ratio is None:
            continue
        b = min(1.0, max(0.0, (ratio - 1) * c.cores / k))
        demand = float(b_g2_cores) if stage == "b_g2_msm" else 1.0
        out[stage] = {"pressure": Inline(demand=demand, bound=round(b, 4))}
    return out


def fit_handoff(c: Contention, pressure: dict[str, float]) -> dict[str, dict[str, Inline]]:
    """Every driver stage's sensitivity to synthesis results coming back into the driver
    process (the `handoff` resource, simgpu.model.contention, "Pressure"), from its
    calls alone and beside them (measure.measure_handoff).  Beside m results on their way
    back and c syntheses computing (mean counts over the call), a stage of sensitivity s
    takes r = (1 + s m)(1 + p c / C) times its time alone, p its sensitivity to busy
    cores (`pressure`): s is the median over the pairs of (r / (1 + p c / C) - 1) / m,
    kept within [0, 1] (the median, as pressure_ratio's: a pair whose calls fell in two
    of a VM's modes reads any number).  Pairs with fewer than MIN_TRIPS results beside
    are left out: their ratio is mostly noise over a small m.  Its demand is 0: a driver
    stage brings no result back; the synthesis's way back draws 1 (build.stage_uses)."""
    out: dict[str, dict[str, Inline]] = {}
    cores = max(1, c.cores)
    for stage, rows in c.handoff.items():
        p = pressure.get(stage, 0.0)
        slopes = [(b / a / (1 + p * k / cores) - 1) / m for a, b, m, k in rows if a > 0 and m >= MIN_TRIPS]
        if slopes:
            out[stage] = {"handoff": Inline(demand=0.0, bound=_clamp(statistics.median(slopes)))}
    return out


#: The fewest results on their way back beside a call that fit_handoff reads a slope from.
MIN_TRIPS = 0.2


def fit_gil(c: Contention, pressure: dict[str, float]) -> dict[str, dict[str, Inline]]:
    """Every measured stage's use of the driver's interpreter lock (`gil`, a scaling
    resource of capacity 1 ms; simgpu.model.contention, "The interpreter lock"), read
    from simgpu.calibrate.lock.measure_gil as hand-overs:

    * its **asks** (the bound, asks per millisecond of its time alone): beside a thread
      of Python each ask waits that thread's wait w, so the stage's time there, less the
      pressure of the core the thread keeps busy (1 + its sensitivity / C), is its time
      alone plus asks x w.  Read beside the bursty thread where calibrate timed it, whose
      waits are the pipeline's (tens of microseconds): the asks a launch loop's queued
      work cannot cover; else beside the continuous one, every ask;
    * the **wait** an ask from another thread meets while it runs (the demand, ms), as
      the probe timed it beside the stage alone.

    Beside stages whose waits add up to W (ms), a stage of b asks a millisecond takes
    1 + b W times as long.  Where calibrate did not time the waits (profiles calibrated
    before it did) every demand is 0, and the continuous thread's wait is CPython's
    default switch interval."""
    loop_wait, burst_wait = c.gil_waits
    out: dict[str, dict[str, Inline]] = {}
    for stage, (alone, beside, _lost, wait, bursty) in c.gil.items():
        if alone <= 0:
            continue
        if bursty > 0 and burst_wait > 0:
            t, w = bursty, burst_wait
        else:
            t, w = beside, loop_wait if loop_wait > 0 else DEFAULT_SWITCH_INTERVAL
        asks = max(0.0, t / (1 + pressure.get(stage, 0.0) / max(1, c.cores)) - alone) / w
        out[stage] = {
            "gil": Inline(demand=round(max(0.0, wait) * 1e3, 5), bound=round(asks / (alone * 1e3), 4))
        }
    return out


#: CPython's switch interval (seconds): how long a thread asking for the lock waits
#: before the holder is made to let go, where calibrate did not time it.
DEFAULT_SWITCH_INTERVAL = 0.005


def fit_synthesis_contention(c: Contention) -> dict[str, Inline]:
    """Bound fractions of synthesis on cores and on memory bandwidth, and its bandwidth
    demand, from the k-at-once times once the pressure's share is taken out of them
    (synthesis_pressure): slowdown(k) = 1 + fc (max(1, k/C) - 1) + fm (max(1, k d / B) - 1)."""
    from scipy.optimize import least_squares

    ks = sorted(c.synthesis)
    base = c.synthesis[ks[0]]
    b = synthesis_pressure(c)
    slow = np.array([c.synthesis[k] / base / (1 + b * (min(k, c.cores) - 1) / c.cores) for k in ks])

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


def _clamp(x: float) -> float:
    return round(min(1.0, max(0.0, x)), 4)


#: The pairings that read the device as one in-order stream (fit_device_queue).
IN_ORDER_PAIRS = ("b_g2_msm beside kernel_load", "b_g2_msm beside gpu_load")


#: The laws the device's uses can be fitted for (``simgpu calibrate --device-law``).
DEVICE_LAWS = ("proportional", "in-order", "exclusive")
#: The pairing the exclusive reading needs (fit_device_queue).
EXCLUSIVE_PAIRS = ("prestage beside kernel_load",)
#: What each law other than the proportional one needs calibrate to have timed.
LAW_PAIRS = {"in-order": IN_ORDER_PAIRS, "exclusive": EXCLUSIVE_PAIRS}
#: The law calibrate fits the device for unless told otherwise (see device_law).
DEFAULT_DEVICE_LAW = "exclusive"


def device_law(queue: dict[str, tuple[float, float]], wanted: str = "proportional") -> str:
    """The law the measured device queue is read with: `wanted`, where the pairings it
    needs were timed (LAW_PAIRS), else the proportional law every queue can be read with.

    Calibrate asks for DEFAULT_DEVICE_LAW, the exclusive reading (exclusive_uses).
    Each reading was chosen on leases' evidence, the same calibration read both ways
    against the runs of its machine (docs/validation-log.md).  On the seventeenth lease the
    proportional reading beat the in-order one (throughput median 8.0% against 11.5%,
    max 14.8% against 20.1%).  On the nineteenth lease, the first with the daemon
    admitting partitions in turn, the exclusive reading beat the proportional one
    (3.9% against 8.1%, max 7.1% against 12.2%), and on the sixteenth's too (7.2%
    against 10.8%); on the seventeenth, whose real runs carry 0.3-0.5 s of idle a run
    from the old daemon's admission race, it did not (10.1% against 8.0%)."""
    if wanted not in DEVICE_LAWS:
        raise UserError(f"unknown device law {wanted!r}: one of {', '.join(DEVICE_LAWS)}")
    if wanted in LAW_PAIRS and all(k in queue for k in LAW_PAIRS[wanted]):
        return wanted
    return "proportional"


def fit_device_queue(
    queue: dict[str, tuple[float, float]], h2d_gbps: float, law: str = "proportional"
) -> dict[str, dict[str, Inline]]:
    """The device stages' uses of the `gpu` resource from their times beside each other's
    kind of work (simgpu.calibrate.measure.measure_device_queue).

    Two readings, `law` as `device_law` grants it.  **In order** (the one stream every worker queues
    on: a job's bound fraction stretches by 1 + the others' demand): with b_g2_msm's
    demand the unit (its loop is `kernel_load`) and s each measured stretch,
    b_g2_msm beside its loop gives its bound (s - 1); beside another GPU worker
    (`gpu_load`, prestage and kernels) the kernels' demand (s - 1) / that bound: how much
    of the stream their long runs of kernels claim against b_g2_msm's small synced
    steps; the kernels beside the b_g2_msm loop their bound (s - 1); the copies' demand
    and prestage's bound as below but against a unit demand.

    **Proportional** (the older pairings; the kernels' and b_g2_msm's demands 1): jobs of
    demand d_i slow every bound fraction by the factor sum(d_i), and a job with bound b
    takes 1 + b * (factor - 1) times its time.  So kernels beside kernels give the
    kernels' bound (s - 1); kernels beside copies give the copies' demand on the device
    (s - 1) / bound; prestage beside kernels gives prestage's bound (s - 1) / its demand;
    b_g2_msm beside copies its bound likewise.  A device whose workers share one
    in-order stream has copies of demand near 1; one with a copy engine per direction
    and a stream per worker, near 0.  Prestage keeps the rest of its time bound on the
    host-to-device link (and through it host memory bandwidth).

    Either way, where the kernels and b_g2_msm were also timed beside one prestage
    started with them (`one_prestage`, what a pipeline has), the copies' demand and
    b_g2_msm's bound come from those instead where they are informative
    (overlap_factor: the stretch while the prestage ran), and the demand may pass 1: a
    continuous copy load measures starvation, not a share, and clamped at 1 it left
    b_g2_msm beside a prestage 14-18% fast on the H200."""

    def stretch(key: str) -> float | None:
        if key not in queue:
            return None
        alone, beside = queue[key]
        return beside / alone if alone > 0 else None

    uses: dict[str, dict[str, Inline]] = {}
    if device_law(queue, law) == "exclusive":
        # b_g2_msm is timed beside the loads only where it runs on the device
        on_device = any(k.startswith("b_g2_msm beside") for k in queue)
        return exclusive_uses(stretch("prestage beside kernel_load") or 1.0, h2d_gbps, on_device)
    s_kk = stretch("kernels beside kernel_load")
    s_kc = stretch("kernels beside copy_load")
    if s_kk is None or s_kc is None:
        return uses
    in_order = device_law(queue, law) == "in-order"
    bound_k = _clamp(s_kk - 1)
    demand_p = _clamp((s_kc - 1) / bound_k) if bound_k > 0 else 0.0
    once = queue.get("kernels beside one_prestage")
    other = (queue.get("one_prestage") or (0.0, 0.0))[1]  # how long the prestage ran beside them
    if once is not None and bound_k > 0 and _informative(*once, other):
        # one prestage started with the kernels: what a pipeline has, where a continuous
        # copy load measures starvation; its demand may pass 1 (the copies go first)
        demand_p = round(max(0.0, overlap_factor(*once, other) - 1) / bound_k, 4)
    demand_k = 1.0
    if in_order:
        bound_b = _clamp((stretch("b_g2_msm beside kernel_load") or 1.0) - 1)
        s_bk = stretch("b_g2_msm beside gpu_load") or 1.0
        demand_k = round(max(0.0, s_bk - 1) / bound_b, 4) if bound_b > 0 else 1.0
        uses["b_g2_msm"] = {"gpu": Inline(demand=1.0, bound=bound_b)}
    uses["kernels"] = {"gpu": Inline(demand=demand_k, bound=bound_k)}
    s_pk = stretch("prestage beside kernel_load")
    # beside the b_g2_msm loop (demand 1): in order, prestage waits for that loop's
    # work; by the proportional law, its bound stretches by the two demands' sum
    beside_loop = 1.0 if in_order else demand_p
    bound_p = _clamp((s_pk - 1) / beside_loop) if s_pk is not None and beside_loop > 0 else 0.0
    prestage = {"h2d": Inline(demand=float(h2d_gbps), bound=round(1.0 - bound_p, 4))}
    if demand_p > 0:
        prestage["gpu"] = Inline(demand=demand_p, bound=bound_p)
    uses["prestage"] = prestage
    if in_order:
        return uses
    s_bc = stretch("b_g2_msm beside copy_load")
    b_once = queue.get("b_g2_msm beside one_prestage")
    if b_once is not None and demand_p > 0 and _informative(*b_once, other):
        bound_b = _clamp((overlap_factor(*b_once, other) - 1) / demand_p)
        uses["b_g2_msm"] = {"gpu": Inline(demand=1.0, bound=bound_b)}
    elif s_bc is not None:
        bound_b = _clamp((s_bc - 1) / demand_p) if demand_p > 0 else bound_k
        uses["b_g2_msm"] = {"gpu": Inline(demand=1.0, bound=bound_b)}
    return uses


def exclusive_uses(
    prestage_beside_loop: float, h2d_gbps: float, b_g2_on_device: bool = True
) -> dict[str, dict[str, Inline]]:
    """The device's uses read **exclusively**: the workers launch into one in-order
    stream, like cars on a one-lane bridge, and whatever of a stage is on the stream
    has the whole of it.  The kernels and the G2 MSM are launch loops whose every moment
    is work queued on the stream (their host-side steps run ahead of it), so each is
    wholly bound to the device with demand 1: two of them share it half and half, and
    a pipeline gets no overlap between the workers' device work.  The prestage's copies
    take the stream too (demand 1), but its host-side packing does not: its bound is
    read from its time beside the G2 MSM's loop, s = 1 + bound (the rest of its time is
    bound to the host-to-device link).  The other stages' staging uploads (an MSM's
    bases) go the same way (simgpu.gpu.transfer), so the model queues them on the
    device with prestage's use (simgpu.profile.resolve.Resolved.upload_gpu), and
    copies among themselves in the order queued (model.interpreter.on_link).  The loop
    the bound is read beside stages its bases too, but those copies are about a tenth of
    its round (5.8 of 60 ms at 2^22 on the forty-sixth lease), so the prestage's expected
    wait behind them in that order, about 0.2 ms of the 3.6 it lost there, stays in the
    bound rather than being taken out.

    No parameter is read for the kernels or the G2 MSM.  Calibrate's pairings of two
    launch loops read 1.7-1.9x, not 2x, because a loop leaves the stream idle between
    its iterations (its set-up and read-back); a pipeline's stages, started back to back
    at the lock's hand-over, do not: on the nineteenth lease B held the lock 161.8 ms a
    partition, its prestage and kernels alone 21 + 107 ms and the other worker's
    b_g2_msm beside them 46 ms alone (docs/validation-log.md)."""
    bound_p = _clamp(prestage_beside_loop - 1)
    uses = {
        "kernels": {"gpu": Inline(demand=1.0, bound=1.0)},
        "prestage": {
            "h2d": Inline(demand=float(h2d_gbps), bound=round(1.0 - bound_p, 4)),
            "gpu": Inline(demand=1.0, bound=bound_p),
        },
    }
    if b_g2_on_device:
        uses["b_g2_msm"] = {"gpu": Inline(demand=1.0, bound=1.0)}
    return uses


def _informative(alone: float, beside: float, other: float) -> bool:
    """Whether a job timed beside another started with it says how fast it ran beside
    it: the other lasted a tenth of the job at least (a shorter one hides in the job's
    noise), and the job lost less than the other lasted (losing more, it was slowed by
    something else too: no factor of the law explains it)."""
    return other >= 0.1 * alone and beside - alone < other


def overlap_factor(alone: float, beside: float, other: float) -> float:
    """The speed factor 1 + bound x demand a job must have had while a job of `other`
    seconds, started with it, ran beside it (the other barely slowed: a copy), for it to
    take `beside` seconds against `alone`: within the other's time it ran at 1 / factor,
    then alone.  beside <= other: the job ran wholly beside it, factor = beside / alone;
    else other / factor + (beside - other) = alone."""
    if alone <= 0 or beside <= alone:
        return 1.0
    if beside <= other:
        return beside / alone
    done_beside = alone - (beside - other)  # work done while the other ran
    return other / done_beside if done_beside > 0 else MAX_OVERLAP_FACTOR


#: Where a job did no work at all while the other ran (it waited out the whole of it and
#: more): the factor is unbounded; this large one stands for it.
MAX_OVERLAP_FACTOR = 1e3
