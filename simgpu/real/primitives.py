"""Locks, semaphores, queues, events and sleeps on threads, for the RealRuntime.

The waiting rules are simgpu.sched.fifo's; here a waiter is a `Ticket` that the rule
marks granted, and the waiting thread sleeps on the primitive's condition variable until
it is.  Every blocking wait wakes at least every POLL seconds to look at the run's stop
flag, so that a run being stopped (Ctrl-C, a detected deadlock) reaches every waiter: it
raises `Cancelled` at the `yield` where the task was parked.  Each waitable says what it
waits for, which the deadlock watchdog prints.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from simgpu.errors import DesignError, RunStopped
from simgpu.sched.fifo import FifoLock, FifoQueue, FifoSemaphore

POLL = 0.1  # seconds between checks of the stop flag while blocked


class Cancelled(RunStopped):
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


class Ticket:
    """One waiter's place in a FIFO: granted (with a value, for a queue item) or not yet."""

    __slots__ = ("granted", "value")

    def __init__(self) -> None:
        self.granted = False
        self.value: Any = None


class _TicketWait(Waitable):
    """Wait, under `cond`, until the ticket is granted; on a stop, give the place up."""

    def __init__(
        self, cond: threading.Condition, stop: Stop, what: str, ticket: Ticket, cancel: Callable[[], None]
    ) -> None:
        self.cond, self.stop, self.what, self.ticket, self._cancel = cond, stop, what, ticket, cancel

    def wait(self) -> Any:
        with self.cond:
            while not self.ticket.granted:
                if self.stop.reason is not None:
                    self._cancel()
                    self.stop.check()
                self.cond.wait(POLL)
            return self.ticket.value


class _Primitive:
    """A FIFO rule and the condition its waiters sleep on."""

    def __init__(self) -> None:
        self._cond = threading.Condition()

    def _grant(self, ticket: Ticket, value: Any) -> None:
        # Called by the FIFO rule, with _cond held.
        ticket.granted, ticket.value = True, value
        self._cond.notify_all()


class RealLock(_Primitive):
    """FIFO mutex.  `on_acquired(name, context, waited)` accounts and records the wait of
    the task that got it (in its own context, whichever thread grants it)."""

    def __init__(
        self,
        name: str,
        stop: Stop,
        context: Callable[[], dict[str, Any]],
        on_acquired: Callable[[str, dict, float], None],
        on_released: Callable[[str], None],
    ) -> None:
        super().__init__()
        self.name = name
        self._stop = stop
        self._context = context
        self._on_acquired = on_acquired
        self._on_released = on_released
        self._fifo = FifoLock(name, self._grant)

    @property
    def holder_name(self) -> str | None:
        return self._fifo.holder

    def acquire(self) -> Waitable:
        ticket = Ticket()
        ctx = self._context()
        with self._cond:
            what = self._fifo.waiting_for()
            if self._fifo.request(ticket, threading.current_thread().name, (ctx, time.perf_counter())):
                self._on_acquired(self.name, ctx, 0.0)
        wait = _TicketWait(self._cond, self._stop, what, ticket, lambda: self._fifo.cancel(ticket))
        wait.waits_on = lambda: self._fifo.holder  # for the stuck-run report
        return wait

    def release(self) -> None:
        with self._cond:
            if self._fifo.holder is not None:
                self._on_released(self.name)
            served = self._fifo.release()
            if served is not None:
                _, (ctx, asked) = served
                self._on_acquired(self.name, ctx, time.perf_counter() - asked)


class RealSemaphore(_Primitive):
    """Weighted counting semaphore, strictly FIFO like the model's."""

    def __init__(self, name: str, capacity: int, stop: Stop) -> None:
        super().__init__()
        self.name = name
        self._stop = stop
        self._fifo = FifoSemaphore(name, capacity, self._grant)
        self.capacity = self._fifo.capacity

    @property
    def available(self) -> int:
        return self._fifo.available

    def acquire(self, amount: int = 1) -> Waitable:
        ticket = Ticket()
        with self._cond:
            what = self._fifo.waiting_for(int(amount))
            self._fifo.request(ticket, amount)
        return _TicketWait(self._cond, self._stop, what, ticket, lambda: self._fifo.cancel(ticket))

    def release(self, amount: int = 1) -> None:
        with self._cond:
            self._fifo.release(amount)


class RealQueue(_Primitive):
    """FIFO with an optional bound; put waits while full, get while empty."""

    def __init__(self, name: str, capacity: int, stop: Stop) -> None:
        super().__init__()
        self.name = name
        self._stop = stop
        self._fifo = FifoQueue(name, capacity, self._grant)
        self.capacity = self._fifo.capacity

    def __len__(self) -> int:
        return len(self._fifo)

    def put(self, item: Any) -> Waitable:
        ticket = Ticket()
        with self._cond:
            self._fifo.put(ticket, item)
        what = self._fifo.waiting_for_room()
        return _TicketWait(self._cond, self._stop, what, ticket, lambda: self._fifo.cancel(ticket))

    def get(self) -> Waitable:
        ticket = Ticket()
        with self._cond:
            self._fifo.get(ticket)
        what = self._fifo.waiting_for_item()
        return _TicketWait(self._cond, self._stop, what, ticket, lambda: self._fifo.cancel(ticket))


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
        if not self.settle(value):
            raise DesignError("event triggered twice")

    def fail(self, error: BaseException) -> None:
        if not self.settle(error=error):
            raise DesignError("event triggered twice")

    def settle(self, value: Any = None, error: BaseException | None = None) -> bool:
        """Succeed (or fail) unless already triggered, under the event's lock: True if
        this call settled it (the first end of a partition wins)."""
        with self._cond:
            if self._set:
                return False
            self._set, self._value, self._error = True, value, error
            self._cond.notify_all()
        return True

    def wait(self) -> Any:
        with self._cond:
            while not self._set:
                self._stop.check()
                self._cond.wait(POLL)
        if self._error is not None:
            raise self._error
        return self._value


class Sleep(Waitable):
    """A wait of `seconds` on the calling thread that still reaches the run's stop flag."""

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
