"""`simgpu calibrate --from-log`: a profile fitted from a proving daemon's own log.

An operator's cuzk daemon already times what a profile needs (simgpu.calibrate.cuzklog
reads it; docs/log-format.md maps each of its fields to simgpu's stages).  From one log:

* each stage's time and its noise: synthesis from the TIMELINE intervals, prep,
  b_g2_msm and the GPU part under the mutex from the CUZK_TIMING durations, the
  epilogue from what the GPU call leaves over;
* the contention laws: a stage's time against what else ran beside it.  Each sample's
  load on a shared resource is the demand of the jobs that ran beside it, piece by piece
  (their demands are the base profile's), and the bound fraction of each resource the
  stage leans on is the one under which the work the samples imply, as the model applies
  the law (simgpu.model.contention: speed 1 / (1 + sum_r bound_r g_r), g_r the resource's
  oversubscription), is most alike across them.  A bound is fitted only where the log
  shows the stage at several load levels; otherwise it is not identifiable and the
  base's stays;
* the configuration: from the daemon's startup lines, else from --config (a cuzk TOML),
  else inferred from the log (and said so).

A log cannot inform hardware capacities (VRAM, host RAM, bandwidths), buffers and
footprints, or how a time grows with the partition size (a log has one size): those come
from the base profile (the seed by default), and the written profile's header says what
came from where, and why.  Then the fitted profile predicts the logged configuration,
and its throughput and mean mutex wait are set beside the log's.
"""

from __future__ import annotations

import bisect
import copy
import statistics
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simgpu.calibrate.cuzklog import (
    MUTEX_LOCKS,
    PHASE_FIELDS,
    SOURCE_COMMIT,
    STAGE_SOURCES,
    TIMELINE_SOURCE,
    TIMING_SOURCE,
    CuzkLog,
    read_log,
)
from simgpu.calibrate.refit import _inline_laws
from simgpu.config import PipelineConfig, Workload, load_toml, read_config_table
from simgpu.errors import UserError
from simgpu.profile import Law, PointsLaw, Profile, find_profile, load_profile, profile_from_dict
from simgpu.profile.schema import uses_at
from simgpu.profile.tomlwrite import Inline, dumps

#: Fewest samples a stage's time and noise are fitted from.
MIN_SAMPLES = 3
#: Fewest samples, and least spread of a resource's oversubscription across them, that a
#: contention bound is fitted from; below either the bound is not identifiable.
MIN_CONTENTION_SAMPLES = 8
MIN_SPREAD = 0.05
#: The host resources whose bounds a log can fit (the interpreter lock and the driver's
#: result channel are simgpu's own prover's: kept from the base).
FITTED_RESOURCES = ("membw", "cores")
#: Host terms a fit may add to a stage whose base profile has none: the GPU part under
#: the mutex is driven by a host thread (a core) and streams its bases from host memory
#: (DESIGN.md: GPU stages slow when synthesis saturates DDR).  Its own bandwidth demand is
#: not in a log, so it is 0: the term slows the kernels, it does not load the others.
CANDIDATES: dict[str, dict[str, float]] = {"kernels": {"cores": 1.0, "membw": 0.0}}
#: The log's resolution: cuzk truncates to whole milliseconds.
QUANTUM = 1e-3
#: Monte Carlo runs of the check prediction.
CHECK_RUNS = 5
WORKLOAD = "from-log"


def _dur(ms: int) -> float:
    """Seconds from a truncated whole-millisecond duration: the middle of its millisecond."""
    return (ms + 0.5) * QUANTUM


def _wait(ms: int) -> float:
    """Seconds from a truncated lock wait: 0 stays 0 (a free mutex costs microseconds, and
    most waits are that), else the middle of its millisecond."""
    return 0.0 if ms == 0 else _dur(ms)


# --------------------------------------------------------------------- the log as jobs


@dataclass
class Job:
    """One timed piece of work: a sample of a stage, placed in time (seconds)."""

    stage: str  # the simgpu stage whose resource demands it exerts
    seconds: float
    start: float
    end: float
    quant_var: float  # variance the log's rounding adds to `seconds`


@dataclass
class Samples:
    """What one log holds for fitting, in seconds."""

    stages: dict[str, list[Job]]  # synthesis, prep, b_g2_msm, held (prestage + kernels)
    gpu_total: list[float]
    phases: dict[str, list[float]]  # cuzk field -> seconds
    waits: list[float]
    pre_lock: list[float]
    calls: list[float]  # GPU_START .. GPU_END
    queue: list[float]  # GPU_QUEUE .. GPU_PICKUP


#: The simgpu stage (or "held": prestage + kernels under the mutex) each fitted sample
#: is of, and where the log has it: the error for a log too short names these.
WHERE = {
    "synthesis": "TIMELINE SYNTH_START/SYNTH_END pairs",
    "prep": "CUZK_TIMING prep_msm_ms lines",
    "held": "CUZK_TIMING mutex_held_ms lines",
    "b_g2_msm": "CUZK_TIMING b_g2_msm_ms lines",
}


def brackets(log: CuzkLog) -> list[tuple[float, float, float]]:
    """Where each CUZK_TIMING sample was printed (ms): (the offset of the TIMELINE line
    before it, of the one after it, and its place between them).  Such a line carries no
    time, so it is placed between the TIMELINE lines around it, in proportion to its
    position among the lines between them."""
    positions = [p for p, _ in log.clock]
    offsets: list[float] = []
    for _, off in log.clock:  # cuzk's lines can be a millisecond out of order
        offsets.append(max(off, offsets[-1]) if offsets else off)
    out = []
    for s in log.samples:
        i = bisect.bisect_right(positions, s.position)
        if i == 0:
            out.append((offsets[0], offsets[0], offsets[0]))
        elif i == len(positions):
            out.append((offsets[-1], offsets[-1], offsets[-1]))
        else:
            (pa, oa), (pb, ob) = (positions[i - 1], offsets[i - 1]), (positions[i], offsets[i])
            out.append((oa, ob, oa + (ob - oa) * (s.position - pa) / (pb - pa)))
    return out


class _Acquisitions:
    """When each hold of the GPU mutex began, from the TIMELINE clock where the log pins
    it: a worker prints GPU_START just before its call enters gpu_prove_start, the call
    asks for the mutex pre_lock_cpu_ms later and has it mutex_wait_ms after that, and then
    prints the lock line.  So of the partitions not yet matched whose GPU_START line comes
    before the lock line, the one whose GPU_START + pre_lock_cpu_ms + mutex_wait_ms falls
    where the lock line is (between the TIMELINE lines around it, give or take the
    truncations) started this hold.  Where no partition or more than one does, the hold is
    placed by its release line instead."""

    def __init__(self, log: CuzkLog) -> None:
        ev = sorted(
            (p.events["GPU_START"].offset_ms, p.events["GPU_START"].line) for p in log.partitions.values()
        )
        self.starts = [o for o, _ in ev]
        self.lines = [line for _, line in ev]
        self.taken = [False] * len(ev)

    def at(self, line: int, pre_ms: int, wait_ms: int, before: float, after: float) -> float | None:
        """Seconds, or None where the log does not pin it."""
        # each of the three terms is truncated (the sum up to 3 ms short), and so are the
        # bracket's offsets (the line up to 1 ms after the later one)
        lo = bisect.bisect_left(self.starts, before - 3 - pre_ms - wait_ms)
        hi = bisect.bisect_right(self.starts, after + 1 - pre_ms - wait_ms)
        free = [i for i in range(lo, hi) if not self.taken[i] and self.lines[i] < line]
        if len(free) != 1:
            return None
        self.taken[free[0]] = True
        # the middle of each truncated millisecond; a 0 ms wait or pre-lock stays 0 (_wait)
        return (self.starts[free[0]] + 0.5) * QUANTUM + _wait(pre_ms) + _wait(wait_ms)


def samples(log: CuzkLog) -> Samples:
    """The log's stage samples and GPU-call facts, in seconds."""
    stages: dict[str, list[Job]] = {"synthesis": [], "prep": [], "b_g2_msm": [], "held": []}
    for life in log.partitions.values():
        a, b = life.at("SYNTH_START") * QUANTUM, life.at("SYNTH_END") * QUANTUM
        # two truncated offsets: the difference is unbiased, its rounding variance 2/12
        stages["synthesis"].append(Job("synthesis", b - a, a, b, QUANTUM**2 / 6))
    phases: dict[str, list[float]] = {f: [] for f in PHASE_FIELDS}
    gpu_total, waits, pre_lock = [], [], []
    by_kind = {"prep": ("prep", "prep_msm_ms"), "b_g2": ("b_g2_msm", "b_g2_msm_ms")}
    acquired = _Acquisitions(log)
    holds: list[float | None] = []  # the open holds' starts, first in first out (as read_log pairs them)
    for s, (before, after, at) in zip(log.samples, brackets(log), strict=True):
        v = s.values
        t = at * QUANTUM
        if s.kind in by_kind:
            stage, key = by_kind[s.kind]
            d = _dur(v[key])
            stages[stage].append(Job(stage, d, t - d, t, QUANTUM**2 / 12))
        elif s.kind == "held":
            d = _dur(v["mutex_held_ms"])
            start = holds.pop(0)
            if start is None:
                start = t - d
            stages["held"].append(Job("kernels", d, start, start + d, QUANTUM**2 / 12))
        elif s.kind == "lock":
            waits.append(_wait(v["mutex_wait_ms"]))
            pre_lock.append(_wait(v["pre_lock_cpu_ms"]))
            holds.append(acquired.at(s.line, v["pre_lock_cpu_ms"], v["mutex_wait_ms"], before, after))
        elif s.kind == "ntt_msm_h":
            phases["ntt_msm_h"].append(_dur(v["ntt_msm_h_ms"]))
        elif s.kind == "batch_add":
            phases["batch_add"].append(_dur(v["batch_add_ms"]))
        elif s.kind == "tail":
            phases["tail_msm"].append(_dur(v["tail_msm_ms"]))
            gpu_total.append(_dur(v["gpu_total_ms"]))
    calls = [(p.at("GPU_END") - p.at("GPU_START")) * QUANTUM for p in log.partitions.values()]
    queue = [(p.at("GPU_PICKUP") - p.at("GPU_QUEUE")) * QUANTUM for p in log.partitions.values()]
    return Samples(stages, gpu_total, phases, waits, pre_lock, calls, queue)


def check_enough(s: Samples) -> None:
    """A log too short to fit a stage is a UserError naming the stage and what it needs."""
    for name, jobs in s.stages.items():
        if len(jobs) < MIN_SAMPLES:
            what = "prestage + kernels" if name == "held" else name
            raise UserError(
                f"the log has {len(jobs)} sample(s) of {what} ({WHERE[name]}): fitting a stage's time "
                f"and noise needs at least {MIN_SAMPLES}"
            )
    timed = {f: xs for f, xs in s.phases.items() if xs} | ({"gpu_total": s.gpu_total} if s.gpu_total else {})
    for f, xs in timed.items():
        if len(xs) < MIN_SAMPLES:
            raise UserError(
                f"the log has {len(xs)} sample(s) of the kernels phase {f} (CUZK_TIMING {f}_ms lines): "
                f"fitting it needs at least {MIN_SAMPLES}"
            )
    if timed and len(timed) < len(PHASE_FIELDS) + 1:
        missing = sorted((set(PHASE_FIELDS) | {"gpu_total"}) - set(timed))
        raise UserError(f"the log times some kernels phases but not {', '.join(missing)}: all or none")


# --------------------------------------------------------------------- configuration


#: Where a setting came from, in the order the header lists them.
KINDS = ("log", "config", "inferred", "default", "base")


@dataclass
class Setting:
    value: Any
    source: str  # in words: which line, which file, or what was inferred or assumed
    kind: str  # one of KINDS


@dataclass
class Settings:
    """The configuration the daemon ran with, each item with where it came from."""

    items: dict[str, Setting] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def set(self, name: str, value: Any, source: str, kind: str) -> None:
        self.items[name] = Setting(value, source, kind)

    def value(self, name: str) -> Any:
        return self.items[name].value

    def by_kind(self, kind: str) -> list[str]:
        return [k for k, v in self.items.items() if v.kind == kind]


def infer_settings(log: CuzkLog, config: dict[str, Any], config_path: str | None, base: Profile) -> Settings:
    """Each setting from the log's startup lines, else --config, else inferred from the
    log's events (or a default, or the base profile), with its source.  Where the log
    and --config disagree, the log's stands (it is what ran) and a note says so."""
    st = Settings()
    cfg_src = f"--config {config_path}"
    lives = list(log.partitions.values())

    def disagree(name: str, value: Any) -> None:
        if name in config and config[name] != value:
            st.notes.append(f"{name}: the log says {value}, {cfg_src} says {config[name]}; the log's is used")

    def pick(name: str, message: str, key: str, fallback: tuple[Any, str, str], scale: int = 1) -> None:
        fact = log.fact(message, key)
        if fact is not None:
            value = int(fact[0]) * scale
            st.set(name, value, f"log line {fact[1]} ({message!r} {key}={fact[0]})", "log")
            disagree(name, value)
        elif name in config:
            st.set(name, config[name], cfg_src, "config")
        else:
            st.set(name, *fallback)

    pick("devices", "initializing GPU workers", "num_gpus", (1, "default: the log does not say", "default"))
    workers = {life.worker for life in lives}
    per = max(1, len(workers) // max(1, st.value("devices")))
    why = f"inferred: {len(workers)} worker id(s) in GPU_START lines"
    pick(
        "gpu_workers_per_device", "initializing GPU workers", "gpu_workers_per_device", (per, why, "inferred")
    )
    most = _most_at_once([(p.at("SYNTH_START"), p.at("SYNTH_END")) for p in lives])
    pick(
        "partition_workers",
        "starting pipeline: synthesis task + GPU workers (budget-gated)",
        "synth_worker_count",
        (most, f"inferred: at most {most} syntheses ran at once (a lower bound)", "inferred"),
    )
    pick(
        "max_gpu_queue_depth",
        "GPU queue target dispatch pacer enabled",
        "gpu_queue_target",
        (0, "default: unbounded (no pacer target in the log)", "default"),
    )
    pick(
        "total_budget",
        "memory budget initialized",
        "total_budget_gib",
        (None, "default: auto (host RAM less the safety margin)", "default"),
        scale=1 << 30,
    )
    pick("gpu_threads", "set CUZK_GPU_THREADS for C++ groth16_pool", "gpu_threads", (0, "default", "default"))
    jobs = log.jobs()
    st.set("proofs", len(jobs), f"the log: {len(jobs)} job id(s)", "log")
    disagree("proofs", len(jobs))
    spans: dict[str, tuple[int, int]] = {}
    for p in lives:
        a, b = spans.get(p.job, (1 << 62, 0))
        spans[p.job] = (min(a, p.at("SYNTH_START")), max(b, p.at("GPU_END")))
    inflight = _most_at_once(list(spans.values()))
    if "concurrency" in config:
        st.set("concurrency", config["concurrency"], cfg_src, "config")
    else:
        why = f"inferred: at most {inflight} job(s) in flight at once (closed loop)"
        st.set("concurrency", inflight, why, "inferred")
    if config.get("arrival_rate"):
        st.set("arrival_rate", config["arrival_rate"], cfg_src, "config")
    counts: dict[str, int] = {}
    for p in lives:
        counts[p.job] = counts.get(p.job, 0) + 1
    if len(set(counts.values())) > 1:
        shown = ", ".join(f"job {j}: {n}" for j, n in list(counts.items())[:3])
        raise UserError(f"{log.path}: jobs have different partition counts ({shown}): one workload per log")
    parts = next(iter(counts.values()))
    st.set("partitions", parts, f"the log: {parts} partition(s) per job", "log")
    disagree("partitions", parts)
    sizes = sorted(
        {(int(f.fields["num_constraints"]), f.line) for f in log.startup if "num_constraints" in f.fields}
    )
    if len({n for n, _ in sizes}) > 1:
        raise UserError(
            f"{log.path}: partitions of different sizes in one log ({sorted({n for n, _ in sizes})})"
        )
    if sizes:
        n, line = min(sizes, key=lambda x: x[1])
        st.set("constraints", n, f"log line {line} (num_constraints={n})", "log")
        disagree("constraints", n)
    elif "constraints" in config:
        st.set("constraints", config["constraints"], cfg_src, "config")
    else:
        wl = base.workload()
        why = (
            f"the base profile's workload {wl.name}: the log does not say (pass --config with [workload] "
            "constraints)"
        )
        st.set("constraints", wl.constraints, why, "base")
    cores = log.fact("rayon global thread pool configured", "rayon_threads")
    if cores is not None:
        why = f"log line {cores[1]} (rayon_threads={cores[0]}: the synthesis pool)"
        st.set("cpu_cores", int(cores[0]), why, "log")
    else:
        st.set("cpu_cores", base.hardware.cpu_cores, f"the base profile {base.name}", "base")
    return st


def _most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most intervals open at one instant (an end at the instant of a start does not
    overlap it)."""
    events = sorted([(a, 1) for a, _ in spans] + [(b, 0) for _, b in spans])
    most = cur = 0
    for _, kind in events:
        cur += 1 if kind else -1
        most = max(most, cur)
    return max(1, most)


def infer_design(log: CuzkLog) -> tuple[str, str]:
    """single-lock or split-finalizer, and why: a worker that takes its next partition
    before its previous one's GPU_END hands the tail to a finalizer (cuzk's Phase 12
    split API).  A log cannot tell single-lock from serial or two-lock."""
    by_worker: dict[int, list[Any]] = {}
    for p in log.partitions.values():
        by_worker.setdefault(p.worker, []).append(p)
    for w, ps in sorted(by_worker.items()):
        ps.sort(key=lambda p: p.at("GPU_PICKUP"))
        for prev, nxt in zip(ps, ps[1:], strict=False):
            if nxt.at("GPU_PICKUP") < prev.at("GPU_END"):
                return (
                    "split-finalizer",
                    f"worker {w} took job {nxt.job} partition {nxt.index} (line "
                    f"{nxt.events['GPU_PICKUP'].line}) before its previous GPU_END (line "
                    f"{prev.events['GPU_END'].line})",
                )
    return "single-lock", "every worker finished a partition (GPU_END) before taking its next"


# --------------------------------------------------------------------- contention


@dataclass
class Bound:
    resource: str
    bound: float
    fitted: bool
    why: str
    demand: float | None = None  # set for a term the base lacks and the fit added


@dataclass
class StageFit:
    """One stage's fit: unloaded seconds at the log's size, noise, contention bounds."""

    stage: str
    samples: int
    mean: float
    t0: float
    cv: float
    spread: float  # the samples' coefficient of variation before the contention law
    bounds: list[Bound]


@dataclass(frozen=True)
class PhaseUse:
    """How one phase of a stage leans on shared resources, as far as a log can place it."""

    share: float  # of the stage's unloaded time (the base's, at the log's size)
    uses: dict[str, tuple[float, float]]  # resource -> (demand, bound)
    inherits: bool  # takes the stage's own uses (those are the bounds a fit writes)


def phase_uses(
    prof: Profile, n: int, extra: dict[str, dict[str, tuple[float, float]]] | None = None
) -> dict[str, list[PhaseUse]]:
    """Per stage of the base, its phases' uses at size n (with `extra` stage-level uses
    added).  A log times a stage, not its phases: each sample is cut into its phases in
    the base's proportions, so that a phase with uses of its own (simgpu's synthesis hands
    its result back through the driver's one result thread at its end) loads the others,
    and is slowed, where it runs."""
    out: dict[str, list[PhaseUse]] = {}
    for name, st in prof.stages.items():
        where = f"[stages.{name}]"
        own = {r: (u.demand, u.bound) for r, u in uses_at(st.uses, n, where).items()}
        own |= (extra or {}).get(name, {})
        times = [max(0.0, ph.time(n)) for ph in st.phases]
        total = sum(times)
        out[name] = [
            PhaseUse(
                t / total if total > 0 else 1 / len(times),
                own
                if ph.uses is None
                else {r: (u.demand, u.bound) for r, u in uses_at(ph.uses, n, f"{where} {ph.name}").items()},
                ph.uses is None,
            )
            for ph, t in zip(st.phases, times, strict=True)
        ]
    return out


@dataclass
class Piece:
    """One phase of one sample, placed in its sample's interval."""

    job: int
    phase: PhaseUse
    start: float
    end: float


def pieces(
    jobs: list[Job], phases: dict[str, list[PhaseUse]], splits: dict[int, list[float]] | None = None
) -> list[Piece]:
    """Each job cut into its phases: by `splits` (job -> fractions of its interval), else
    in the base's proportions."""
    out = []
    for i, j in enumerate(jobs):
        t, dur = j.start, max(j.end - j.start, QUANTUM / 2)
        phs = phases.get(j.stage) or [PhaseUse(1.0, {}, True)]
        fracs = (splits or {}).get(i) or [ph.share for ph in phs]
        for ph, f in zip(phs, fracs, strict=True):
            out.append(Piece(i, ph, t, t + f * dur))
            t += f * dur
    return out


def placed_pieces(
    jobs: list[Job], phases: dict[str, list[PhaseUse]], resources: list[str], capacity: dict[str, float]
) -> tuple[list[Piece], list[tuple[np.ndarray, np.ndarray]]]:
    """Pieces placed where the model would run them: a phase slowed by its own uses takes
    more of its sample's interval than its share of the work, so the cuts are moved until
    each phase's part is its share of the work times its mean stretch there (with the
    base's bounds; a few rounds settle it)."""
    splits: dict[int, list[float]] = {}
    ps = pieces(jobs, phases)
    loads = piece_loads(ps, resources)
    multi = {i for i, j in enumerate(jobs) if len(phases.get(j.stage) or ()) > 1}
    for _ in range(3):
        if not multi:
            break
        stretch: dict[int, list[float]] = {}
        for p, (dt, load) in zip(ps, loads, strict=True):
            if p.job not in multi:
                continue
            st = np.ones(len(dt))
            for r, (dem, bnd) in p.phase.uses.items():
                if r in capacity:
                    st += bnd * _oversubscription(r, dem, load[:, resources.index(r)], capacity[r])
            stretch.setdefault(p.job, []).append(float(dt @ st / max(float(np.sum(dt)), 1e-12)))
        for i in multi:
            raw = [ph.share * x for ph, x in zip(phases[jobs[i].stage], stretch[i], strict=True)]
            splits[i] = [x / sum(raw) for x in raw]
        ps = pieces(jobs, phases, splits)
        loads = piece_loads(ps, resources)
    return ps, loads


def piece_loads(ps: list[Piece], resources: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per piece: the stretches of its interval between the starts and ends of the other
    jobs' pieces, as (durations, stretches x resources: the others' demand during each).
    The model's loads change only when a job or phase starts or ends, so between those
    instants they are what its fluid share saw."""
    s = np.array([p.start for p in ps])
    e = np.array([p.end for p in ps])
    job = np.array([p.job for p in ps])
    d = np.array([[p.phase.uses.get(r, (0.0, 0.0))[0] for r in resources] for p in ps]).reshape(len(ps), -1)
    out = []
    for i, p in enumerate(ps):
        beside = np.flatnonzero((e > s[i]) & (s < e[i]) & (job != p.job))
        cuts = np.unique(np.clip(np.concatenate(([s[i], e[i]], s[beside], e[beside])), s[i], e[i]))
        mid = (cuts[:-1] + cuts[1:]) / 2
        active = (s[beside][None, :] <= mid[:, None]) & (e[beside][None, :] > mid[:, None])
        out.append((np.diff(cuts), active.astype(float) @ d[beside]))
    return out


def _oversubscription(r: str, demand: float, load: np.ndarray, capacity: float) -> np.ndarray:
    if r == "gil":  # bursty: the others' demand over the capacity (model.contention)
        return load / capacity
    return np.maximum(0.0, (demand + load) / capacity - 1.0)


def fit_stage(
    name: str,
    own: dict[str, tuple[float, float]],
    sample_pieces: list[list[tuple[PhaseUse, np.ndarray, np.ndarray]]],
    quant_var: list[float],
    resources: list[str],
    capacity: dict[str, float],
    candidates: dict[str, float] | None = None,
) -> StageFit:
    """The unloaded time t0 and the identifiable bounds of one stage's own uses (and of
    the candidate terms, resource -> demand, that the base lacks).

    In the model a job of work t0 * noise runs at speed 1 / stretch(t), stretch = 1 +
    sum_r bound_r g_r(t), g_r the oversubscription of resource r beside it; so the work a
    sample did is the integral of dt / stretch(t) over its interval.  The bounds are those
    that make that implied work most alike across the samples (least variance of its
    logarithm: the model's noise is lognormal), and t0 is its mean."""
    from scipy.optimize import minimize

    added = {r: d for r, d in (candidates or {}).items() if r not in own and r in capacity}
    own = own | {r: (d, 0.0) for r, d in added.items()}
    used = [r for r in sorted(set(resources) | set(added)) if r in own and r in capacity]
    dts, gs, extras, inh = [], [], [], []
    for sp in sample_pieces:
        dt_l, g_l, x_l, m_l = [], [], [], []
        for ph, dt, load in sp:
            g = np.zeros((len(dt), len(used)))
            extra = np.zeros(len(dt))
            for r, (dem, bnd) in (own if ph.inherits else ph.uses).items():
                if r not in capacity:
                    continue  # a device resource: the mutex keeps it to one job
                k = resources.index(r)
                over = _oversubscription(r, dem, load[:, k], capacity[r])
                if ph.inherits and r in used:
                    g[:, used.index(r)] = over
                else:
                    extra += bnd * over  # a phase's own use: the base's bound, kept
            dt_l.append(dt)
            g_l.append(g)
            x_l.append(extra)
            m_l.append(np.full(len(dt), 1.0 if ph.inherits else 0.0))
        dts.append(np.concatenate(dt_l))
        gs.append(np.vstack(g_l))
        extras.append(np.concatenate(x_l))
        inh.append(np.concatenate(m_l))
    t = np.array([float(np.sum(dt)) for dt in dts])
    # each sample's time-averaged oversubscription over the phases that take the stage's uses
    gbar = np.array(
        [(dt * m) @ g / max(float(np.sum(dt * m)), 1e-12) for dt, g, m in zip(dts, gs, inh, strict=True)]
    ).reshape(len(t), len(used))
    bounds: list[Bound] = []
    fit: list[str] = []
    for c, r in enumerate(used):
        base_f = own[r][1]
        col = gbar[:, c]
        spread = float(np.std(col))
        if r in added:
            pass  # a term the base lacks: fitted where identifiable, else not added (below)
        elif r not in FITTED_RESOURCES:
            bounds.append(Bound(r, base_f, False, "kept from the base (a log does not time it)"))
        elif len(t) < MIN_CONTENTION_SAMPLES:
            why = f"kept from the base: {len(t)} samples, fitting a bound needs {MIN_CONTENTION_SAMPLES}"
            bounds.append(Bound(r, base_f, False, why))
        elif float(np.max(col)) <= 0.0:
            why = f"kept from the base: the log never oversubscribed {r} beside it (not identifiable)"
            bounds.append(Bound(r, base_f, False, why))
        elif spread < MIN_SPREAD:
            why = (
                f"kept from the base: the log shows it at one load level ({r} oversubscribed by "
                f"{float(np.mean(col)):.2f} +- {spread:.2f}): not identifiable"
            )
            bounds.append(Bound(r, base_f, False, why))
        else:
            fit.append(r)
    for r in [x for x in used if x in added]:
        col = gbar[:, used.index(r)]
        if len(t) >= MIN_CONTENTION_SAMPLES and float(np.std(col)) >= MIN_SPREAD:
            fit.append(r)
        else:
            bounds.append(
                Bound(r, 0.0, False, "not in the base; not added: the log does not show it at several loads")
            )

    # resources whose load rises and falls together cannot be told apart: they keep the
    # base's ratio and share one fitted scale
    def together(a: str, b: str) -> bool:
        c0, c1 = gbar[:, used.index(a)], gbar[:, used.index(b)]
        return abs(float(np.corrcoef(c0, c1)[0, 1])) > 0.95

    groups: list[list[str]] = []
    for r in [x for x in fit if x not in added]:
        for grp in groups:
            if together(grp[0], r):
                grp.append(r)
                break
        else:
            groups.append([r])
    # a term the base lacks has no ratio to keep: of added terms that rise together only
    # the first (the host thread's core before the bandwidth) is fitted
    for r in [x for x in fit if x in added]:
        first = next((grp[0] for grp in groups if grp[0] in added and together(grp[0], r)), None)
        if first is None:
            groups.append([r])
        else:
            why = (
                f"not in the base; not added: its load rose with {first}'s, and a log cannot tell them apart"
            )
            bounds.append(Bound(r, 0.0, False, why))
    fixed = {b.resource: b.bound for b in bounds}
    room = max(0.0, 1.0 - sum(fixed.values()))

    def bounds_of(x: np.ndarray) -> dict[str, float]:
        f = dict(fixed)
        for scale, grp in zip(x, groups, strict=True):
            for r in grp:
                f[r] = float(scale) * (own[r][1] if len(grp) > 1 else 1.0)
        return f

    def work(f: dict[str, float]) -> np.ndarray:
        fv = np.array([f[r] for r in used])
        return np.array(
            [float(np.sum(dt / (1.0 + x + g @ fv))) for dt, g, x in zip(dts, gs, extras, strict=True)]
        )

    fitted: dict[str, float] = {}
    if groups:
        weight = [max(1e-9, sum(own[r][1] for r in grp)) if len(grp) > 1 else 1.0 for grp in groups]
        top = [room / w for w in weight]
        res = minimize(
            lambda x: float(np.var(np.log(work(bounds_of(x))))),
            np.array([0.5 * x for x in top]),
            method="SLSQP",
            bounds=[(0.0, x) for x in top],
            constraints=[{"type": "ineq", "fun": lambda x: room - float(np.dot(x, weight))}],
        )
        fitted = {r: v for r, v in bounds_of(res.x).items() if r not in fixed}
    for grp in groups:
        for r in grp:
            c = gbar[:, used.index(r)]
            why = f"fitted from {len(t)} samples at {r} oversubscription {c.min():.2f}..{c.max():.2f}"
            if len(grp) > 1:
                others = ", ".join(x for x in grp if x != r)
                why += f" (with {others}: their loads rose together, so the base's ratio is kept)"
            if sum(fitted[x] for x in fitted) >= room - 1e-3 and room > 0:
                # the fit ran into the most a stage can be bound: the slowdown beside it is
                # more than this resource's law carries (a mechanism the base lacks)
                bounds.append(
                    Bound(r, own[r][1], False, f"kept from the base: {why}, but the fit ran into bound 1")
                )
            elif r in added and fitted[r] < 0.005:
                bounds.append(Bound(r, 0.0, False, f"not in the base; not added: {why} gave bound 0"))
            elif r in added:
                bounds.append(Bound(r, float(fitted[r]), True, why + "; added: not in the base", added[r]))
            else:
                bounds.append(Bound(r, float(fitted[r]), True, why + f"; base {own[r][1]:.4g}"))
    w = work({b.resource: b.bound for b in bounds})
    t0 = float(np.mean(w))
    quant = float(np.mean(np.array(quant_var) / np.maximum(t, QUANTUM / 2) ** 2))
    var = float(np.var(w / t0, ddof=1)) if len(w) > 1 else 0.0
    cv = float(np.sqrt(max(0.0, var - quant)))
    raw = float(np.std(t) / np.mean(t))
    order = {r: i for i, r in enumerate(used)}
    bounds.sort(key=lambda b: order[b.resource])
    return StageFit(name, len(t), float(np.mean(t)), t0, min(cv, 1.9), raw, bounds)


# --------------------------------------------------------------------- the profile


def law_at(law: Law | PointsLaw, n: int, seconds: float) -> Any:
    """The base's law for a time, rescaled to give `seconds` at size n: its shape in n
    is the base's (a log has one size), its level the log's."""
    if seconds <= 0:
        return 0.0
    base = law(n)
    if base <= 0:  # the base says nothing of this time's shape: proportional to n
        return Inline(law=f"t_log * n/{n}", t_log=seconds)
    k = seconds / base
    if isinstance(law, PointsLaw):
        out = Inline(points=[[int(x) if x == int(x) else x, y * k] for x, y in law.points])
        if law.beyond is not None:
            out["beyond"] = scaled(law.beyond, k)
        return out
    return seconds if _constant(law) else scaled(law, k)


def _constant(law: Law) -> bool:
    try:
        float(law.expr)
    except ValueError:
        return False
    return True


def scaled(law: Law, k: float) -> Inline:
    """`law` times k, as a law table."""
    name = next(c for c in ("k_log", "k_log1", "k_log2") if c not in law.coeffs)
    return Inline(law=f"{name} * ({law.expr})", **law.coeffs, **{name: k})


def kernel_shares(prof: Profile, n: int, s: Samples) -> tuple[float, list[tuple[str, float, bool]], str]:
    """How the time under the mutex splits: (prestage's share, [(phase, its share of the
    kernels, whether the base lacks it)], how it was decided).  The base's phases come
    first, in their order."""
    pre = prof.stages["prestage"].phases
    base_pre = sum(ph.time(n) for ph in pre)
    kphases = prof.stages["kernels"].phases
    base_k = [max(0.0, ph.time(n)) for ph in kphases]
    if not s.gpu_total:
        total = base_pre + sum(base_k)
        pre_share = base_pre / total if total > 0 else 0.0
        shares = [b / sum(base_k) if sum(base_k) > 0 else 1 / len(base_k) for b in base_k]
        out = [(ph.name, sh, False) for ph, sh in zip(kphases, shares, strict=True)]
        return pre_share, out, "the log times only the whole GPU part (mutex_held_ms): split as in the base"
    held = statistics.mean(j.seconds for j in s.stages["held"])
    gtotal = statistics.mean(s.gpu_total)
    pre_share = min(1.0, max(0.0, held - gtotal) / held)
    # a field that is 0 ms in every sample is a phase that did not run (simgpu's prover
    # has no batch addition), not one a little under a millisecond
    field_share = {
        f: statistics.mean(xs) / gtotal if max(xs) > QUANTUM else 0.0 for f, xs in s.phases.items()
    }
    covered = sum(field_share.values())
    if covered > 1.0:  # rounding of the fields: they cannot exceed the GPU thread's total
        field_share = {f: v / covered for f, v in field_share.items()}
        covered = 1.0
    shares = [0.0] * len(kphases)
    extra: list[tuple[str, float, bool]] = []
    owner = {p: f for f, ps in PHASE_FIELDS.items() for p in ps}
    for f, sh in field_share.items():
        idx = [i for i, ph in enumerate(kphases) if owner.get(ph.name) == f]
        _spread(shares, idx, base_k, sh, extra, f)
    rest = [i for i, ph in enumerate(kphases) if ph.name not in owner]
    _spread(shares, rest, base_k, 1.0 - covered, extra, "sync")
    out = [(ph.name, sh, False) for ph, sh in zip(kphases, shares, strict=True)]
    out += extra
    how = (
        "prestage = mutex_held_ms - gpu_total_ms; kernels phases from ntt_msm_h_ms, batch_add_ms, "
        "tail_msm_ms, the rest of gpu_total_ms to the phases no field covers"
    )
    return pre_share, out, how


def _spread(
    shares: list[float], idx: list[int], base: list[float], share: float, extra: list, name: str
) -> None:
    """Give `share` to the phases `idx` in the base's proportions, or to a new phase."""
    if share <= 0:
        return
    if not idx:
        if share > 0.01 or name != "sync":
            extra.append((name, share, True))
        return
    total = sum(base[i] for i in idx)
    for i in idx:
        shares[i] += share * (base[i] / total if total > 0 else 1 / len(idx))


@dataclass
class FromLog:
    """What `--from-log` fitted and decided: the profile document and the report."""

    doc: dict[str, Any]
    header: str
    settings: Settings
    fits: dict[str, StageFit]
    design: tuple[str, str]
    kept: list[str]
    checks: dict[str, dict[str, float | None]]
    log: CuzkLog
    notes: list[str]

    def summary(self) -> list[str]:
        """The report's lines, for the terminal."""
        log = self.log
        lines = [
            f"read {log.path}: {log.lines} lines, {len(log.partitions)} partitions of {len(log.jobs())} "
            f"job(s), {len(log.samples)} CUZK_TIMING samples"
        ]
        if log.skipped:
            counts = sorted(log.skipped.items(), key=lambda x: -x[1])
            lines.append("skipped: " + ", ".join(f"{n} {k}" for k, n in counts))
        lines.append("configuration:")
        for name, s in self.settings.items.items():
            shown = "auto" if s.value is None else s.value
            lines.append(f"  {name:24s} {shown!s:>12}  {s.source}")
        lines.append(f"  {'design':24s} {self.design[0]:>12}  inferred: {self.design[1]}")
        lines.append("stages (seconds at the log's size; t0 = unloaded, after the contention law):")
        for f in self.fits.values():
            lines.append(
                f"  {f.stage:16s} {f.samples:4d} samples  mean {f.mean:.4f}  t0 {f.t0:.4f}  noise cv "
                f"{f.cv:.3f} (raw spread {f.spread:.3f})"
            )
            lines += [f"    {b.resource:9s} bound {b.bound:.4f}  {b.why}" for b in f.bounds]
        lines += [f"from the base profile: {k}" for k in self.kept]
        lines += [f"note: {n}" for n in self.notes]
        for name, c in self.checks.items():
            err = "-" if c["rel_error"] is None else f"{100 * c['rel_error']:+.1f} %"
            pred = "-" if c["predicted"] is None else f"{c['predicted']:.4f}"
            lines.append(f"check {name}: predicted {pred} s, logged {c['logged']:.4f} s, error {err}")
        return lines


def fit_stages(s: Samples, prof: Profile, n: int, cores: float) -> dict[str, StageFit]:
    """Every fitted stage: synthesis, prep, b_g2_msm and the GPU part under the mutex.
    Where the GPU part gains a term the base lacks, the fit is made again with its demand
    loading the others (a core driving the GPU is a core the others do not have)."""
    fits = _fit_pass(s, prof, n, cores, {})
    added = {
        b.resource: (b.demand, b.bound) for b in fits["held"].bounds if b.fitted and b.demand is not None
    }
    if not added:
        return fits
    again = _fit_pass(s, prof, n, cores, {"kernels": added})
    kept = {b.resource for b in again["held"].bounds if b.fitted and b.demand is not None}
    # a second fit that drops the term would leave its demand unaccounted: keep the first
    return again if kept == set(added) else fits


def _fit_pass(
    s: Samples, prof: Profile, n: int, cores: float, extra: dict[str, dict[str, tuple[float, float]]]
) -> dict[str, StageFit]:
    phases = phase_uses(prof, n, extra)
    resources = sorted({r for ps in phases.values() for ph in ps for r in ph.uses if r not in ("gpu", "h2d")})
    hw = prof.hardware
    capacity = {"membw": hw.membw_gbps, "cores": cores, "gil": 1.0, "driver_rx": 1.0}
    order = ("synthesis", "prep", "b_g2_msm", "held")
    jobs = [j for name in order for j in s.stages[name]]
    ps, loads = placed_pieces(jobs, phases, resources, capacity)
    per_job: list[list[tuple[PhaseUse, np.ndarray, np.ndarray]]] = [[] for _ in jobs]
    for p, (dt, load) in zip(ps, loads, strict=True):
        per_job[p.job].append((p.phase, dt, load))
    fits: dict[str, StageFit] = {}
    at = 0
    for name in order:
        k = len(s.stages[name])
        stage = "kernels" if name == "held" else name
        own = {r: (u.demand, u.bound) for r, u in uses_at(prof.stages[stage].uses, n, stage).items()}
        fits[name] = fit_stage(
            "prestage+kernels" if name == "held" else name,
            own,
            per_job[at : at + k],
            [j.quant_var for j in s.stages[name]],
            resources,
            capacity,
            CANDIDATES.get(stage),
        )
        at += k
    return fits


class _Doc:
    """The base profile's document, rewritten with what the log fitted."""

    def __init__(self, raw: dict[str, Any], prof: Profile, n: int) -> None:
        self.doc = _inline_laws(copy.deepcopy(raw))
        self.doc.pop("calibration", None)  # the base's measurements are not this profile's
        self.prof, self.n = prof, n
        self.stages = self.doc["stages"]
        self.notes: list[str] = []

    def set_time(self, stage: str, seconds: float) -> None:
        """The stage's time (its phases' in the base's proportions) at the fitted level,
        each law in the base's shape."""
        laws = [ph.time for ph in self.prof.stages[stage].phases]
        base_t = [max(0.0, law(self.n)) for law in laws]
        total = sum(base_t)
        shares = [b / total if total > 0 else 1 / len(base_t) for b in base_t]
        if "phases" in self.stages[stage]:
            for ph, law, sh in zip(self.stages[stage]["phases"], laws, shares, strict=True):
                ph["time"] = law_at(law, self.n, seconds * sh)
        else:
            self.stages[stage]["time"] = law_at(laws[0], self.n, seconds)

    def set_fit(self, stage: str, fit: StageFit, seconds: float | None = None) -> None:
        if seconds is not None:
            self.set_time(stage, seconds)
        self.stages[stage]["noise_cv"] = round(max(0.005, fit.cv), 4)
        uses = self.stages[stage].get("uses")
        for b in fit.bounds:
            if b.fitted and b.demand is not None:
                if uses is None:
                    uses = self.stages[stage]["uses"] = Inline()
                uses[b.resource] = Inline(demand=b.demand, bound=round(b.bound, 4))
                self.notes.append(f"{stage}: {b.resource} term added ({b.why})")
            elif b.fitted and uses is not None and b.resource in uses:
                uses[b.resource] = Inline(demand=uses[b.resource].get("demand", 1.0), bound=round(b.bound, 4))
        if uses:
            self._make_room(stage, uses)

    def _make_room(self, stage: str, uses: dict[str, Any]) -> None:
        """A stage's bounds add up to at most 1: where an added host term pushes them over,
        the device terms (which a log cannot see: the mutex keeps one job on the GPU) give
        up the difference."""
        host = sum(
            float(u["bound"]) for r, u in uses.items() if r not in DEVICE and _is_number(u.get("bound"))
        )
        device = {r: u for r, u in uses.items() if r in DEVICE and _is_number(u.get("bound"))}
        total = host + sum(float(u["bound"]) for u in device.values())
        if total <= 1.0 + 1e-9 or not device:
            return
        scale = max(0.0, 1.0 - host) / sum(float(u["bound"]) for u in device.values())
        for r, u in device.items():
            u["bound"] = round(float(u["bound"]) * scale, 4)
            self.notes.append(f"{stage}: {r} bound lowered to {u['bound']} so that its bounds add up to 1")

    def set_kernels(self, seconds: float, shares: list[tuple[str, float, bool]]) -> None:
        kernels = self.stages["kernels"]
        if "phases" not in kernels:
            self.set_time("kernels", seconds)
            if any(new for _, _, new in shares) or len(shares) > 1:
                self.notes.append("kernels: the base has no phases, so the log's phase times are not used")
            return
        laws = [ph.time for ph in self.prof.stages["kernels"].phases]
        phases = []
        for i, (name, share, new) in enumerate(shares):
            if new:
                phases.append({"name": name, "time": round(seconds * share, 9)})
                self.notes.append(
                    f"kernels phase {name}: timed by the log, not in the base: added, no buffers"
                )
            else:
                ph = dict(kernels["phases"][i])
                ph["time"] = law_at(laws[i], self.n, seconds * share)
                phases.append(ph)
        kernels["phases"] = phases


DEVICE = ("gpu", "h2d")


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _mean_wait(summaries: list[Any]) -> float:
    total = acq = 0.0
    for s in summaries:
        for name, lk in s.locks.items():
            if name.rsplit("/", 1)[-1] in MUTEX_LOCKS:
                total += lk["wait_s_total"]
                acq += lk["acquisitions"]
    return total / acq if acq else 0.0


def _mean_queue(records: list[Any]) -> float | None:
    """Mean seconds from partition_queued to partition_picked in one predicted run."""
    queued: dict[tuple[int, int], float] = {}
    waits = []
    for r in records:
        key = (r.proof, r.partition)
        if r.event == "partition_queued":
            queued[key] = r.t
        elif r.event == "partition_picked" and key in queued:
            waits.append(r.t - queued.pop(key))
    return statistics.mean(waits) if waits else None


def _check(pred: float | None, logged: float) -> dict[str, float | None]:
    err = None if pred is None or logged <= 0 else (pred - logged) / logged
    return {"predicted": pred, "logged": logged, "rel_error": err}


def fit_from_log(
    log_path: Path, out: Path, config_path: Path | None = None, base: str | None = None
) -> FromLog:
    """Read the log, fit, check, and write the profile to `out` (see the module docstring)."""
    from simgpu.model.montecarlo import predict
    from simgpu.sched.registry import resolve_design

    log = read_log(log_path)
    base_path = find_profile(base)
    prof = load_profile(base_path)
    try:
        raw = tomllib.loads(base_path.read_text())
    except OSError as e:
        raise UserError(f"cannot read base profile {base_path}: {e.strerror}") from None
    config = read_config_table(load_toml(config_path, "config file"), str(config_path)) if config_path else {}
    st = infer_settings(log, config, str(config_path) if config_path else None, prof)
    s = samples(log)
    check_enough(s)
    n = int(st.value("constraints"))
    design = infer_design(log)
    fits = fit_stages(s, prof, n, float(st.value("cpu_cores")))

    d = _Doc(raw, prof, n)
    for stage in ("synthesis", "prep", "b_g2_msm"):
        d.set_fit(stage, fits[stage], fits[stage].t0)
    held = fits["held"]
    pre_share, kshares, how = kernel_shares(prof, n, s)
    d.set_fit("prestage", held, held.t0 * pre_share)
    d.set_fit("kernels", held)
    d.set_kernels(held.t0 * (1.0 - pre_share), kshares)
    notes = [*st.notes, *d.notes, f"prestage + kernels: {how}"]
    kept = []
    # the epilogue: what a GPU call (GPU_START .. GPU_END) leaves once the parts the
    # design runs on its path are taken off (single-lock and split-finalizer alike)
    parts = [statistics.mean(s.pre_lock), statistics.mean(s.waits), held.mean, fits["b_g2_msm"].mean]
    epi = statistics.mean(s.calls) - sum(parts)
    if epi > QUANTUM / 2:
        d.set_time("epilogue", epi)
        notes.append(f"epilogue: {epi:.4f} s, the GPU calls' mean less their wait, hold and b_g2_msm")
        kept.append("epilogue noise (the log gives the epilogue as a difference of means, not per call)")
    else:
        kept.append(
            f"epilogue time and noise (the GPU calls leave {epi * 1e3:.1f} ms beside their parts: b_g2_msm "
            "ran beside the kernels, as in cuzk's split API, or under the mutex; not identifiable)"
        )
    doc = d.doc
    if st.items["cpu_cores"].kind == "log":
        doc["hardware"]["cpu_cores"] = int(st.value("cpu_cores"))
    kept += [
        "hardware: GPU, VRAM, host RAM and what is resident, memory and host-to-device bandwidth"
        + ("" if st.items["cpu_cores"].kind == "log" else ", cores")
        + " (a log does not measure capacities)",
        "every buffer's size and every stage's footprints (a log has no memory figures)",
        f"how each time grows with the partition size (the log has one size, n = {n:,}: each law keeps "
        "the base's shape, at the log's level)",
        "resource demands, and every contention bound not fitted (see above for why)",
    ]
    wl = Workload(WORKLOAD, int(st.value("partitions")), n)
    doc["workloads"][WORKLOAD] = {"partitions": wl.partitions, "constraints": n}
    doc["profile"] = {
        "name": out.stem,
        "description": f"fitted from the daemon log {log_path.name} on the base profile {prof.name}",
        "source": f"simgpu calibrate --from-log {log_path.name}, {time.strftime('%Y-%m-%d')}",
        "default_workload": WORKLOAD,
    }

    # the check: the fitted profile predicts the logged configuration
    keys = ("devices", "gpu_workers_per_device", "partition_workers", "max_gpu_queue_depth", "total_budget")
    # gpu_threads is recorded from the log but not run: the profile's stage times hold for
    # cuzk's default pool (simgpu.config refuses any other value)
    keys += ("proofs", "concurrency", "arrival_rate")
    cfg = PipelineConfig().with_overrides(**{k: st.value(k) for k in keys if k in st.items})
    try:
        pred = predict(profile_from_dict(doc, str(out)), cfg, wl, resolve_design(design[0]), runs=CHECK_RUNS)
    except UserError as e:
        raise UserError(f"the fitted profile cannot predict the logged configuration: {e}") from None
    lives = list(log.partitions.values())
    makespan = (max(p.at("GPU_END") for p in lives) - min(p.at("SYNTH_START") for p in lives)) * QUANTUM
    checks = {
        "throughput (s/proof)": _check(
            pred.aggregate()["throughput_s_per_proof"], makespan / len(log.jobs())
        ),
        "mean mutex wait": _check(_mean_wait(pred.summaries), statistics.mean(s.waits)),
        "mean GPU queue wait": _check(_mean_queue(pred.first.records), statistics.mean(s.queue)),
    }
    doc["calibration"] = _calibration_table(log_path, prof, design, fits, st, checks)
    header = _header(log_path, log, prof, n, fits, st, design, kept, checks)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dumps(doc, header))
    load_profile(out)  # what was written must load
    return FromLog(doc, header, st, fits, design, kept, checks, log, notes)


def _key(name: str) -> str:
    return name.split(" (")[0].replace("+", "_").replace(" ", "_")


def _calibration_table(
    log_path: Path,
    prof: Profile,
    design: tuple[str, str],
    fits: dict[str, StageFit],
    st: Settings,
    checks: dict[str, dict[str, float | None]],
) -> dict[str, Any]:
    def num(v: float | None) -> float | str:
        return "n/a" if v is None else round(v, 6)

    return {
        "method": "from-log",
        "log": log_path.name,
        "formats": f"curio {SOURCE_COMMIT}",
        "base": prof.name,
        "design": design[0],
        "samples": {_key(f.stage): f.samples for f in fits.values()},
        "mean_s": {_key(f.stage): round(f.mean, 6) for f in fits.values()},
        "noise_cv": {_key(f.stage): round(f.cv, 4) for f in fits.values()},
        "raw_spread_cv": {_key(f.stage): round(f.spread, 4) for f in fits.values()},
        "bounds_fitted": [f"{f.stage}.{b.resource}" for f in fits.values() for b in f.bounds if b.fitted],
        "config": {k: ("auto" if v.value is None else v.value) for k, v in st.items.items()},
        "config_source": {k: v.kind for k, v in st.items.items()},
        "checks": {_key(k): Inline({kk: num(v) for kk, v in c.items()}) for k, c in checks.items()},
    }


def _header(
    log_path: Path,
    log: CuzkLog,
    prof: Profile,
    n: int,
    fits: dict[str, StageFit],
    st: Settings,
    design: tuple[str, str],
    kept: list[str],
    checks: dict[str, dict[str, float | None]],
) -> str:
    fitted = [f"{f.stage}.{b.resource}" for f in fits.values() for b in f.bounds if b.fitted]
    not_fitted = [f"{f.stage}.{b.resource}" for f in fits.values() for b in f.bounds if not b.fitted]
    lines = [
        f"simgpu profile fitted by `simgpu calibrate --from-log` on {time.strftime('%Y-%m-%d %H:%M')}",
        f"from the daemon log {log_path.name} ({log.lines} lines: {len(log.jobs())} jobs, "
        f"{len(log.partitions)} partitions of {n:,} constraints), on the base profile {prof.name}.",
        f"Formats as printed by curio {SOURCE_COMMIT[:12]} ({TIMELINE_SOURCE}, {TIMING_SOURCE});",
        "they and the mapping of cuzk's stages to simgpu's: docs/log-format.md.",
        "Where such a log times each of simgpu's stages:",
        *[f"  {stage}: {where};" for stage, where in STAGE_SOURCES.items()],
        "",
        "From the log:",
        "  stage times at the log's size and their noise: "
        + ", ".join(f.stage for f in fits.values())
        + ", and the epilogue where a GPU call leaves time for it;",
        "  contention bounds fitted: " + (", ".join(fitted) or "none") + ";",
    ]
    names = {
        "log": "configuration from its lines",
        "config": "from --config",
        "inferred": "inferred from its events",
        "default": "defaults (the log does not say)",
        "base": "from the base profile",
    }
    for kind in KINDS:
        keys = st.by_kind(kind)
        if keys:
            lines.append(f"  {names[kind]}: {', '.join(keys)};")
    lines += [
        f"  design {design[0]}, inferred ({design[1]}).",
        "",
        f"From the base profile {prof.name}, because a log cannot inform them:",
        *[f"  {k};" for k in kept],
        "  contention bounds kept (not identifiable from this log): "
        + (", ".join(not_fitted) or "none")
        + ".",
        "",
        "Checks (the logged configuration predicted with this profile):",
    ]
    for name, c in checks.items():
        err = "n/a" if c["rel_error"] is None else f"{100 * c['rel_error']:+.1f}%"
        pred = "n/a" if c["predicted"] is None else f"{c['predicted']:.4f}"
        lines.append(f"  {name}: predicted {pred} s, logged {c['logged']:.4f} s ({err}).")
    return "\n".join(lines)
