"""Locks, semaphores, queues and one-shot signals as SimPy events.

The waiting rules are simgpu.sched.fifo's; here a waiter is a SimPy event that the rule
succeeds when it is served.  Each waitable carries a `what` string: when nothing can
move, the deadlock report prints, for every stuck process, the `what` of the event it
is parked on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import simpy

from simgpu.sched.fifo import FifoLock, FifoQueue, FifoSemaphore


class Signal(simpy.Event):
    """A one-shot event whose failure is delivered to whoever waits, now or later,
    instead of crashing the simulation when nobody waits yet."""

    what = "an event"

    def fail(self, exception: BaseException) -> Signal:
        super().fail(exception)
        self.defused = True
        return self

    def settle(self, value: Any = None, error: BaseException | None = None) -> bool:
        """Succeed (or fail) unless already triggered; True if this call did.  One step by
        construction: a simulation runs one process at a time."""
        if self.triggered:
            return False
        if error is None:
            self.succeed(value)
        else:
            self.fail(error)
        return True


def _grant(ev: Signal, value: Any) -> None:
    ev.succeed(value)


class SimLock:
    """FIFO mutex.  `who()` names the calling task (label, context); `on_acquired(name,
    context, waited_seconds)` accounts and records the wait of the task that got it;
    `on_released(name)` records the release."""

    def __init__(
        self,
        env: simpy.Environment,
        name: str,
        who: Callable[[], tuple[str, dict]],
        on_acquired: Callable[[str, dict, float], None],
        on_released: Callable[[str], None],
    ) -> None:
        self.env = env
        self.name = name
        self._who = who
        self._on_acquired = on_acquired
        self._on_released = on_released
        self._fifo = FifoLock(name, _grant)

    @property
    def holder(self) -> str | None:
        return self._fifo.holder

    def acquire(self) -> Signal:
        ev = Signal(self.env)
        who, ctx = self._who()
        ev.what = self._fifo.waiting_for()
        ev.waits_on = lambda: self._fifo.holder  # for the stuck-run report
        if self._fifo.request(ev, who, (ctx, self.env.now)):
            self._on_acquired(self.name, ctx, 0.0)
        return ev

    def release(self) -> None:
        self._on_released(self.name)
        served = self._fifo.release()
        if served is not None:
            _, (ctx, since) = served
            self._on_acquired(self.name, ctx, self.env.now - since)


class SimSemaphore:
    """Weighted counting semaphore, strictly FIFO."""

    def __init__(self, env: simpy.Environment, name: str, capacity: int) -> None:
        self.env = env
        self.name = name
        self._fifo = FifoSemaphore(name, capacity, _grant)
        self.capacity = self._fifo.capacity

    @property
    def available(self) -> int:
        return self._fifo.available

    def acquire(self, amount: int = 1) -> Signal:
        ev = Signal(self.env)
        ev.what = self._fifo.waiting_for(int(amount))
        self._fifo.request(ev, amount)
        return ev

    def release(self, amount: int = 1) -> None:
        self._fifo.release(amount)


class SimQueue:
    """FIFO with an optional bound; `put` waits while full, `get` while empty."""

    def __init__(self, env: simpy.Environment, name: str, capacity: int = 0) -> None:
        self.env = env
        self.name = name
        self._fifo = FifoQueue(name, capacity, _grant)
        self.capacity = self._fifo.capacity

    def __len__(self) -> int:
        return len(self._fifo)

    def put(self, item: Any) -> Signal:
        ev = Signal(self.env)
        ev.what = self._fifo.waiting_for_room()
        self._fifo.put(ev, item)
        return ev

    def get(self) -> Signal:
        ev = Signal(self.env)
        ev.what = self._fifo.waiting_for_item()
        self._fifo.get(ev)
        return ev
