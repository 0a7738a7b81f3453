"""cuzk's daemon log: its line formats, the one mapping between cuzk's stages and
simgpu's, and the reader that turns a log into checked events.

A cuzk daemon (filecoin-project/curio, extern/cuzk) writes three kinds of lines that a
profile can use (docs/log-format.md gives each format with the source file it is
printed from and the commit it was read at):

* ``TIMELINE,<offset_ms>,<event>,<job_id>,<detail>`` from cuzk-core's engine: per
  partition SYNTH_START, SYNTH_END, GPU_QUEUE, GPU_PICKUP, GPU_START and GPU_END, with
  millisecond offsets from the engine's start;
* ``CUZK_TIMING: ...`` from supraseal-c2's groth16_cuda.cu: the durations, in whole
  milliseconds, of prep, b_g2_msm, the mutex wait, the GPU phases and the mutex hold;
  they carry no job id and no time, so each is placed in time by where it stands among
  the TIMELINE lines (both go to stderr, line by line, as they happen);
* the daemon's startup lines (tracing's default format: timestamp, level, target,
  message, key=value fields) that say how it was configured.

Everything else in a log is skipped and counted.  A line that starts like one of these
kinds but does not follow its format, or a partition whose events are out of order or
missing, is a UserError naming the line and what was expected: a bad log is reported,
never guessed around.  ``simgpu run --timeline`` (simgpu.report.timeline) writes the same
lines through the templates here, so there is one definition of each format.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from simgpu.errors import UserError

#: The curio commit whose sources the formats below were read from (docs/log-format.md).
SOURCE_COMMIT = "e0294b0f948132d41e8f42f59fa949495d5fd3af"
TIMELINE_SOURCE = "extern/cuzk/cuzk-core/src/engine.rs"
TIMING_SOURCE = "extern/supraseal-c2/cuda/groth16_cuda.cu"

TIMELINE_PREFIX = "TIMELINE,"
TIMING_PREFIX = "CUZK_TIMING: "

# ------------------------------------------------------------------ the formats

#: The per-partition events in the order a partition goes through them.  cuzk's comment
#: above its timeline function also names CHAN_SEND, but nothing emits it at
#: SOURCE_COMMIT: it is read as a TIMELINE line of an unused event, and skipped.
LIFECYCLE = ("SYNTH_START", "SYNTH_END", "GPU_QUEUE", "GPU_PICKUP", "GPU_START", "GPU_END")

#: The detail field of each TIMELINE event: a partitioned job's form first, then the
#: form a monolithic job (a whole proof in one synthesis and one GPU call) writes.
#: {name} is a whole number, except {kind} (a proof kind such as porep-c2).
TIMELINE_DETAILS: dict[str, tuple[str, str]] = {
    "SYNTH_START": ("partition={partition}", "kind={kind}"),
    "SYNTH_END": ("partition={partition},synth_ms={synth_ms}", "synth_ms={synth_ms}"),
    "GPU_QUEUE": ("partition={partition}", "monolithic"),
    "GPU_PICKUP": ("worker={worker},partition={partition}", "worker={worker}"),
    "GPU_START": ("worker={worker},partition={partition}", "worker={worker}"),
    "GPU_END": ("worker={worker},partition={partition},gpu_ms={gpu_ms}", "worker={worker},gpu_ms={gpu_ms}"),
}

#: The body of each CUZK_TIMING line after "CUZK_TIMING: ", as printed by supraseal-c2
#: (printf's %ld, %zu and %d written as {name}: whole numbers).
TIMING_FORMATS: dict[str, str] = {
    "prep": "prep_msm_ms={prep_msm_ms}",
    "b_g2": "b_g2_msm_ms={b_g2_msm_ms} num_circuits={num_circuits}",
    "lock": "pre_lock_cpu_ms={pre_lock_cpu_ms} mutex_wait_ms={mutex_wait_ms}",
    "ntt_msm_h": "gpu_tid={gpu_tid} ntt_msm_h_ms={ntt_msm_h_ms}",
    "barrier": "gpu_tid={gpu_tid} barrier_wait_ms={barrier_wait_ms}",
    "batch_add": "gpu_tid={gpu_tid} batch_add_ms={batch_add_ms}",
    "tail": "gpu_tid={gpu_tid} tail_msm_ms={tail_msm_ms} gpu_total_ms={gpu_total_ms}",
    "held": "mutex_held_ms={mutex_held_ms} total_start_fn_ms={total_start_fn_ms}",
    # printed too, not used by a profile
    "split": "split_vectors_ms={split_vectors_ms} setup_to_split_ms={setup_to_split_ms}",
    "dealloc": "async_dealloc_ms={async_dealloc_ms}",
    "pool": "set pool release threshold to MAX on gpu {gpu}",
    "d_a_cache": "d_a_cache allocated {mib} MiB on gpu {gpu}",
}
#: The CUZK_TIMING kinds a profile is fitted from.
USED_TIMING = ("prep", "b_g2", "lock", "ntt_msm_h", "barrier", "batch_add", "tail", "held")

#: Startup lines (tracing events) that say how the daemon ran: message -> the fields
#: simgpu needs from it (a line lacking one is malformed; docs/log-format.md lists all
#: their fields); "partition synthesis complete" is read only where it carries
#: num_constraints (the older partition path in pipeline.rs logs it, the engine's does not).
STARTUP_USED: dict[str, tuple[str, ...]] = {
    "initializing GPU workers": ("num_gpus", "gpu_workers_per_device"),
    "starting pipeline: synthesis task + GPU workers (budget-gated)": ("synth_worker_count",),
    "memory budget initialized": ("total_budget_gib",),
    "rayon global thread pool configured": ("rayon_threads",),
    "set CUZK_GPU_THREADS for C++ groth16_pool": ("gpu_threads",),
    "GPU queue target dispatch pacer enabled": ("gpu_queue_target",),
    "partition synthesis complete": (),
}
#: Messages that mark a daemon start: a second one means two runs in one log.
STARTUP_ONCE = ("initializing GPU workers",)

# ------------------------------------------------------------------ the mapping

#: cuzk's stages -> simgpu's (the one place this mapping lives; docs/log-format.md).
#: Each simgpu stage names where a log times it.
STAGE_SOURCES: dict[str, str] = {
    "synthesis": "TIMELINE SYNTH_START .. SYNTH_END of the partition",
    "prep": "CUZK_TIMING prep_msm_ms",
    "prestage": "CUZK_TIMING mutex_held_ms - gpu_total_ms (the mutex's hold outside the GPU thread)",
    "kernels": "CUZK_TIMING gpu_total_ms, phases ntt_msm_h_ms / batch_add_ms / tail_msm_ms",
    "b_g2_msm": "CUZK_TIMING b_g2_msm_ms",
    "epilogue": "not timed by cuzk: GPU_START .. GPU_END less the parts above",
    "lock wait": "CUZK_TIMING mutex_wait_ms (the mutex around prestage + kernels)",
    "GPU queue": "TIMELINE GPU_QUEUE .. GPU_PICKUP",
}
#: cuzk's GPU phase fields -> the simgpu kernel phases they cover.  A profile's phase of
#: another name takes the part of the GPU thread's time that no field covers (barrier
#: wait, joins: the seed profile calls it "sync").
PHASE_FIELDS: dict[str, tuple[str, ...]] = {
    "ntt_msm_h": ("ntt", "h_msm"),
    # cuzk splits the L, A and B MSMs into a batch addition of the bases whose scalar is
    # 1 and a tail MSM over the rest; simgpu's prover runs whole MSMs (l_msm, a_msm,
    # b1_msm): tail MSMs in cuzk's terms, so it writes batch_add_ms=0
    "batch_add": ("batch_add",),
    "tail_msm": ("tail_msm", "l_msm", "a_msm", "b1_msm"),
}
#: The simgpu locks that stand for cuzk's GPU mutex (the one around the kernels); a
#: two-lock design's `mem` lock has no counterpart in cuzk's log.
MUTEX_LOCKS = ("gpu", "compute")


def timeline_line(offset_ms: int, event: str, job: str, detail: str) -> str:
    """One TIMELINE line, as cuzk's timeline_event prints it."""
    return f"{TIMELINE_PREFIX}{offset_ms},{event},{job},{detail}"


def timing_line(kind: str, **values: int) -> str:
    """One CUZK_TIMING line of TIMING_FORMATS[kind]."""
    return TIMING_PREFIX + TIMING_FORMATS[kind].format(**values)


def tracing_line(timestamp: str, target: str, message: str, **fields: object) -> str:
    """One INFO line in tracing-subscriber's default format (no colours)."""
    kv = "".join(f" {k}={v}" for k, v in fields.items())
    return f"{timestamp}  INFO {target}: {message}{kv}"


# ------------------------------------------------------------------ reading


def _shown(template: str) -> str:
    """A template as an error message shows it: prep_msm_ms=<prep_msm_ms>."""
    return re.sub(r"\{(\w+)\}", r"<\1>", template)


def _pattern(template: str, text_fields: tuple[str, ...] = ()) -> re.Pattern[str]:
    """A template's regex: literal text, and {name} as a whole number (or, for
    text_fields, any run of characters without a comma)."""
    out, pos = [], 0
    for m in re.finditer(r"\{(\w+)\}", template):
        out.append(re.escape(template[pos : m.start()]))
        name = m.group(1)
        out.append(f"(?P<{name}>[^,]+)" if name in text_fields else f"(?P<{name}>\\d+)")
        pos = m.end()
    out.append(re.escape(template[pos:]))
    return re.compile("".join(out))


_DETAIL_RE = {ev: tuple(_pattern(f, ("kind",)) for f in forms) for ev, forms in TIMELINE_DETAILS.items()}
_TIMING_RE = {kind: _pattern(f) for kind, f in TIMING_FORMATS.items()}
#: The fields of the used CUZK_TIMING kinds: a line that has one but does not follow its
#: kind's format is malformed (a CUZK_TIMING line of an unknown kind is skipped).
_USED_KEYS = {key: kind for kind in USED_TIMING for key in re.findall(r"(\w+)=\{", TIMING_FORMATS[kind])}
_TIMELINE_RE = re.compile(r"TIMELINE,(?P<offset>\d+),(?P<event>[A-Z0-9_]+),(?P<job>[^,]+),(?P<detail>.*)")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_TRACING = re.compile(r"^\S+\s+(?:TRACE|DEBUG|INFO|WARN|ERROR)\s+(?P<rest>.*)$")
_FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\[[^\]]*\]|\S+)')


@dataclass
class TimelineEvent:
    """One TIMELINE line of a partition's lifecycle: its event, job and partition, the worker
    (from GPU_PICKUP on), and its offset from the engine's start and durations (ms)."""

    line: int
    offset_ms: int
    event: str
    job: str
    partition: int | None  # None: a monolithic job
    worker: int | None
    values: dict[str, int] = field(default_factory=dict)  # synth_ms, gpu_ms


@dataclass
class TimingSample:
    """One used CUZK_TIMING line: its kind (a key of TIMING_FORMATS) and values (ms)."""

    line: int
    kind: str
    values: dict[str, int]
    position: int  # index among all lines read, for placing it in time


@dataclass
class StartupFact:
    """One used startup line (a message of STARTUP_USED) and its key=value fields, as text."""

    line: int
    message: str
    fields: dict[str, str]


@dataclass
class PartitionLife:
    """One partition of one job: the line of each of its events, and its times (ms)."""

    job: str
    index: int
    events: dict[str, TimelineEvent] = field(default_factory=dict)

    def at(self, event: str) -> int:
        return self.events[event].offset_ms

    @property
    def worker(self) -> int:
        return self.events["GPU_START"].worker  # type: ignore[return-value]


@dataclass
class CuzkLog:
    """A log read and checked: per partition its lifecycle, the CUZK_TIMING samples in log
    order, the startup facts, and what was skipped."""

    path: str
    lines: int
    partitions: dict[tuple[str, int], PartitionLife]
    samples: list[TimingSample]
    startup: list[StartupFact]
    #: TIMELINE lines in log order, as (position, offset_ms): the clock the CUZK_TIMING
    #: lines are placed against
    clock: list[tuple[int, int]]
    skipped: Counter[str] = field(default_factory=Counter)

    def samples_of(self, kind: str) -> list[TimingSample]:
        return [s for s in self.samples if s.kind == kind]

    def jobs(self) -> list[str]:
        """Job ids in the order their first event appears."""
        first: dict[str, int] = {}
        for p in self.partitions.values():
            first[p.job] = min(first.get(p.job, 1 << 62), p.events["SYNTH_START"].line)
        return sorted(first, key=first.__getitem__)

    def fact(self, message: str, key: str) -> tuple[str, int] | None:
        """(value, line) of a startup field, from the last line that has it."""
        for f in reversed(self.startup):
            if f.message == message and key in f.fields:
                return f.fields[key], f.line
        return None


class _Reader:
    def __init__(self, path: str) -> None:
        self.path = path
        self.partitions: dict[tuple[str, int], PartitionLife] = {}
        self.samples: list[TimingSample] = []
        self.startup: list[StartupFact] = []
        self.clock: list[tuple[int, int]] = []
        self.skipped: Counter[str] = Counter()
        self.open_regions: list[int] = []  # lines of mutex_wait_ms with no mutex_held_ms yet
        self.once: dict[str, int] = {}

    def fail(self, line: int, what: str) -> UserError:
        return UserError(f"{self.path}:{line}: {what}")

    # -------------------------------------------------------------- one line

    def read(self, no: int, pos: int, text: str) -> None:
        if text.startswith("TIMELINE"):
            self.timeline(no, pos, text)
        elif text.startswith("CUZK_TIMING"):
            self.timing(no, pos, text)
        else:
            self.other(no, text)

    def timeline(self, no: int, pos: int, text: str) -> None:
        m = _TIMELINE_RE.fullmatch(text)
        if m is None:
            raise self.fail(no, f"expected TIMELINE,<offset_ms>,<event>,<job_id>,<detail>, got {text!r}")
        event, job, detail = m["event"], m["job"], m["detail"]
        offset = int(m["offset"])
        self.clock.append((pos, offset))
        if event not in TIMELINE_DETAILS:
            self.skipped[f"TIMELINE {event} (not used)"] += 1
            return
        forms = _DETAIL_RE[event]
        part_m, mono_m = forms[0].fullmatch(detail), forms[1].fullmatch(detail)
        if part_m is None and mono_m is None:
            want = " or ".join(repr(_shown(f)) for f in TIMELINE_DETAILS[event])
            raise self.fail(no, f"expected a {event} detail {want}, got {detail!r}")
        if part_m is None:
            # a monolithic job (a whole batch in one call): not a partition pipeline
            self.skipped[f"TIMELINE {event} of a monolithic job (not modelled)"] += 1
            return
        g = part_m.groupdict()
        ev = TimelineEvent(
            no,
            offset,
            event,
            job,
            int(g["partition"]),
            int(g["worker"]) if "worker" in g else None,
            {k: int(v) for k, v in g.items() if k in ("synth_ms", "gpu_ms")},
        )
        self.lifecycle(ev)

    def lifecycle(self, ev: TimelineEvent) -> None:
        key = (ev.job, ev.partition)
        life = self.partitions.get(key)
        step = LIFECYCLE.index(ev.event)
        who = f"job {ev.job} partition {ev.partition}"
        if life is None:
            if step != 0:
                raise self.fail(ev.line, f"{ev.event} of {who} with no SYNTH_START before it")
            life = self.partitions[key] = PartitionLife(ev.job, ev.partition)  # type: ignore[arg-type]
        else:
            if ev.event in life.events:
                first = life.events[ev.event].line
                raise self.fail(
                    ev.line,
                    f"a second {ev.event} of {who} (the first at line {first}): one attempt per "
                    "partition is expected",
                )
            done = len(life.events)
            if step != done:
                raise self.fail(ev.line, f"{ev.event} of {who} out of order: expected {LIFECYCLE[done]} next")
            prev = life.events[LIFECYCLE[step - 1]]
            if ev.offset_ms < prev.offset_ms:
                raise self.fail(
                    ev.line,
                    f"{ev.event} of {who} at {ev.offset_ms} ms, before its {prev.event} at "
                    f"{prev.offset_ms} ms (line {prev.line})",
                )
            if ev.event in ("GPU_START", "GPU_END") and ev.worker != prev.worker:
                raise self.fail(
                    ev.line,
                    f"{ev.event} of {who} on worker {ev.worker}, but worker {prev.worker} took it "
                    f"(line {prev.line})",
                )
        life.events[ev.event] = ev

    def timing(self, no: int, pos: int, text: str) -> None:
        if not text.startswith(TIMING_PREFIX):
            raise self.fail(no, f"expected 'CUZK_TIMING: <fields>', got {text!r}")
        body = text[len(TIMING_PREFIX) :]
        for kind, rx in _TIMING_RE.items():
            m = rx.fullmatch(body)
            if m is None:
                continue
            if kind not in USED_TIMING:
                self.skipped[f"CUZK_TIMING {kind} (not used)"] += 1
                return
            values = {k: int(v) for k, v in m.groupdict().items()}
            if kind == "lock":
                self.open_regions.append(no)
            elif kind == "held":
                if not self.open_regions:
                    raise self.fail(
                        no, "mutex_held_ms with no 'pre_lock_cpu_ms=.. mutex_wait_ms=..' line before it"
                    )
                self.open_regions.pop(0)
            self.samples.append(TimingSample(no, kind, values, pos))
            return
        keys = [k for k in re.findall(r"(\w+)=", body) if k in _USED_KEYS]
        if keys:
            # gpu_tid starts four kinds' lines: the field after it says which one was meant
            kind = _USED_KEYS[next((k for k in keys if k != "gpu_tid"), keys[0])]
            raise self.fail(no, f"expected 'CUZK_TIMING: {_shown(TIMING_FORMATS[kind])}', got {text!r}")
        self.skipped["CUZK_TIMING of another kind"] += 1

    def other(self, no: int, text: str) -> None:
        plain = _ANSI.sub("", text)
        m = _TRACING.match(plain)
        if m is not None:
            rest = m["rest"]
            for message, need in STARTUP_USED.items():
                i = rest.find(message)
                if i < 0 or not rest[:i].endswith(": "):
                    continue
                tail = rest[i + len(message) :]
                if tail and not tail.startswith(" "):
                    continue
                fields = {k: v.strip('"') for k, v in _FIELD.findall(tail)}
                for key in need:
                    if not re.fullmatch(r"\d+", fields.get(key, "")):
                        raise self.fail(no, f"expected {message!r} with {key}=<whole number>, got {text!r}")
                if message == "partition synthesis complete":
                    if "num_constraints" not in fields:
                        break  # the engine's own partition path: nothing simgpu reads
                    if not re.fullmatch(r"\d+", fields["num_constraints"]):
                        raise self.fail(no, f"expected num_constraints=<whole number>, got {text!r}")
                if message in STARTUP_ONCE:
                    if message in self.once:
                        raise self.fail(
                            no,
                            f"a second daemon start ({message!r}; the first at line {self.once[message]}): "
                            "split the log into one file per run",
                        )
                    self.once[message] = no
                self.startup.append(StartupFact(no, message, fields))
                return
        self.skipped["other lines"] += 1

    # -------------------------------------------------------------- the end

    def finish(self) -> None:
        for life in sorted(self.partitions.values(), key=lambda p: p.events["SYNTH_START"].line):
            if len(life.events) < len(LIFECYCLE):
                last = life.events[LIFECYCLE[len(life.events) - 1]]
                raise self.fail(
                    last.line,
                    f"{last.event} of job {life.job} partition {life.index}, then no "
                    f"{LIFECYCLE[len(life.events)]} before the end of the log: a truncated log, or a "
                    "failed job (cut the log where the daemon was idle)",
                )
        if self.open_regions:
            raise self.fail(
                self.open_regions[0],
                "mutex_wait_ms with no mutex_held_ms after it before the end of the log: a truncated log",
            )


def read_log(path: str | Path) -> CuzkLog:
    """Read and check a daemon log (see the module docstring).  Raises UserError naming
    the first bad line."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise UserError(f"log not found: {p}") from None
    except OSError as e:
        raise UserError(f"cannot read log {p}: {e.strerror}") from None
    text = raw.decode("utf-8", errors="replace")
    reader = _Reader(str(p))
    rows = text.split("\n")
    cut = not text.endswith("\n") and rows[-1] != ""
    if not cut:
        rows = rows[:-1] if rows and rows[-1] == "" else rows
    for i, row in enumerate(rows):
        no = i + 1
        row = row.rstrip("\r")
        if cut and i == len(rows) - 1 and not _complete(row):
            # no newline at the end, and the last line is not whole: cut while being written
            raise reader.fail(no, f"the log ends in the middle of a line ({row!r}): a truncated log")
        reader.read(no, i, row)
    reader.finish()
    if not reader.partitions:
        kinds = ", ".join(f"{n} {k}" for k, n in reader.skipped.most_common()) or "nothing"
        raise UserError(
            f"{p}: no TIMELINE lines of a partitioned job (read {len(rows)} lines: {kinds}); "
            "lines must start with TIMELINE, as cuzk writes them to stderr (e.g. journalctl -o cat)"
        )
    return CuzkLog(
        str(p), len(rows), reader.partitions, reader.samples, reader.startup, reader.clock, reader.skipped
    )


def _complete(row: str) -> bool:
    """Whether a last line without its newline is whole: not the start of a TIMELINE or
    CUZK_TIMING marker, nor such a line short of its format."""
    for prefix in (TIMELINE_PREFIX, TIMING_PREFIX):
        if len(row) < len(prefix) and prefix.startswith(row):
            return False
    if row.startswith(TIMELINE_PREFIX):
        m = _TIMELINE_RE.fullmatch(row)
        forms = _DETAIL_RE.get(m["event"], ()) if m else ()
        return m is not None and (not forms or any(rx.fullmatch(m["detail"]) for rx in forms))
    if row.startswith(TIMING_PREFIX):
        return any(rx.fullmatch(row[len(TIMING_PREFIX) :]) for rx in _TIMING_RE.values())
    return True
