"""Each OOM of a run with who held the rest, and under which locks.

Like an incident report that lists, beside the car that could not park, every car in
the garage with when it came in and whether its driver held a barrier key: an `oom`
record carries the allocations live at that instant, with what each holder's task was
doing (its runtime's view, simgpu.events.with_doing); the run's lock records add, for
each holder's partition, the locks it holds at the OOM and since when, the locks it held
when it allocated, and the last lock it let go of since (`last_released`), and for the
failing partition the locks it holds (each with since when, and how long it had waited
for it).  That is the story simgpu explain tells.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from simgpu.events import Record


class _LockSpan:
    __slots__ = ("lock", "start", "end", "waited")

    def __init__(self, lock: str, start: float, waited: float) -> None:
        self.lock = lock
        self.start = start
        self.waited = waited
        self.end: float | None = None

    def held(self) -> dict[str, Any]:
        return {"lock": self.lock, "since": self.start, "waited": self.waited}


def _held_at(spans: list[_LockSpan], t: float) -> list[_LockSpan]:
    return [s for s in spans if s.start <= t and (s.end is None or s.end > t)]


def oom_events(records: list[Record]) -> list[dict[str, Any]]:
    """The run's OOM events, in the order they happened (schema in the README)."""
    spans: dict[tuple, list[_LockSpan]] = defaultdict(list)  # per (proof, partition)
    out = []
    for r in records:
        ev = r.event
        if ev == "lock_acquired":
            spans[(r.proof, r.partition)].append(
                _LockSpan(r.fields["lock"], r.t, r.fields.get("waited") or 0.0)
            )
        elif ev == "lock_released":
            for s in reversed(spans[(r.proof, r.partition)]):
                if s.lock == r.fields["lock"] and s.end is None:
                    s.end = r.t
                    break
        elif ev == "oom":
            fields = dict(r.fields)
            holders = [_with_locks(h, spans, r.t) for h in fields.pop("holders", [])]
            out.append(
                {
                    "t": r.t,
                    "worker": r.worker,
                    "proof": r.proof,
                    "partition": r.partition,
                    **fields,
                    "holders": holders,
                    "locks_held": [s.held() for s in _held_at(spans[(r.proof, r.partition)], r.t)],
                }
            )
    return out


def _with_locks(holder: dict[str, Any], spans: dict[tuple, list[_LockSpan]], t: float) -> dict[str, Any]:
    mine = (
        spans.get((holder.get("proof"), holder.get("partition")), [])
        if holder.get("proof") is not None
        else []
    )
    since = holder.get("t")
    under = [] if since is None else [s.lock for s in _held_at(mine, since)]
    released = None
    if since is not None:
        let_go = [s for s in mine if s.end is not None and since <= s.end <= t]
        if let_go:
            last = max(let_go, key=lambda s: s.end)
            released = {"lock": last.lock, "t": last.end}
    return holder | {
        "locks_held": [s.held() for s in _held_at(mine, t)],
        "allocated_under": under,
        "last_released": released,
    }
