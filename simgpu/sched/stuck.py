"""Why a run is stuck: the cycle of waits, or the waiters at the root of the pile-up.

When nothing can move, every live task waits for something.  Like tracing a traffic jam
back to the stalled car, a wait on a lock points at the task holding it and a join at
the task joined; following those pointers either closes a cycle (a deadlock proper: each
task holds what the next one wants) or ends at root waiters, tasks waiting on something
no stuck task holds (an event nobody will trigger, an empty queue).  The report leads
with that, not with every task parked behind it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Wait:
    """One stuck task: what it waits for, and the task it waits on if that is known."""

    task: str
    what: str
    on: str | None = None


def diagnose(waits: list[Wait]) -> tuple[list[str], list[str]]:
    """(cycle, roots): a cycle of tasks each waiting on the next (empty if none), and the
    tasks whose wait leads to no other stuck task (empty when there is a cycle)."""
    by_task = {w.task: w for w in waits}
    for start in sorted(by_task):
        path: list[str] = []
        seen: set[str] = set()
        task: str | None = start
        while task is not None and task in by_task and task not in seen:
            seen.add(task)
            path.append(task)
            task = by_task[task].on
        if task is not None and task in seen:
            return path[path.index(task) :], []
    roots = sorted(w.task for w in waits if w.on is None or w.on not in by_task)
    return [], roots
