"""From a run's records and ledgers to the numbers a user reads.

Shared by predict (SimRuntime) and run (RealRuntime): both hand over the same
event records, so the same code measures both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from simgpu.events import Record
from simgpu.report.bottleneck import bottleneck, mean_shares
from simgpu.report.oom import oom_events


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in [0, 100]); None for no values."""
    if not values:
        return None
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95% Wilson score interval for a binomial proportion (sane at p = 0 or 1)."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def _clip(intervals: list[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
    return [(max(a, lo), min(b, hi)) for a, b in intervals if min(b, hi) > max(a, lo)]


def _union_length(intervals: list[tuple[float, float]]) -> float:
    total = 0.0
    end = -math.inf
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def _makespan(
    submitted: dict[int, float], finished: dict[int, float], end_time: float
) -> tuple[float, float]:
    """(start, makespan): from the first submission to the last proof's end (the run's
    end if none ended).  Busy times and shares count within that window only: a stage
    still running when the last proof ended (a run stopped early) must not count past it."""
    if not submitted:
        return (0.0, 0.0)
    start = min(submitted.values())
    end = max(finished.values()) if finished else end_time
    return (start, max(0.0, end - start))


def window_of(records: list[Record], end_time: float) -> tuple[float, float]:
    """The makespan interval of a run's records (as `summarize` measures it)."""
    submitted: dict[int, float] = {}
    finished: dict[int, float] = {}
    for r in records:
        if r.event == "proof_submitted":
            submitted[r.proof] = r.t
        elif r.event in ("proof_completed", "proof_failed"):
            finished[r.proof] = r.t
    start, makespan = _makespan(submitted, finished, end_time)
    return (start, start + makespan)


@dataclass
class RunSummary:
    """The metrics of one run."""

    submitted: int
    completed: int
    failed: int
    requested: int  # proofs the run was asked for; requested - submitted never started
    makespan: float
    throughput: float | None  # seconds per completed proof
    latencies: list[float]
    busy_frac: list[float]
    peak_vram: list[int]
    vram_capacity: list[int]
    oom_events: list[dict[str, Any]]
    peak_host: int
    host_capacity: int
    host_oom: bool
    locks: dict[str, dict[str, float]]
    failures: list[dict[str, Any]]
    deadlock: dict[str, Any] | None
    leaks: list[str] = field(default_factory=list)
    seed: int = 0
    #: Durations of the stages that ended without error (stage -> seconds, by end time).
    stage_seconds: dict[str, list[float]] = field(default_factory=dict)
    #: Per resource, the share of the makespan during which it bounded progress
    #: (report.bottleneck); None where the runtime could not see the resource.
    bottleneck: dict[str, float | None] = field(default_factory=dict)

    @property
    def any_oom(self) -> bool:
        return bool(self.oom_events)


def summarize(result: Any) -> RunSummary:
    """The metrics of one run (an events.RunResult, from either runtime)."""
    records: list[Record] = result.records
    submitted: dict[int, float] = {}
    finished: dict[int, float] = {}
    failures = []
    completed_lat = []
    gpu_open: dict[tuple[int, str, int | None, int | None, str], float] = {}
    gpu_intervals: dict[int, list[tuple[float, float]]] = {}
    any_oom = False
    stage_seconds: dict[str, list[float]] = {}
    for r in records:
        ev = r.event
        if ev == "stage_end" and "seconds" in r.fields and "error" not in r.fields:
            stage_seconds.setdefault(r.fields["stage"], []).append(float(r.fields["seconds"]))
        if ev == "proof_submitted":
            submitted[r.proof] = r.t
        elif ev == "proof_completed":
            finished[r.proof] = r.t
            completed_lat.append(r.t - submitted.get(r.proof, r.t))
        elif ev == "proof_failed":
            finished[r.proof] = r.t
            failures.append({"proof": r.proof, "reason": r.fields.get("reason", "")})
        elif ev == "stage_start" and r.fields.get("on") == "gpu" and r.fields.get("stage") != "prestage":
            gpu_open[(r.device, r.fields["stage"], r.proof, r.partition, r.worker or "")] = r.t
        elif ev == "stage_end" and r.fields.get("on") == "gpu" and r.fields.get("stage") != "prestage":
            key = (r.device, r.fields["stage"], r.proof, r.partition, r.worker or "")
            t0 = gpu_open.pop(key, None)
            if t0 is not None:
                gpu_intervals.setdefault(r.device, []).append((t0, r.t))
        elif ev == "oom":
            any_oom = True
    # with the lock story of each holder: a second pass, only for a run that ran out
    ooms = oom_events(records) if any_oom else []
    ndev = len(result.vram)
    start, makespan = _makespan(submitted, finished, result.end_time)
    window = (start, start + makespan)
    completed = len(completed_lat)
    throughput = makespan / completed if completed else None
    busy = [
        (_union_length(_clip(gpu_intervals.get(d, []), *window)) / makespan) if makespan > 0 else 0.0
        for d in range(ndev)
    ]
    locks = {
        name: {
            "acquisitions": st.acquisitions,
            "wait_s_total": st.wait_total,
            "wait_s_mean": st.wait_total / st.acquisitions if st.acquisitions else 0.0,
            "wait_s_max": st.wait_max,
        }
        for name, st in sorted(result.locks.items())
    }
    dl = result.deadlock
    requested = len(result.proofs) if result.proofs else len(submitted)
    return RunSummary(
        submitted=len(submitted),
        completed=completed,
        failed=len(failures),
        requested=max(requested, len(submitted)),
        makespan=makespan,
        throughput=throughput,
        latencies=completed_lat,
        busy_frac=busy,
        peak_vram=[led.peak for led in result.vram],
        vram_capacity=[led.capacity for led in result.vram],
        oom_events=ooms,
        peak_host=result.host.peak,
        host_capacity=result.host.capacity,
        host_oom=any(o.get("kind") == "host RAM" for o in ooms),
        locks=locks,
        failures=failures,
        deadlock=None if dl is None else dl.as_dict(),
        leaks=list(result.leaks),
        seed=result.seed,
        stage_seconds=stage_seconds,
        bottleneck=bottleneck(
            records, window, getattr(result, "saturation", None), getattr(result, "config", None)
        ),
    )


def aggregate(runs: list[RunSummary]) -> dict[str, Any]:
    """Monte Carlo over seeds: means of rates, pooled latencies, maxima of peaks, and
    the OOM risk as a proportion of runs with at least one OOM, with a 95% interval."""
    n = len(runs)
    thr = [r.throughput for r in runs if r.throughput is not None]
    lat = [x for r in runs for x in r.latencies]
    ndev = len(runs[0].peak_vram)
    oom_runs = sum(1 for r in runs if r.any_oom)
    lo, hi = wilson_interval(oom_runs, n)
    return {
        "throughput_s_per_proof": (sum(thr) / len(thr)) if thr else None,
        "throughput_s_per_proof_min": min(thr) if thr else None,
        "throughput_s_per_proof_max": max(thr) if thr else None,
        "proofs": {
            "submitted": sum(r.submitted for r in runs),
            "completed": sum(r.completed for r in runs),
            "failed": sum(r.failed for r in runs),
            "not_started": sum(r.requested - r.submitted for r in runs),
        },
        "latency_s": {
            "p50": percentile(lat, 50),
            "p95": percentile(lat, 95),
            "mean": (sum(lat) / len(lat)) if lat else None,
        },
        "devices": [
            {
                "device": d,
                "vram_bytes": runs[0].vram_capacity[d],
                "busy_frac": sum(r.busy_frac[d] for r in runs) / n,
                "peak_vram_bytes": max(r.peak_vram[d] for r in runs),
                "oom_events": sum(1 for r in runs for o in r.oom_events if o.get("pool") == f"gpu{d}"),
            }
            for d in range(ndev)
        ],
        "host": {
            "ram_bytes": runs[0].host_capacity,
            "peak_rss_bytes": max(r.peak_host for r in runs),
            "oom": any(r.host_oom for r in runs),
        },
        "oom_risk": {"p": oom_runs / n, "ci95": [lo, hi], "runs": n},
        "stages": _stage_table(runs),
        "bottleneck": mean_shares([r.bottleneck for r in runs]),
    }


def _stage_table(runs: list[RunSummary]) -> dict[str, dict[str, float]]:
    """Per stage, pooled over runs: how many ended, their mean and p95 duration.  Set
    beside a real run's, it shows which stage the model gets wrong under load."""
    pooled: dict[str, list[float]] = {}
    for r in runs:
        for stage, xs in r.stage_seconds.items():
            pooled.setdefault(stage, []).extend(xs)
    return {
        stage: {"count": len(xs), "mean_s": sum(xs) / len(xs), "p95_s": percentile(xs, 95)}
        for stage, xs in pooled.items()
        if xs
    }
