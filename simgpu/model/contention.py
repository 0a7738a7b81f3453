"""Shared resources that slow work down when oversubscribed (fluid sharing).

A job is a stage (or phase) with `work` seconds to do at full speed and, per shared
resource it leans on, a `demand` (GB/s of host memory bandwidth, cores, a whole GPU,
GB/s of host-to-device copy) and a `bound` fraction: how much of its unloaded time that
resource limits.  With load L_r (the demands of all running jobs) over capacity C_r, a
job runs at speed

    1 / ( (1 - sum_r bound_r) + sum_r bound_r * max(1, L_r / C_r) )

so a job that is 30% memory-bound stretches by 30% of the oversubscription, and two
kernels sharing one GPU each run at half speed.

A lock-like resource (the driver's interpreter lock) is held in short bursts: a job's
bursts collide with the others' at random, whether or not the demands add up to more
than the capacity, so there a job's factor is 1 + (L_r - own demand) / C_r instead.

Speeds change only when a job starts or ends; between those instants every job's
remaining work shrinks linearly, so the next completion is known exactly and one
timeout per change suffices.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field

import simpy

#: Work below this many seconds counts as finished (floating-point residue).
EPS = 1e-9


@dataclass(eq=False)
class Job:
    work: float
    uses: tuple[tuple[Hashable, float, float], ...]  # (resource, demand, bound)
    done: simpy.Event
    rate: float = 1.0
    free_frac: float = field(init=False)

    def __post_init__(self) -> None:
        self.free_frac = 1.0 - sum(b for _, _, b in self.uses)


class FluidShare:
    """Runs jobs on shared resources; `submit` returns an event that fires when done."""

    def __init__(
        self,
        env: simpy.Environment,
        capacity: Mapping[Hashable, float],
        bursty: frozenset[Hashable] = frozenset(),
    ) -> None:
        self.env = env
        self.capacity = dict(capacity)
        self.bursty = bursty  # lock-like resources, shared burst by burst
        self.load: dict[Hashable, float] = dict.fromkeys(self.capacity, 0.0)
        self.active: list[Job] = []
        self._last = 0.0
        self._token = 0

    def submit(self, work: float, uses: tuple[tuple[Hashable, float, float], ...], what: str) -> simpy.Event:
        done = self.env.event()
        done.what = what  # read by deadlock reports
        if work <= EPS:
            done.succeed()
            return done
        if not uses:
            # Leans on nothing shared: a plain timeout, no bookkeeping.
            t = self.env.timeout(work)
            t.what = what
            return t
        for res, _, _ in uses:
            if res not in self.capacity:
                raise KeyError(f"unknown resource {res!r}")
        self._advance()
        job = Job(work, uses, done)
        self.active.append(job)
        for res, demand, _ in uses:
            self.load[res] += demand
        self._reschedule()
        return done

    def _advance(self) -> None:
        now = self.env.now
        dt = now - self._last
        if dt > 0:
            for job in self.active:
                job.work -= dt * job.rate
        self._last = now

    def _reschedule(self) -> None:
        cap = self.capacity
        load = self.load
        factor = {r: (load[r] / cap[r] if load[r] > cap[r] else 1.0) for r in load}
        bursty = self.bursty
        soonest = None
        for job in self.active:
            stretch = job.free_frac
            for res, demand, bound in job.uses:
                if res in bursty:
                    stretch += bound * (1.0 + max(0.0, load[res] - demand) / cap[res])
                else:
                    stretch += bound * factor[res]
            job.rate = 1.0 / stretch
            t = job.work / job.rate
            if soonest is None or t < soonest:
                soonest = t
        self._token += 1
        if soonest is not None:
            token = self._token
            ev = self.env.timeout(max(0.0, soonest))
            ev.callbacks.append(lambda _ev, token=token: self._wake(token))

    def _wake(self, token: int) -> None:
        if token != self._token:
            return  # a later change rescheduled; this wake-up is stale
        self._advance()
        now = self.env.now
        still = []
        for job in self.active:
            # Done when the work left is residue, or when what is left could not move the
            # clock at all: far into a run (1e7 s and beyond) a float cannot hold "now plus
            # a nanosecond", and waiting for it would wake at the same instant for ever.
            if job.work <= EPS or now + job.work / job.rate <= now:
                for res, demand, _ in job.uses:
                    self.load[res] -= demand
                job.done.succeed()
            else:
                still.append(job)
        self.active = still
        for res, value in self.load.items():
            if abs(value) < 1e-9:
                self.load[res] = 0.0
        self._reschedule()
