"""`simgpu explain`: every distinct OOM cause of a run told as an engineer would, and what
bounded the run when nothing ran out.

Like a crash investigator's report, each account says who held which bytes since when,
under which lock, what the failing worker asked for, and which step let both happen,
the way the seed's engineer had to work it out by hand ("worker 0's 12 GB of pre-staged
buffers are still live when worker 1 enters compute").  It is read off the records alone:
the OOM events' holders (report.oom) and, for the closing line, the bottleneck shares
(report.bottleneck).  No rule names a design: runs that failed the same way share a
*signature* (the failing stage and buffer, the failing task's locks, and per holder its
stages, buffers, locks held, lock waited for, lock last let go of, and what it was
doing) and are told once, with a count.

Input: a `--json` document of predict or run (schema simgpu.report/1), or a `--records`
file (simgpu.records/1; report.records).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simgpu.errors import UserError, fmt_bytes
from simgpu.report.bottleneck import bottleneck, label, ranked
from simgpu.report.document import SCHEMA as REPORT_SCHEMA
from simgpu.report.records import SCHEMA as RECORDS_SCHEMA
from simgpu.report.records import read_records


@dataclass
class Run:
    """What explain needs of a run: its OOM events and its bottleneck shares."""

    source: str  # "report" or "records"
    mode: str
    design: str
    profile: str
    runs: int
    oom_events: list[dict[str, Any]]
    bottleneck: dict[str, float | None] | None


@dataclass
class Cause:
    """OOM events that failed the same way: their signature, the events, the runs."""

    signature: tuple
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def seeds(self) -> list[Any]:
        return sorted({e.get("run_seed") for e in self.events}, key=lambda s: (s is None, s))


# --------------------------------------------------------------------- input


def load(path: str | Path) -> Run:
    """A run from a --json document or a --records file; anything else is a UserError."""
    name = str(path)
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{name}: cannot be read ({e.__class__.__name__}: {e})") from None
    lines = text.splitlines()
    first = lines[0] if lines else ""
    try:
        head = json.loads(first)
    except ValueError:
        head = None
    if isinstance(head, dict) and head.get("schema") == RECORDS_SCHEMA:
        return _from_records(lines, name)
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise UserError(
            f"{name}: not JSON ({e}); explain reads a predict/run --json document or --records file"
        ) from None
    if not isinstance(doc, dict) or "schema" not in doc:
        raise UserError(
            f"{name}: not a simgpu document (no schema); explain reads predict/run --json or --records"
        )
    if doc["schema"] != REPORT_SCHEMA:
        raise UserError(
            f"{name}: a {doc['schema']} document; explain reads {REPORT_SCHEMA} (predict/run --json) or "
            f"{RECORDS_SCHEMA} (--records)"
        )
    ooms = doc.get("oom_events")
    if not isinstance(ooms, list) or any(not isinstance(o, dict) for o in ooms):
        raise UserError(f"{name}: its oom_events is not a list of events")
    for o in ooms:
        if "holders" not in o or "locks_held" not in o:
            raise UserError(
                f"{name}: its OOM events carry no holders (an older simgpu wrote it): run it again"
            )
        _check_event(o, name)
    return Run(
        "report",
        str(doc.get("mode", "")),
        str(doc.get("design", "")),
        str(doc.get("profile", "")),
        int((doc.get("oom_risk") or {}).get("runs", 1)),
        ooms,
        doc.get("bottleneck"),
    )


def _check_event(o: dict[str, Any], name: str) -> None:
    need = ("t", "kind", "pool", "stage", "buffer", "requested_bytes", "free_bytes", "capacity_bytes")
    missing = [k for k in need if k not in o]
    if missing:
        raise UserError(f"{name}: an OOM event lacks {', '.join(missing)}")
    if not isinstance(o["holders"], list) or any(
        not isinstance(h, dict) or "bytes" not in h for h in o["holders"]
    ):
        raise UserError(f"{name}: an OOM event's holders are not allocation records")


def _from_records(lines: list[str], name: str) -> Run:
    from simgpu.report.metrics import window_of
    from simgpu.report.oom import oom_events

    header, records, config = read_records(lines, name)
    ooms = [dict(o, run_seed=header.get("seed")) for o in oom_events(records)]
    window = window_of(records, float(header.get("end_time") or (records[-1].t if records else 0.0)))
    return Run(
        "records",
        str(header.get("mode", "")),
        str(header.get("design", "")),
        str(header.get("profile", "")),
        1,
        ooms,
        bottleneck(records, window, header.get("saturation"), config) if records else None,
    )


# --------------------------------------------------------------------- grouping


def _lockname(lock: str | None) -> str | None:
    """A lock without its device ("gpu0/compute" -> "compute"): one cause on any device."""
    return None if lock is None else lock.split("/", 1)[-1]


def _activity(h: dict[str, Any]) -> tuple[str, str]:
    if h.get("waits_for"):
        return ("lock", _lockname(h["waits_for"]) or "")
    doing = h.get("doing") or ""
    m = re.match(r"in stage (\S+)", doing)
    if m:
        return ("stage", m.group(1))
    return ("other", re.sub(r"\d+(\.\d+)?", "#", doing))


@dataclass
class Holder:
    """One partition's live allocations in an OOM event (its holder records together)."""

    records: list[dict[str, Any]]
    own: bool  # the failing partition's own buffers

    @property
    def first(self) -> dict[str, Any]:
        return self.records[0]

    @property
    def nbytes(self) -> int:
        return sum(h["bytes"] for h in self.records)

    @property
    def buffers(self) -> list[str]:
        return sorted({h["buffer"] for h in self.records})

    @property
    def stages(self) -> list[str]:
        return sorted({h["stage"] for h in self.records if h.get("stage")})

    @property
    def since(self) -> float | None:
        ts = [h["t"] for h in self.records if h.get("t") is not None]
        return min(ts) if ts else None

    def signature(self) -> tuple:
        h = self.first
        released = h.get("last_released") or {}
        return (
            self.own,
            tuple(self.stages),
            tuple(self.buffers),
            tuple(sorted(_lockname(x) for x in h.get("allocated_under") or [])),
            tuple(sorted(_lockname(x["lock"]) for x in h.get("locks_held") or [])),
            _lockname(released.get("lock")),
            _activity(h),
        )


def holders_of(o: dict[str, Any]) -> tuple[list[Holder], int]:
    """An event's holders per partition, the largest first, and the set-up bytes (memory
    no partition holds: keys, caches)."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    setup = 0
    for h in o.get("holders") or []:
        if h.get("proof") is None:
            setup += h["bytes"]
            continue
        groups.setdefault((h.get("worker"), h.get("proof"), h.get("partition")), []).append(h)
    mine = (o.get("proof"), o.get("partition"))
    out = [Holder(recs, (k[1], k[2]) == mine) for k, recs in groups.items()]
    out.sort(key=lambda g: (-g.nbytes, g.since if g.since is not None else 0.0))
    return out, setup


def signature(o: dict[str, Any]) -> tuple:
    """What makes two OOMs the same failure: never the design's name, nor who or when."""
    groups, _ = holders_of(o)
    return (
        o["kind"],
        o["stage"],
        o["buffer"],
        tuple(sorted(_lockname(x["lock"]) for x in o.get("locks_held") or [])),
        tuple(sorted({g.signature() for g in groups})),
    )


def causes(ooms: list[dict[str, Any]]) -> list[Cause]:
    """OOM events grouped by signature, the most frequent first (ties: the earliest)."""
    out: dict[tuple, Cause] = {}
    for o in ooms:
        sig = signature(o)
        out.setdefault(sig, Cause(sig)).events.append(o)
    return sorted(out.values(), key=lambda c: (-len(c.events), c.events[0]["t"]))


# --------------------------------------------------------------------- telling


def _t(x: float | None) -> str:
    return "?" if x is None else f"t={x:.3f} s"


def _who(h: dict[str, Any]) -> str:
    return f"worker {h['worker']}" if h.get("worker") else f"proof {h['proof']} partition {h['partition']}"


def _part(h: dict[str, Any]) -> str:
    return f"proof {h.get('proof')} partition {h.get('partition')}"


def _held_phrase(g: Holder) -> str:
    """Under which lock the holder's bytes were at the OOM, and what it was doing."""
    h = g.first
    held = [x["lock"] for x in h.get("locks_held") or []]
    released = (h.get("last_released") or {}).get("lock")
    waits = h.get("waits_for")
    doing = h.get("doing") or ""
    if held:
        phrase = f"held under {' and '.join(held)}"
    elif released and waits:
        phrase = f"held outside any lock (between {released} and {waits})"
    elif released:
        phrase = f"held outside any lock (since it let go of {released} at {_t(h['last_released']['t'])})"
    elif waits:
        phrase = f"held outside any lock (before {waits})"
    else:
        phrase = "held outside any lock"
    if doing and not waits:
        phrase += f", while it was {doing}"
    return phrase


def _buffers_phrase(g: Holder) -> str:
    stages = "/".join(g.stages) or "?"
    under = g.first.get("allocated_under") or []
    made = f"from its {stages}" + (f" under {' and '.join(under)}" if under else "")
    # a holder named by its partition (no worker) is not named twice
    part = f"{_part(g.first)}, " if g.first.get("worker") else ""
    return f"{'/'.join(g.buffers)} ({fmt_bytes(g.nbytes)}, {part}{made})"


def _step(o: dict[str, Any], g: Holder | None, own: Holder | None) -> str:
    """Which step let both the holder's bytes and the failing allocation happen."""
    worker = o.get("worker") or _part(o)
    mine = [x["lock"] for x in o.get("locks_held") or []]
    if g is None:
        size = fmt_bytes(own.nbytes) if own else "nothing"
        return (
            f"No other partition held memory on {o['pool']}: {worker}'s own {size} and what is resident "
            f"left too little for its {o['buffer']}; one partition does not fit beside the resident memory."
        )
    h = g.first
    who = h.get("worker") or _part(h)
    held = [x["lock"] for x in h.get("locks_held") or []]
    released = h.get("last_released")
    waits = h.get("waits_for")
    if held:
        theirs = " and ".join(held)
        if mine:
            return (
                f"{who} held {theirs} while {worker} held {' and '.join(mine)}: the two locks do not exclude "
                f"each other, and neither covers the other's memory."
            )
        return f"{who} held {theirs}, but {worker} allocated without taking it: nothing kept them apart."
    if released:
        kept = fmt_bytes(g.nbytes)
        text = f"{who} let go of {released['lock']} at {_t(released['t'])} still holding its {kept}"
        if waits:
            text += f" and waited for {waits}"
            took = next((x for x in o.get("locks_held") or [] if x["lock"] == waits), None)
            if took is not None:
                asked = took["since"] - (took.get("waited") or 0.0)
                text += (
                    f", which {worker} (waiting for it since {_t(asked)}) took first, at {_t(took['since'])}"
                )
            text += f"; no lock covered {who}'s buffers between {released['lock']} and {waits}."
        else:
            text += "; no lock covered its buffers after that."
        return text
    if mine:
        theirs = " and ".join(mine)
        return f"{who} allocated its buffers outside any lock, so {worker}'s {theirs} did not keep them out."
    return f"{who} and {worker} both allocated outside any lock: no lock kept the two apart."


def tell(o: dict[str, Any]) -> list[str]:
    """The account of one OOM event, as lines."""
    groups, setup = holders_of(o)
    own = next((g for g in groups if g.own), None)
    others = [g for g in groups if not g.own]
    worker = f"worker {o['worker']}" if o.get("worker") else _part(o)
    mine = [x["lock"] for x in o.get("locks_held") or []]
    where = f"in {' and '.join(mine)}" if mine else "outside any lock"
    beside = (
        f", beside {fmt_bytes(own.nbytes)} of its own ({'/'.join(own.buffers)})"
        if own
        else f", with nothing of its own on {o['pool']}"
    )
    cached = o.get("cached_bytes") or 0
    other = o["capacity_bytes"] - o["free_bytes"] - sum(g.nbytes for g in groups) - setup - cached
    rest = [f"{fmt_bytes(setup)} set-up"] if setup else []
    rest += [f"{fmt_bytes(other)} resident"] if other > 0 else []
    # free, but split around arrays still live: what the pool's layout cost
    rest += [f"{fmt_bytes(cached)} free only in split blocks"] if cached > 0 else []
    short = o["requested_bytes"] - o["free_bytes"]
    ask = (
        f"{worker} {where} asked for {fmt_bytes(o['requested_bytes'])} for {o['buffer']} "
        f"(stage {o['stage']}, {_part(o)}{beside}): {fmt_bytes(o['free_bytes'])} free of "
        f"{fmt_bytes(o['capacity_bytes'])}"
        + (f" ({', '.join(rest)})" if rest else "")
        + f", {fmt_bytes(short)} short."
    )
    lines = []
    if others:
        g = others[0]
        lines.append(
            f"{_who(g.first)}'s {_buffers_phrase(g)} were live since {_t(g.since)}, {_held_phrase(g)}, "
            f"when {ask}"
        )
        for g in others[1:4]:
            lines.append(
                f"Also live: {_who(g.first)}'s {_buffers_phrase(g)} since {_t(g.since)}, {_held_phrase(g)}."
            )
        if len(others) > 4:
            more = fmt_bytes(sum(g.nbytes for g in others[4:]))
            lines.append(f"... and {len(others) - 4} more partitions' buffers ({more}).")
    else:
        lines.append(f"{o['kind']} ran out on {o['pool']} when {ask}")
    lines.append(f"What let both happen: {_step(o, others[0] if others else None, own)}")
    if cached > 0 and o["free_bytes"] + cached >= o["requested_bytes"]:
        lines.append(
            f"It was not short of bytes: {fmt_bytes(o['free_bytes'] + cached)} were free in all, "
            f"{fmt_bytes(cached)} of it in the pool's blocks split around live arrays, where no piece "
            "was long enough.  The order the arrays came and went in decided it, as much as their sizes."
        )
    return lines


def report(run: Run) -> str:
    """The whole explanation of a run, as text."""
    what = f"{run.mode} of {run.design} on {run.profile}" if run.mode else "the run"
    n = len(run.oom_events)
    lines = []
    if not n:
        lines.append(f"No OOM in {what} ({run.runs} run(s)).")
    else:
        cs = causes(run.oom_events)
        oom_runs = len({o.get("run_seed") for o in run.oom_events})
        lines.append(
            f"{n} OOM event(s) in {oom_runs} of {run.runs} run(s) of {what}: {len(cs)} distinct cause(s)."
        )
        for i, c in enumerate(cs, start=1):
            first = c.events[0]
            seeds = ", ".join(str(s) for s in c.seeds[:8]) + (" ..." if len(c.seeds) > 8 else "")
            runs = f"1 run (seed {seeds})" if len(c.seeds) == 1 else f"{len(c.seeds)} runs (seeds {seeds})"
            lines.append("")
            lines.append(
                f"Cause {i}: {len(c.events)} OOM event(s) in {runs}; the first at {_t(first['t'])} "
                f"of run {first.get('run_seed')}:"
            )
            lines += [f"  {x}" for x in tell(first)]
    if run.bottleneck:
        lines.append("")
        lines += bottleneck_lines(run.bottleneck)
    return "\n".join(lines)


def bottleneck_lines(shares: dict[str, float | None]) -> list[str]:
    """What bounded progress, the largest shares first, and the locks' own shares."""
    top = [(k, v) for k, v in ranked(shares) if v >= 0.005][:4]
    lines = []
    if top:
        listed = ", ".join(f"{label(k)} {100 * v:.0f} %" for k, v in top)
        lines.append(f"Progress was bounded by (share of the makespan): {listed}.")
    if "host_membw" in shares and shares["host_membw"] is None:
        lines.append("Host memory bandwidth is not measured in a real run.")
    locks = [(k, v) for k, v in shares.items() if k.startswith("lock ") and v is not None]
    if locks:
        lines.append("The locks: " + ", ".join(f"{k[5:]} {100 * v:.1f} %" for k, v in locks) + ".")
    return lines


def as_json(run: Run) -> dict[str, Any]:
    """The explanation as data: per cause its count, its runs, the first event's account."""
    return {
        "schema": "simgpu.explain/1",
        "source": run.source,
        "mode": run.mode,
        "design": run.design,
        "profile": run.profile,
        "runs": run.runs,
        "oom_events": len(run.oom_events),
        "causes": [
            {
                "count": len(c.events),
                "run_seeds": c.seeds,
                "first": {k: c.events[0].get(k) for k in ("t", "run_seed", "worker", "proof", "partition")},
                "account": tell(c.events[0]),
            }
            for c in causes(run.oom_events)
        ],
        "bottleneck": run.bottleneck,
    }
