"""Locks, semaphores, queues and one-shot signals as SimPy events.

Each waitable carries a `what` string: when nothing can move, the deadlock report
prints, for every stuck process, the `what` of the event it is parked on.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import simpy

from simgpu.errors import DesignError


class Signal(simpy.Event):
    """A one-shot event whose failure is delivered to whoever waits, now or later,
    instead of crashing the simulation when nobody waits yet."""

    what = "an event"

    def fail(self, exception: BaseException) -> Signal:
        super().fail(exception)
        self.defused = True
        return self


class SimLock:
    """FIFO mutex.  `who()` names the calling task (label, context); `on_acquired(lock,
    waited_seconds, context)` lets the runtime account and record lock waits on behalf
    of the task that got the lock."""

    def __init__(
        self,
        env: simpy.Environment,
        name: str,
        who: Callable[[], tuple[str, dict]],
        on_acquired: Callable[[SimLock, float, dict], None],
    ) -> None:
        self.env = env
        self.name = name
        self._who = who
        self._on_acquired = on_acquired
        self.holder: str | None = None
        self._waiters: deque[tuple[Signal, str, dict, float]] = deque()

    def acquire(self) -> Signal:
        ev = Signal(self.env)
        who, ctx = self._who()
        if self.holder is None:
            self.holder = who
            self._on_acquired(self, 0.0, ctx)
            ev.succeed()
        else:
            ev.what = f"lock {self.name} (held by {self.holder})"
            self._waiters.append((ev, who, ctx, self.env.now))
        return ev

    def release(self) -> None:
        if self.holder is None:
            raise DesignError(f"lock {self.name} released while not held")
        if self._waiters:
            ev, who, ctx, since = self._waiters.popleft()
            self.holder = who
            self._on_acquired(self, self.env.now - since, ctx)
            ev.succeed()
        else:
            self.holder = None


class SimSemaphore:
    """Weighted counting semaphore, strictly FIFO (a large request at the head is not
    overtaken by small ones behind it: that is how a fair byte budget behaves)."""

    def __init__(self, env: simpy.Environment, name: str, capacity: int) -> None:
        self.env = env
        self.name = name
        self.capacity = int(capacity)
        self.available = int(capacity)
        self._waiters: deque[tuple[Signal, int]] = deque()

    def acquire(self, amount: int = 1) -> Signal:
        amount = int(amount)
        if amount > self.capacity:
            raise DesignError(f"{self.name}: asked for {amount} of a capacity of {self.capacity}")
        ev = Signal(self.env)
        if not self._waiters and amount <= self.available:
            self.available -= amount
            ev.succeed()
        else:
            ev.what = f"{self.name} ({amount} wanted, {self.available} of {self.capacity} free)"
            self._waiters.append((ev, amount))
        return ev

    def release(self, amount: int = 1) -> None:
        self.available += int(amount)
        if self.available > self.capacity:
            raise DesignError(f"{self.name}: released more than was acquired")
        while self._waiters and self._waiters[0][1] <= self.available:
            ev, want = self._waiters.popleft()
            self.available -= want
            ev.succeed()


class SimQueue:
    """FIFO with an optional bound; `put` waits while full, `get` while empty."""

    def __init__(self, env: simpy.Environment, name: str, capacity: int = 0) -> None:
        self.env = env
        self.name = name
        self.capacity = int(capacity)
        self._items: deque[Any] = deque()
        self._getters: deque[Signal] = deque()
        self._putters: deque[tuple[Signal, Any]] = deque()

    def __len__(self) -> int:
        return len(self._items)

    def _full(self) -> bool:
        return self.capacity > 0 and len(self._items) >= self.capacity

    def put(self, item: Any) -> Signal:
        ev = Signal(self.env)
        if self._getters:
            self._getters.popleft().succeed(item)
            ev.succeed()
        elif not self._full():
            self._items.append(item)
            ev.succeed()
        else:
            ev.what = f"room in queue {self.name} (full at {self.capacity})"
            self._putters.append((ev, item))
        return ev

    def get(self) -> Signal:
        ev = Signal(self.env)
        if self._items:
            ev.succeed(self._items.popleft())
            if self._putters:
                pev, item = self._putters.popleft()
                self._items.append(item)
                pev.succeed()
        else:
            ev.what = f"an item from queue {self.name}"
            self._getters.append(ev)
        return ev
