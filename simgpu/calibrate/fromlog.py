"""`simgpu calibrate --from-log`: a profile fitted from a proving daemon's own log.

An operator's cuzk daemon already times what a profile needs (simgpu.calibrate.cuzklog
reads it; docs/log-format.md maps each of its fields to simgpu's stages).  From one log:

* each stage's time and its noise: synthesis from the TIMELINE intervals, prep,
  b_g2_msm and the GPU part under the mutex from the CUZK_TIMING durations, the
  epilogue from what the GPU call leaves over;
* the contention laws: a stage's time against what else ran beside it, under the law
  the base profile shares each resource by (proportional, or conserved with its
  thrashing past a knee; each GPU's copies drawing on host memory through the link).
  Each sample's life is cut where the jobs beside it start and end (their demands are
  the base's), and in each piece its speed is what the model's own evaluator
  (simgpu.model.contention: resource_factor, job_stretch) gives for those jobs and the
  stages' bounds; the bounds are those under which the work the samples imply is most
  alike, for all stages at once (under the conserved law a stage's bound sets what its
  jobs draw, so what every other stage beside them sees).  A bound is fitted only where
  the log can pin it (enough samples, a resource oversubscribed beside them, a small
  standard error); otherwise it is not identifiable and the base's stays;
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
from collections.abc import Iterable
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
from simgpu.calibrate.refit import inline_laws
from simgpu.config import PipelineConfig, Workload, load_toml, read_config_table
from simgpu.errors import UserError
from simgpu.model import hostmem
from simgpu.model.contention import Thrash, free_fraction, job_stretch, resource_factor
from simgpu.profile import Law, PointsLaw, Profile, find_profile, load_profile, profile_from_dict
from simgpu.profile.schema import BURSTY_RESOURCES, SCALING_RESOURCES, uses_at
from simgpu.profile.tomlwrite import Inline, dumps

#: Fewest samples a stage's time and noise are fitted from.
MIN_SAMPLES = 3
#: Fewest samples, and least spread of a resource's oversubscription across them, that a
#: contention bound is fitted from; below either the bound is not identifiable (the spread
#: under the proportional law only: see stage_data).
MIN_CONTENTION_SAMPLES = 8
MIN_SPREAD = 0.05
#: The host resources whose bounds a log can fit (the interpreter lock and the driver's
#: result channel are simgpu's own prover's: kept from the base).
FITTED_RESOURCES = ("membw", "cores")
#: Host terms a fit may add to the GPU part under the mutex where its base has none: it
#: is driven by a host thread (a core) and streams its bases from host memory (the data
#: sheet, docs/data/cuzk-rtx5070ti.md: GPU stages slow when synthesis saturates DDR).
#: Its own bandwidth demand is not in a log, so it is 0: the term slows the kernels, it
#: does not load the others.  A term is offered only where no phase of the GPU part
#: reaches the resource already (the seed's kernels reach host memory through the link: a
#: second path would count it twice).
CANDIDATES: dict[str, float] = {"cores": 1.0, "membw": 0.0}
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

    stage: str  # a simgpu stage, or "held": the GPU part under the mutex (JOB_STAGES)
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


def brackets(log: CuzkLog, pinned: Iterable[tuple[int, float]] = ()) -> list[tuple[float, float, float]]:
    """Where each CUZK_TIMING sample was printed (ms): (the offset of the TIMELINE line
    before it, of the one after it, and its place between them).  Such a line carries no
    time, so it is placed between the TIMELINE lines around it, in proportion to its
    position among the lines between them.  `pinned` adds (line position, ms) of lines
    whose time is known otherwise (the mutex's: when its hold began, and its length) to
    the clock."""
    clock = sorted([*log.clock, *pinned])
    positions = [p for p, _ in clock]
    offsets: list[float] = []
    for _, off in clock:  # cuzk's lines can be a millisecond out of order
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
    pinned: list[tuple[int, float]] = []  # (line position, ms) of the lock and release lines, now known
    for s, (before, after, at) in zip(log.samples, brackets(log), strict=True):
        v = s.values
        t = at * QUANTUM
        if s.kind == "held":
            d = _dur(v["mutex_held_ms"])
            start = holds.pop(0)
            if start is None:
                start = t - d
            stages["held"].append(Job("held", d, start, start + d, QUANTUM**2 / 12))
            pinned.append((s.position, (start + d) / QUANTUM))
        elif s.kind == "lock":
            waits.append(_wait(v["mutex_wait_ms"]))
            pre_lock.append(_wait(v["pre_lock_cpu_ms"]))
            holds.append(acquired.at(s.line, v["pre_lock_cpu_ms"], v["mutex_wait_ms"], before, after))
            if holds[-1] is not None:
                pinned.append((s.position, holds[-1] / QUANTUM))
        elif s.kind == "ntt_msm_h":
            phases["ntt_msm_h"].append(_dur(v["ntt_msm_h_ms"]))
        elif s.kind == "batch_add":
            phases["batch_add"].append(_dur(v["batch_add_ms"]))
        elif s.kind == "tail":
            phases["tail_msm"].append(_dur(v["tail_msm_ms"]))
            gpu_total.append(_dur(v["gpu_total_ms"]))
    # prep and b_g2_msm lines are placed on the clock the mutex's lines pin as well: between
    # two TIMELINE lines tens of milliseconds apart, a line's place by its position alone
    # can be off by a good part of that (10 ms late on average in a log of the model at
    # 2^20), and where a sample ran decides which others it is taken to have slowed
    for s, (_, _, at) in zip(log.samples, brackets(log, pinned), strict=True):
        if s.kind in by_kind:
            stage, key = by_kind[s.kind]
            d, t = _dur(s.values[key]), at * QUANTUM
            stages[stage].append(Job(stage, d, t - d, t, QUANTUM**2 / 12))
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

#: The device resources.  A log cannot place a CUZK_TIMING sample on a device, so the others'
#: device demand counts at 1 / devices (their expected share on this job's device): on one
#: device all of it, as the model counts it.  The GPU mutex keeps one GPU part per device
#: at a time, but not what runs on the device outside it (b_g2_msm, where the prover runs
#: it there), and a loaded sample's unloaded time must come out of the law the model will
#: apply, or the model counts that load twice.  What a link carries loads host memory too
#: (Sharing.through).
DEVICE = ("gpu", "h2d")


@dataclass(frozen=True)
class Sharing:
    """How the base profile shares each resource, as the model's fluid share does:
    simgpu.model.sim builds its FluidShare from the profile with the same
    simgpu.model.hostmem functions (a device's resources named here by the resource)."""

    capacity: dict[str, float]
    conserved: frozenset[str]  # shared by the conserved law; the others by the proportional
    thrash: dict[str, Thrash]  # efficiency lost past a knee
    through: dict[str, str]  # a link -> the resource its bytes also cross (h2d -> membw)
    bursty: frozenset[str]  # lock-like, shared burst by burst
    devices: int = 1  # the others' device demand loads a job's device at 1 / devices

    def law(self, r: str) -> str:
        """The law a bound on `r` is fitted under, in words."""
        words = "conserved law" if r in self.conserved else "proportional law"
        t = self.thrash.get(r)
        if t is not None:
            words += f", thrashing past {t.knee:g} x capacity, loss {t.loss:g}"
        return words

    def describe(self) -> str:
        """Every fitted resource's law, and the links in series, in words."""
        laws = [f"{r} by the {self.law(r)}" for r in FITTED_RESOURCES]
        links = [f"each device's {a} draws on {b}" for a, b in self.through.items()]
        return "; ".join(laws + links)


def sharing(prof: Profile, cores: float, devices: int = 1) -> Sharing:
    """The base's sharing, with the log's cores (the synthesis pool it reports) and
    devices."""
    hw = prof.hardware

    def name(key: Any) -> str:
        return key if isinstance(key, str) else key[0]  # ("h2d", device) -> "h2d"

    capacity = {"membw": hw.membw_gbps, "cores": cores, "gil": 1.0, "driver_rx": 1.0, "pressure": cores}
    capacity |= {"gpu": 1.0, "h2d": hw.h2d_gbps}
    return Sharing(
        capacity,
        frozenset(name(k) for k in hostmem.conserved(prof, 1)),
        {name(k): t for k, t in hostmem.thrashing(prof, 1).items() if t.loss > 0},
        {name(k): v for k, v in hostmem.links(1).items()},
        frozenset(BURSTY_RESOURCES),  # as simgpu.model.sim declares them
        max(1, int(devices)),
    )


@dataclass
class Bound:
    resource: str
    bound: float
    fitted: bool
    why: str
    demand: float | None = None  # set for a term the base lacks and the fit added
    law: str = ""  # for a fitted bound, the law it was fitted under (Sharing.law)


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


#: A stage bound: (stage, resource).  The model's jobs of one stage share their uses, so
#: one number stands for every sample of the stage, whichever sample it slows or loads.
Key = tuple[str, str]


def make_room(bounds: dict[str, float]) -> dict[str, float]:
    """A phase's bounds adding up to at most 1: where host terms push them over, the device
    terms (which a log cannot see: the mutex keeps one job on the GPU) give up the
    difference.  The fit evaluates what the written profile will hold (_Doc uses this)."""
    host = sum(b for r, b in bounds.items() if r not in DEVICE)
    device = sum(b for r, b in bounds.items() if r in DEVICE)
    if host + device <= 1.0 + 1e-9 or device <= 0:
        return bounds
    scale = max(0.0, 1.0 - host) / device
    return {r: b * scale if r in DEVICE else b for r, b in bounds.items()}


@dataclass(frozen=True, eq=False)
class PhaseUse:
    """How one phase of a stage leans on shared resources, as far as a log can place it."""

    seconds: float  # unloaded, the base's at the log's size (how a sample is cut)
    uses: dict[str, tuple[float, float]]  # resource -> (demand, the base's bound)
    keys: dict[str, Key]  # resource -> the stage bound it takes (what a fit writes); a
    # resource not here is the phase's own use, at the base's bound
    private: frozenset[str] = frozenset()  # candidate terms: they slow the phase, load no other

    def at(self, table: dict[Key, float]) -> tuple[tuple[str, float, float], ...]:
        """(resource, demand, bound) as the model submits the phase, with the stage bounds
        in `table`."""
        keys = self.keys
        bounds = make_room({r: table[keys[r]] if r in keys else b for r, (_, b) in self.uses.items()})
        return tuple((r, d, bounds[r]) for r, (d, _) in self.uses.items())


def phase_uses(
    prof: Profile, n: int, extra: dict[str, dict[str, tuple[float, float]]] | None = None
) -> dict[str, list[PhaseUse]]:
    """Per stage of the base, its phases' uses at size n, with `extra` (stage -> terms the
    base lacks, resource -> (demand, bound)) added to every phase of the stage.  A log
    times a stage, not its phases: each sample is cut into its phases, so that a phase
    with uses of its own (simgpu's synthesis hands its result back through the driver's
    one result thread at its end; a kernels phase streams its bases over the link) loads
    the others, and is slowed, where it runs."""
    out: dict[str, list[PhaseUse]] = {}
    for name, st in prof.stages.items():
        where = f"[stages.{name}]"
        added = (extra or {}).get(name, {})
        own = {r: (u.demand, u.bound) for r, u in uses_at(st.uses, n, where).items()} | added
        phases = []
        for ph in st.phases:
            if ph.uses is None:
                uses, keyed = own, own
            else:
                mine = uses_at(ph.uses, n, f"{where} {ph.name}")
                uses, keyed = {r: (u.demand, u.bound) for r, u in mine.items()} | added, added
            phases.append(PhaseUse(max(0.0, ph.time(n)), uses, {r: (name, r) for r in keyed}))
        out[name] = phases
    return out


#: The base stages whose phases, one after another, make up a sample of each job kind
#: (Job.stage): the GPU part under the mutex is the prestage, then the kernels.
JOB_STAGES = {"held": ("prestage", "kernels")}


def base_table(phases: dict[str, list[PhaseUse]]) -> dict[Key, float]:
    """Every stage bound the phases take, at the base's value (a bound two stages share, at
    the value of the stage it is named by)."""
    out: dict[Key, float] = {}
    for stage, ps in phases.items():
        for ph in ps:
            for r, k in ph.keys.items():
                if k not in out or k[0] == stage:
                    out[k] = ph.uses[r][1]
    return out


@dataclass
class Piece:
    """One phase of one sample, placed in its sample's interval."""

    job: int
    kind: int  # which phase of which stage: an index into Timeline.kinds
    start: float
    end: float


class Timeline:
    """The log's samples as the model's fluid share saw them.

    Each sample is cut into its stage's phases (pieces), and each piece's life at every
    start and end of the other samples' pieces beside it.  In each of those intervals what
    ran beside it is a count of pieces per kind (a phase of a stage): the model's speeds
    change only at those instants, and in between they are what its fluid share computes
    from the same jobs.  So an interval is a composition (the piece's own kind and those
    counts), and the piece's stretch there is the model's law at it
    (simgpu.model.contention: resource_factor, job_stretch), given the stage bounds."""

    def __init__(
        self, jobs: list[Job], phases: dict[str, list[PhaseUse]], sh: Sharing, table: dict[Key, float]
    ) -> None:
        self.sh, self.jobs = sh, jobs
        self.kinds: list[PhaseUse] = []
        self.layout: dict[str, list[int]] = {}  # job kind -> its phases' kinds, in order
        for name in dict.fromkeys(j.stage for j in jobs):
            kinds = []
            for stage in JOB_STAGES.get(name, (name,)):
                for ph in phases.get(stage) or [PhaseUse(0.0, {}, {})]:
                    kinds.append(len(self.kinds))
                    self.kinds.append(ph)
            self.layout[name] = kinds
        self._loads: dict[int, dict[str, float]] = {}
        self.place(table)

    def shares(self, name: str) -> list[float]:
        """A job kind's phases' shares of its unloaded time (the base's proportions)."""
        secs = [self.kinds[k].seconds for k in self.layout[name]]
        total = sum(secs)
        return [s / total if total > 0 else 1 / len(secs) for s in secs]

    def place(self, table: dict[Key, float]) -> None:
        """Cut the samples into pieces where the model would run them: a phase slowed by
        its own uses takes more of its sample's interval than its share of the work, so
        the cuts are moved until each phase's part is its share of the work times its mean
        stretch there (a few rounds settle it)."""
        splits: dict[int, list[float]] = {}
        multi = [i for i, j in enumerate(self.jobs) if len(self.layout[j.stage]) > 1]
        for rounds in range(4):
            self._cut(splits)
            if not multi or rounds == 3:
                break
            stretch = self.stretches(table)
            mean: dict[int, list[float]] = {}
            for p, (dt, comp) in zip(self.pieces, self.intervals, strict=True):
                if len(self.layout[self.jobs[p.job].stage]) > 1:
                    s = float(dt @ stretch[comp] / max(float(np.sum(dt)), 1e-12)) if len(dt) else 1.0
                    mean.setdefault(p.job, []).append(s)
            for i in multi:
                raw = [sh * x for sh, x in zip(self.shares(self.jobs[i].stage), mean[i], strict=True)]
                splits[i] = [x / sum(raw) for x in raw]

    def _cut(self, splits: dict[int, list[float]]) -> None:
        self.pieces: list[Piece] = []
        for i, j in enumerate(self.jobs):
            t, dur = j.start, max(j.end - j.start, QUANTUM / 2)
            kinds = self.layout[j.stage]
            for k, f in zip(kinds, splits.get(i) or self.shares(j.stage), strict=True):
                self.pieces.append(Piece(i, k, t, t + f * dur))
                t += f * dur
        ps = self.pieces
        s = np.array([p.start for p in ps])
        e = np.array([p.end for p in ps])
        job = np.array([p.job for p in ps])
        onehot = np.eye(len(self.kinds), dtype=np.int64)[[p.kind for p in ps]]
        rows, dts = [], []
        for i, p in enumerate(ps):
            beside = np.flatnonzero((e > s[i]) & (s < e[i]) & (job != p.job))
            cuts = np.unique(np.clip(np.concatenate(([s[i], e[i]], s[beside], e[beside])), s[i], e[i]))
            mid = (cuts[:-1] + cuts[1:]) / 2
            active = (s[beside][None, :] <= mid[:, None]) & (e[beside][None, :] > mid[:, None])
            counts = active.astype(np.int64) @ onehot[beside]
            rows.append(np.column_stack([np.full(len(mid), p.kind, dtype=np.int64), counts]))
            dts.append(np.diff(cuts))
        comps, inverse = np.unique(np.vstack(rows), axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        #: per composition: its piece's kind, and (kind, count) of what ran beside it
        self.comps = [(int(r[0]), [(k, int(c)) for k, c in enumerate(r[1:]) if c]) for r in comps]
        self.intervals: list[tuple[np.ndarray, np.ndarray]] = []
        at = 0
        for dt in dts:
            self.intervals.append((dt, inverse[at : at + len(dt)]))
            at += len(dt)
        self._loads = {}
        sh = self.sh
        reach = [
            any(r in sh.conserved or sh.through.get(r) in sh.conserved for r in ph.uses) for ph in self.kinds
        ]
        self._deps = [
            sorted(
                set(self.kinds[own].keys.values()).union(
                    *(self.kinds[k].keys.values() for k, _ in beside if reach[k])
                )
            )
            for own, beside in self.comps
        ]
        self._memo: dict[tuple, float] = {}

    def load(self, c: int) -> dict[str, float]:
        """The nominal load (what the running jobs ask at full speed) on each resource in
        composition c: its own piece's demands and, on host resources, the others' (a
        link's bytes on the resource behind it too)."""
        got = self._loads.get(c)
        if got is None:
            sh = self.sh
            got = dict.fromkeys(sh.capacity, 0.0)
            own, beside = self.comps[c]
            for kind, count, mine in [(own, 1, True)] + [(k, n, False) for k, n in beside]:
                ph = self.kinds[kind]
                for r, (d, _) in ph.uses.items():
                    if not mine and r in ph.private:
                        continue
                    got[r] += count * d if mine or r not in DEVICE else count * d / sh.devices
                    if r in sh.through:
                        got[sh.through[r]] += count * d
            self._loads[c] = got
        return got

    def stretch(self, c: int, table: dict[Key, float], resolved: list[tuple] | None = None) -> float:
        """The model's stretch of composition c's piece (unloaded time x this is its time);
        `resolved`: every kind's uses at `table` (PhaseUse.at), where the caller has them."""
        sh = self.sh
        own, beside = self.comps[c]
        if resolved is None:
            resolved = [ph.at(table) for ph in self.kinds]
        mine = resolved[own]
        # the conserved law's draws, bound -> demand, as the fluid share groups them
        draws: dict[str, dict[float, float]] = {r: {} for r in sh.conserved}

        def draw(r: str | None, d: float, b: float) -> None:
            g = draws.get(r) if r is not None else None
            if g is not None:
                g[b] = g.get(b, 0.0) + d

        for r, d, b in mine:
            draw(r, d, b)
            draw(sh.through.get(r), d, b)
        for k, count in beside:
            private = self.kinds[k].private
            for r, d, b in resolved[k]:
                if r not in private:
                    draw(None if r in DEVICE else r, count * d, b)
                    draw(sh.through.get(r), count * d, b)
        load = self.load(c)
        factor = {
            r: resource_factor(cap, load[r], draws.get(r), sh.thrash.get(r))
            for r, cap in sh.capacity.items()
            if r not in sh.bursty
        }
        free = free_fraction(mine, SCALING_RESOURCES)
        return job_stretch(free, mine, factor, load, sh.capacity, sh.bursty, sh.through, SCALING_RESOURCES)

    def stretches(self, table: dict[Key, float], comps: Iterable[int] | None = None) -> np.ndarray:
        """`stretch` of every composition (or of `comps`; the others left at 1).  A fit
        asks for the same compositions at tables that differ in one bound or a few, so each
        stretch is kept with the table values it depends on (its own kind's bounds, and
        those of the kinds beside it that reach a conserved resource: their bounds set what
        they draw there)."""
        out = np.ones(len(self.comps))
        resolved = None
        for c in range(len(self.comps)) if comps is None else comps:
            key = (c, tuple(table[k] for k in self._deps[c]))
            got = self._memo.get(key)
            if got is None:
                if resolved is None:
                    resolved = [ph.at(table) for ph in self.kinds]
                got = self._memo[key] = self.stretch(c, table, resolved)
            out[c] = got
        return out

    def oversubscription(self, c: int, r: str) -> float:
        """How far composition c's load on `r` exceeds what `r` delivers (its capacity, less
        what it loses to thrashing): 0 where it has room.  On a bursty resource, the
        others' load over its capacity (their bursts collide with the piece's whatever the
        total).  This is what a bound is identified from: the law's factor follows it."""
        sh = self.sh
        load = self.load(c)[r]
        cap = sh.capacity[r]
        if r in sh.bursty:
            own = self.kinds[self.comps[c][0]].uses.get(r, (0.0, 0.0))[0]
            return max(0.0, load - own) / cap
        t = sh.thrash.get(r)
        return max(0.0, load / (t.effective(cap, load) if t is not None else cap) - 1.0)


@dataclass
class StageData:
    """One stage's samples as the fit sees them, and which of its bounds a log can fit."""

    name: str  # as reported ("prestage+kernels" for the GPU part)
    stage: str  # whose bounds they are in the table
    own: dict[str, tuple[float, float]]  # resource -> (demand, the base's bound)
    added: dict[str, float]  # the terms the base lacks among them, resource -> demand
    dts: list[np.ndarray]  # per sample, its intervals' durations
    comps: list[np.ndarray]  # ... and their compositions (Timeline.comps)
    t: np.ndarray  # per sample, its logged seconds
    gbar: np.ndarray  # per sample x used: its time-averaged oversubscription
    used: list[str]  # its host resources
    quant_var: list[float]
    bounds: list[Bound]  # those decided: kept from the base, or not added
    groups: list[list[str]]  # those to fit: resources that share a scale

    @property
    def fixed(self) -> dict[str, float]:
        return {b.resource: b.bound for b in self.bounds}

    @property
    def room(self) -> float:
        return max(0.0, 1.0 - sum(self.fixed.values()))

    @property
    def weight(self) -> list[float]:
        """Per group, the bound one unit of its scale gives (the base's sum for a group of
        several, which keeps the base's ratio)."""
        return [max(1e-9, sum(self.own[r][1] for r in g)) if len(g) > 1 else 1.0 for g in self.groups]

    def bounds_of(self, x: np.ndarray) -> dict[str, float]:
        f = self.fixed
        for scale, grp in zip(x, self.groups, strict=True):
            for r in grp:
                f[r] = float(scale) * (self.own[r][1] if len(grp) > 1 else 1.0)
        return f

    def work(self, tl: Timeline, table: dict[Key, float]) -> np.ndarray:
        """Per sample, the unloaded work it did under `table`: the integral of dt / stretch."""
        every = np.unique(np.concatenate(self.comps))
        st = tl.stretches(table, every)
        return np.array([float(np.sum(dt / st[c])) for dt, c in zip(self.dts, self.comps, strict=True)])


def stage_data(
    name: str,
    stage: str,
    own: dict[str, tuple[float, float]],
    added: dict[str, float],
    tl: Timeline,
    members: list[int],
    quant_var: list[float],
) -> StageData:
    """One stage's samples (`members`, indices into tl.jobs) and the bounds of its own uses
    (`own`; `added` are the terms the base lacks) that a log may fit: a bound is a
    candidate only with MIN_CONTENTION_SAMPLES samples and its resource oversubscribed
    beside some of them, and, under the proportional law, at several load levels (else it
    is not identifiable and the base's stays; fit_bounds looks again at what the samples
    pin).  Resources whose loads rise and fall together share one scale."""
    sh = tl.sh
    used = [r for r in sorted(own) if r in sh.capacity and r not in DEVICE]
    dts, comps, gbar_rows = [], [], []
    for i in members:
        dt_l, c_l, g_l, m_l = [], [], [], []
        for p, (dt, comp) in zip(tl.pieces, tl.intervals, strict=True):
            if p.job != i:
                continue
            keys = tl.kinds[p.kind].keys
            dt_l.append(dt)
            c_l.append(comp)
            g_l.append(np.array([[tl.oversubscription(int(c), r) for r in used] for c in comp]))
            m_l.append(np.array([[1.0 if keys.get(r) == (stage, r) else 0.0 for r in used]] * len(dt)))
        dt = np.concatenate(dt_l)
        dts.append(dt)
        comps.append(np.concatenate(c_l))
        if not used:  # a stage on device resources only: nothing of the host to average
            gbar_rows.append(np.zeros(0))
            continue
        # the sample's time-averaged oversubscription over the phases that take the bound
        w = dt[:, None] * np.vstack([m.reshape(-1, len(used)) for m in m_l])
        g = np.vstack([x.reshape(-1, len(used)) for x in g_l])
        gbar_rows.append(np.sum(w * g, axis=0) / np.maximum(np.sum(w, axis=0), 1e-12))
    t = np.array([float(np.sum(dt)) for dt in dts])
    gbar = np.array(gbar_rows).reshape(len(t), len(used))

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
        elif spread < MIN_SPREAD and r not in sh.conserved:
            # under the proportional law a bound is seen only in its own stage's samples, so
            # they must show several load levels; under the conserved law it also sets what
            # the stage draws, so the common factor every other stage beside it sees, and
            # whether the samples pin it is the joint fit's to say (MAX_BOUND_SE)
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
    return StageData(name, stage, own, added, dts, comps, t, gbar, used, quant_var, bounds, groups)


#: A fitted bound whose standard error (from the fit's information) is above this is not
#: identifiable from the log: the samples would fit as well with it anywhere in a range
#: wider than the test tolerances, so the base's stays.
MAX_BOUND_SE = 0.1
#: A term the base lacks is added only with a bound of at least this, and two standard
#: errors: one the samples cannot tell from none would load the others for nothing.
MIN_ADDED = 0.005
#: Finite-difference step of the fit's Jacobian, in units of a group's scale.
STEP = 1e-4


class _Joint:
    """One joint fit of the stages' bound groups (scales x, laid out stage by stage)."""

    def __init__(self, data: list[StageData], tl: Timeline, table: dict[Key, float]) -> None:
        self.data, self.tl, self.table = data, tl, table
        self.layout: list[list[int]] = []
        at = 0
        for d in data:
            self.layout.append(list(range(at, at + len(d.groups))))
            at += len(d.groups)
        self.size = at
        self.top = np.array([d.room / w for d in data for w in d.weight])

    def table_of(self, x: np.ndarray) -> dict[Key, float]:
        t = dict(self.table)
        for d, idx in zip(self.data, self.layout, strict=True):
            t.update({(d.stage, r): v for r, v in d.bounds_of(x[idx]).items()})
        return t

    def logw(self, x: np.ndarray) -> list[np.ndarray]:
        """Per stage, its samples' log implied work."""
        t = self.table_of(x)
        return [np.log(np.maximum(d.work(self.tl, t), 1e-300)) for d in self.data]

    def nll(self, x: np.ndarray) -> float:
        """The negative log likelihood, each stage's noise variance at its estimate."""
        return sum(len(w) * float(np.log(np.var(w) + 1e-300)) for w in self.logw(x)) / 2

    def solve(self) -> np.ndarray:
        from scipy.optimize import minimize

        # from the base's bounds (a scale of 1 for a group that keeps the base's ratio)
        start = np.array(
            [
                min(t, d.own[g[0]][1] if len(g) == 1 else 1.0)
                for d, idx in zip(self.data, self.layout, strict=True)
                for g, t in zip(d.groups, self.top[idx], strict=True)
            ]
        )
        cons = [
            {"type": "ineq", "fun": lambda x, idx=idx, d=d: d.room - float(np.dot(x[idx], d.weight))}
            for d, idx in zip(self.data, self.layout, strict=True)
            if idx
        ]
        res = minimize(self.nll, start, method="SLSQP", bounds=[(0.0, t) for t in self.top], constraints=cons)
        return np.clip(res.x, 0.0, self.top)

    def information(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(covariance of the scales, Gauss-Newton step from x): from J^T J / variance
        summed over the stages, J how each sample's centred log work moves with each scale
        (one-sided differences, never past a bound of 1)."""
        w0 = [w - w.mean() for w in self.logw(x)]
        var = [max(float(np.mean(w**2)), 1e-300) for w in w0]
        jac = [np.zeros((len(w), self.size)) for w in w0]
        for j in range(self.size):
            h = STEP if x[j] + STEP <= self.top[j] else -STEP
            xj = x.copy()
            xj[j] += h
            for k, w1 in enumerate(self.logw(xj)):
                jac[k][:, j] = (w1 - w1.mean() - w0[k]) / h
        info = sum(jk.T @ jk / v for jk, v in zip(jac, var, strict=True))
        grad = sum(jk.T @ wk / v for jk, wk, v in zip(jac, w0, var, strict=True))
        cov = np.linalg.pinv(info)
        return cov, -cov @ grad

    def doubtful(
        self, x: np.ndarray, cov: np.ndarray, step: np.ndarray
    ) -> list[tuple[StageData, list[str], str]]:
        """The groups a log cannot fit after all, each with why."""
        out = []
        for d, idx in zip(self.data, self.layout, strict=True):
            if not idx:
                continue
            wv = np.array(d.weight)
            total = float(x[idx] @ wv)
            if d.room > 0 and total >= d.room - 1e-3:
                beyond = float(step[idx] @ wv)
                se = float(np.sqrt(max(0.0, wv @ cov[np.ix_(idx, idx)] @ wv)))
                if beyond > 2 * se:
                    why = (
                        f"the fit ran into bound 1 with the samples asking for {total + beyond:.2f} "
                        f"(+- {se:.2f}): the slowdown beside it is more than the "
                        f"{self.tl.sh.law(d.groups[0][0])} carries"
                    )
                    out += [(d, g, why) for g in d.groups]
                    continue
            for j, g, wj in zip(idx, d.groups, d.weight, strict=True):
                se = float(np.sqrt(max(0.0, cov[j, j]))) * wj
                if g[0] in d.added and x[j] * wj < max(MIN_ADDED, 2 * se):
                    why = f"it gave bound {x[j] * wj:.3f} +- {se:.3f}: not told apart from none"
                    out.append((d, g, why))
                elif se > MAX_BOUND_SE:
                    out.append((d, g, f"the samples pin it only to +- {se:.2f}: not identifiable"))
        return out


def fit_bounds(data: list[StageData], tl: Timeline, table: dict[Key, float]) -> dict[Key, float]:
    """Every stage's identifiable bounds, fitted at once; returns the table they give, and
    adds to each stage's `bounds` what was fitted or, on a second look, kept.

    A stage's samples are slowed by what runs beside them as the law carries it, and under
    the conserved law a stage's bound sets what its jobs draw, so the factor every other
    stage beside them sees: a stage alone on a resource stretches by load / capacity
    whatever its own bound, and it is the others' samples that tell its bound.  So the
    bounds maximise the likelihood of all the samples together, each stage with its own
    lognormal noise: they minimise the sum over stages of n log(variance of the log
    implied work).  Under the proportional law a bound slows its own stage only, and this
    is each stage's least variance, apart.

    Then, from the fit's information (Gauss-Newton): a bound the samples cannot pin
    (standard error over MAX_BOUND_SE) is not identifiable; a stage whose bounds reach 1
    where the likelihood would still rise beyond (by more than two standard errors) shows a
    slowdown beside it that the law cannot carry, a mechanism the base lacks.  Either is
    kept from the base, and the others are fitted again without it."""
    while True:
        joint = _Joint(data, tl, table)
        if joint.size == 0:
            return dict(table)
        x = joint.solve()
        cov, step = joint.information(x)
        drop = joint.doubtful(x, cov, step)
        if not drop:
            break
        for d, g, why in drop:
            d.groups.remove(g)
            for r in g:
                c = d.gbar[:, d.used.index(r)]
                seen = f"{len(d.t)} samples at {r} oversubscription {c.min():.2f}..{c.max():.2f}"
                if r in d.added:
                    d.bounds.append(Bound(r, 0.0, False, f"not in the base; not added: {seen}, but {why}"))
                else:
                    d.bounds.append(Bound(r, d.own[r][1], False, f"kept from the base: {seen}, but {why}"))
    out = joint.table_of(x)
    for d, idx in zip(data, joint.layout, strict=True):
        fitted = d.bounds_of(x[idx]) if idx else {}
        for j, grp in zip(idx, d.groups, strict=True):
            se = float(np.sqrt(max(0.0, cov[j, j])))
            for r in grp:
                c = d.gbar[:, d.used.index(r)]
                law = tl.sh.law(r)
                why = (
                    f"fitted under the {law}, from {len(d.t)} samples at {r} oversubscription "
                    f"{c.min():.2f}..{c.max():.2f}, +- {se * (d.own[r][1] if len(grp) > 1 else 1.0):.3f}"
                )
                if len(grp) > 1:
                    others = ", ".join(x for x in grp if x != r)
                    why += f" (with {others}: their loads rose together, so the base's ratio is kept)"
                if r in d.added:
                    b = Bound(r, fitted[r], True, why + "; added: not in the base", d.added[r], law)
                    d.bounds.append(b)
                else:
                    d.bounds.append(Bound(r, fitted[r], True, why + f"; base {d.own[r][1]:.4g}", law=law))
    return out


def finish(d: StageData, tl: Timeline, table: dict[Key, float]) -> StageFit:
    """A stage's unloaded time (the mean of its samples' implied work under the fitted
    bounds) and noise (what spread is left, less the log's rounding)."""
    w = d.work(tl, table)
    t0 = float(np.mean(w))
    quant = float(np.mean(np.array(d.quant_var) / np.maximum(d.t, QUANTUM / 2) ** 2))
    var = float(np.var(w / t0, ddof=1)) if len(w) > 1 else 0.0
    cv = float(np.sqrt(max(0.0, var - quant)))
    raw = float(np.std(d.t) / np.mean(d.t))
    order = {r: i for i, r in enumerate(d.used)}
    bounds = sorted(d.bounds, key=lambda b: order[b.resource])
    return StageFit(d.name, len(d.t), float(np.mean(d.t)), t0, min(cv, 1.9), raw, bounds)


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


#: The order the stages are fitted in (and reported).
ORDER = ("synthesis", "prep", "b_g2_msm", "held")


def fit_stages(s: Samples, prof: Profile, n: int, cores: float, devices: int = 1) -> dict[str, StageFit]:
    """Every fitted stage: synthesis, prep, b_g2_msm and the GPU part under the mutex.
    Where the GPU part gains a term the base lacks, the fit is made again with its demand
    loading the others (a core driving the GPU is a core the others do not have)."""
    sh = sharing(prof, cores, devices)
    phases = phase_uses(prof, n)
    offered = {
        r: (d, 0.0) for r, d in CANDIDATES.items() if not any(_reaches(ph, r, sh) for ph in _held(phases))
    }
    fits = _fit_pass(s, prof, n, sh, offered, private=True)
    added = {
        b.resource: (b.demand, b.bound) for b in fits["held"].bounds if b.fitted and b.demand is not None
    }
    if not added:
        return fits
    again = _fit_pass(s, prof, n, sh, added, private=False)
    kept = {b.resource for b in again["held"].bounds if b.fitted and b.demand is not None}
    # a second fit that drops the term would leave its demand unaccounted: keep the first
    return again if kept == set(added) else fits


def _held(phases: dict[str, list[PhaseUse]]) -> list[PhaseUse]:
    return [ph for stage in JOB_STAGES["held"] for ph in phases.get(stage, [])]


def _reaches(ph: PhaseUse, r: str, sh: Sharing) -> bool:
    """Whether the phase leans on `r`, directly or through a link (the kernels' copies
    reach host memory: a host-memory term on them would count those bytes twice)."""
    return any(u == r or sh.through.get(u) == r for u in ph.uses)


def _fit_pass(
    s: Samples,
    prof: Profile,
    n: int,
    sh: Sharing,
    terms: dict[str, tuple[float, float]],
    private: bool,
) -> dict[str, StageFit]:
    """One fit of every stage, the GPU part with `terms` (resource -> (demand, bound))
    that the base lacks; `private`: their demand slows the GPU part but loads no one else
    (a candidate, until a fit adds it)."""
    phases = phase_uses(prof, n, {stage: terms for stage in JOB_STAGES["held"]})
    # the GPU part is fitted as one job: the prestage takes the kernels' bound on a host
    # resource both lean on (the profile written gets it in both).  A device bound is
    # never fitted (stage_data), so each keeps its own: the prestage's small share on the
    # GPU is not the kernels' whole one
    kernels = {
        r for ph in phases["kernels"] for r, k in ph.keys.items() if k == ("kernels", r) and r not in DEVICE
    }
    phases["prestage"] = [
        PhaseUse(
            ph.seconds,
            ph.uses,
            {r: ("kernels", r) if r in kernels else k for r, k in ph.keys.items()},
            frozenset(terms) if private else frozenset(),
        )
        for ph in phases["prestage"]
    ]
    if private:
        phases["kernels"] = [
            PhaseUse(ph.seconds, ph.uses, ph.keys, frozenset(terms)) for ph in phases["kernels"]
        ]
    table = base_table(phases)
    jobs = [j for name in ORDER for j in s.stages[name]]
    tl = Timeline(jobs, phases, sh, table)
    spans, at = {}, 0
    for name in ORDER:
        spans[name] = list(range(at, at + len(s.stages[name])))
        at += len(s.stages[name])
    data = []
    for name in ORDER:
        stage = "kernels" if name == "held" else name
        own = {r: ph.uses[r] for ph in phases[stage] for r, k in ph.keys.items() if k == (stage, r)}
        data.append(
            stage_data(
                "prestage+kernels" if name == "held" else name,
                stage,
                own,
                {r: d for r, (d, _) in terms.items()} if name == "held" else {},
                tl,
                spans[name],
                [j.quant_var for j in s.stages[name]],
            )
        )
    table = fit_bounds(data, tl, table)
    return {name: finish(d, tl, table) for name, d in zip(ORDER, data, strict=True)}


class _Doc:
    """The base profile's document, rewritten with what the log fitted."""

    def __init__(self, raw: dict[str, Any], prof: Profile, n: int) -> None:
        self.doc = inline_laws(copy.deepcopy(raw))
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
        st = self.stages[stage]
        st["noise_cv"] = round(max(0.005, fit.cv), 4)
        uses = st.get("uses")
        for b in fit.bounds:
            if b.fitted and b.demand is not None:
                # a term the base lacks reaches every phase, as the fit gave it (phase_uses)
                for _, table in self._term_tables(stage):
                    table[b.resource] = Inline(demand=b.demand, bound=round(b.bound, 4))
                self.notes.append(f"{stage}: {b.resource} term added ({b.why})")
            elif b.fitted and uses is not None and b.resource in uses:
                uses[b.resource] = Inline(demand=uses[b.resource].get("demand", 1.0), bound=round(b.bound, 4))
        for where, table in self._term_tables(stage, create=False):
            self._make_room(where, table)

    def _term_tables(self, stage: str, create: bool = True) -> list[tuple[str, dict[str, Any]]]:
        """The `uses` tables a stage-level term reaches: the stage's own where a phase takes
        it (a phase with no `uses` of its own, or a stage without phases; made if `create`),
        and each phase's own."""
        st = self.stages[stage]
        phases = st.get("phases") or []
        out = []
        if not phases or any("uses" not in ph for ph in phases):
            if "uses" not in st and create:
                st["uses"] = Inline()
            if "uses" in st:
                out.append((stage, st["uses"]))
        out += [
            (f"{stage} phase {ph.get('name', i)}", ph["uses"]) for i, ph in enumerate(phases) if "uses" in ph
        ]
        return out

    def _make_room(self, where: str, uses: dict[str, Any]) -> None:
        """Bounds adding up to at most 1, as the fit evaluated them (make_room)."""
        nums = {r: float(u["bound"]) for r, u in uses.items() if _is_number(u.get("bound"))}
        for r, b in make_room(nums).items():
            if b != nums[r]:
                uses[r]["bound"] = round(b, 4)
                self.notes.append(
                    f"{where}: {r} bound lowered to {uses[r]['bound']} so that its bounds add up to 1"
                )

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
    fits = fit_stages(s, prof, n, float(st.value("cpu_cores")), int(st.value("devices")))

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
        f"how each resource is shared, under which every bound was fitted ({sharing(prof, 1.0).describe()}): "
        "the base's [contention] section, as it is",
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
        "bound_laws": {
            f"{_key(f.stage)}.{b.resource}": b.law for f in fits.values() for b in f.bounds if b.fitted
        },
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
    fitted = [f"{f.stage}.{b.resource} ({b.law})" for f in fits.values() for b in f.bounds if b.fitted]
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
        "  contention bounds fitted, each under the base's law for its resource: "
        + (", ".join(fitted) or "none")
        + ";",
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
