"""Locks, semaphores, queues, events and tasks on threads, for the RealRuntime.

Every blocking wait is a loop on a condition variable with a short timeout, so that a
run being stopped (Ctrl-C, a detected deadlock) reaches every waiter: it raises
`Cancelled` at the `yield` where the task was parked.  Each waitable says what it waits
for, which the deadlock watchdog prints.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from simgpu.errors import DesignError, SimgpuError

POLL = 0.1  # seconds between checks of the stop flag while blocked


class Cancelled(SimgpuError):
    """The run was stopped (Ctrl-C or a deadlock) while this task waited."""


class Stop:
    """The run-wide stop flag every wait polls."""

    def __init__(self) -> None:
        self.reason: str | None = None

    def set(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason

    def check(self) -> None:
        if self.reason is not None:
            raise Cancelled(self.reason)


class Waitable:
    """Something a generator yields; the driver thread calls `wait()` to block on it."""

    what = "something"
    blocking = True  # False for waits that end by themselves (a stage, a sleep)

    def wait(self) -> Any:
        raise NotImplementedError


class Done(Waitable):
    """Already satisfied: wait() returns `value` at once."""

    blocking = False

    def __init__(self, value: Any = None) -> None:
        self.value = value

    def wait(self) -> Any:
        return self.value


class _Wait(Waitable):
    """A wait for `ready()` under `cond`; `take()` runs under the lock once ready."""

    def __init__(
        self,
        cond: threading.Condition,
        stop: Stop,
        what: str,
        ready: Callable[[], bool],
        take: Callable[[], Any],
    ) -> None:
        self.cond, self.stop, self.what, self.ready, self.take = cond, stop, what, ready, take

    def wait(self) -> Any:
        with self.cond:
            while not self.ready():
                self.stop.check()
                self.cond.wait(POLL)
            return self.take()


class RealLock:
    """FIFO mutex: a ticket queue, so waiters get it in the order they asked."""

    def __init__(
        self,
        name: str,
        stop: Stop,
        on_acquired: Callable[[str, float], None],
        on_released: Callable[[str], None],
    ) -> None:
        self.name = name
        self._stop = stop
        self._cond = threading.Condition()
        self._tickets: deque[object] = deque()
        self._holder: object | None = None
        self.holder_name: str | None = None
        self._on_acquired = on_acquired
        self._on_released = on_released

    def acquire(self) -> Waitable:
        ticket = object()
        asked = time.perf_counter()
        who = threading.current_thread().name
        with self._cond:
            self._tickets.append(ticket)

        def ready() -> bool:
            return self._holder is None and self._tickets[0] is ticket

        def take() -> None:
            self._tickets.popleft()
            self._holder = ticket
            self.holder_name = who
            self._on_acquired(self.name, time.perf_counter() - asked)

        w = _Wait(self._cond, self._stop, f"lock {self.name}", ready, take)
        w.what = f"lock {self.name} (held by {self.holder_name})" if self._holder else f"lock {self.name}"
        return w

    def release(self) -> None:
        with self._cond:
            if self._holder is None:
                raise DesignError(f"lock {self.name} released while not held")
            self._on_released(self.name)
            self._holder = None
            self.holder_name = None
            self._cond.notify_all()


class RealSemaphore:
    """Weighted counting semaphore, strictly FIFO like the model's."""

    def __init__(self, name: str, capacity: int, stop: Stop) -> None:
        self.name = name
        self.capacity = int(capacity)
        self.available = int(capacity)
        self._stop = stop
        self._cond = threading.Condition()
        self._queue: deque[tuple[object, int]] = deque()

    def acquire(self, amount: int = 1) -> Waitable:
        amount = int(amount)
        if amount > self.capacity:
            raise DesignError(f"{self.name}: asked for {amount} of a capacity of {self.capacity}")
        ticket = object()
        with self._cond:
            self._queue.append((ticket, amount))

        def ready() -> bool:
            return self._queue[0][0] is ticket and self.available >= amount

        def take() -> None:
            self._queue.popleft()
            self.available -= amount
            self._cond.notify_all()

        return _Wait(self._cond, self._stop, f"{self.name} ({amount} wanted)", ready, take)

    def release(self, amount: int = 1) -> None:
        with self._cond:
            self.available += int(amount)
            if self.available > self.capacity:
                raise DesignError(f"{self.name}: released more than was acquired")
            self._cond.notify_all()


class RealQueue:
    """FIFO with an optional bound; put waits while full, get while empty."""

    def __init__(self, name: str, capacity: int, stop: Stop) -> None:
        self.name = name
        self.capacity = int(capacity)
        self._stop = stop
        self._cond = threading.Condition()
        self._items: deque[Any] = deque()
        self._putters: deque[object] = deque()

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: Any) -> Waitable:
        ticket = object()
        with self._cond:
            self._putters.append(ticket)

        def ready() -> bool:
            room = self.capacity == 0 or len(self._items) < self.capacity
            return room and self._putters[0] is ticket

        def take() -> None:
            self._putters.popleft()
            self._items.append(item)
            self._cond.notify_all()

        return _Wait(self._cond, self._stop, f"room in queue {self.name}", ready, take)

    def get(self) -> Waitable:
        def ready() -> bool:
            return bool(self._items)

        def take() -> Any:
            item = self._items.popleft()
            self._cond.notify_all()
            return item

        return _Wait(self._cond, self._stop, f"an item from queue {self.name}", ready, take)


class RealEvent(Waitable):
    """One-shot: succeed(value) or fail(error); waiting returns or raises."""

    what = "a partition to finish"

    def __init__(self, stop: Stop) -> None:
        self._stop = stop
        self._cond = threading.Condition()
        self._set = False
        self._value: Any = None
        self._error: BaseException | None = None

    @property
    def triggered(self) -> bool:
        return self._set

    def succeed(self, value: Any = None) -> None:
        with self._cond:
            if self._set:
                raise DesignError("event triggered twice")
            self._set, self._value = True, value
            self._cond.notify_all()

    def fail(self, error: BaseException) -> None:
        with self._cond:
            if self._set:
                raise DesignError("event triggered twice")
            self._set, self._error = True, error
            self._cond.notify_all()

    def wait(self) -> Any:
        with self._cond:
            while not self._set:
                self._stop.check()
                self._cond.wait(POLL)
        if self._error is not None:
            raise self._error
        return self._value


class Sleep(Waitable):
    blocking = False

    def __init__(self, seconds: float, stop: Stop) -> None:
        self.seconds = max(0.0, seconds)
        self._stop = stop
        self.what = f"a {self.seconds:.3f}s sleep"

    def wait(self) -> None:
        end = time.perf_counter() + self.seconds
        while (left := end - time.perf_counter()) > 0:
            self._stop.check()
            time.sleep(min(left, POLL))
