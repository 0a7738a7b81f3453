"""The log as jobs: each stage's samples, with when they ran.

Like a stopwatch log turned into a timetable: cuzk's TIMELINE events and CUZK_TIMING
durations (simgpu.cuzklog) become `Job`s, one per timed stage of a partition,
with its start and end on the daemon's clock; the GPU part under the mutex is placed
by what the mutex's acquisitions say (`brackets`).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

from simgpu.cuzklog import PHASE_FIELDS, CuzkLog
from simgpu.errors import UserError

#: Fewest samples a stage's time and noise are fitted from.
MIN_SAMPLES = 3
#: The log's resolution: cuzk truncates to whole milliseconds.
QUANTUM = 1e-3


def _dur(ms: int) -> float:
    """Seconds from a truncated whole-millisecond duration: the middle of its millisecond."""
    return (ms + 0.5) * QUANTUM


def _wait(ms: int) -> float:
    """Seconds from a truncated lock wait: 0 stays 0 (a free mutex costs microseconds, and
    most waits are that), else the middle of its millisecond."""
    return 0.0 if ms == 0 else _dur(ms)


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
