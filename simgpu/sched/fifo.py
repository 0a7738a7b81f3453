"""The waiting rules, written once: who gets a lock, semaphore units or a queue item next.

Like a deli counter's ticket roll: every request takes a ticket, and when something is
given back the rule says which tickets are served, strictly in order.  These classes
hold only that bookkeeping; a runtime supplies `grant(ticket, value)`, which wakes the
waiter its own way (SimRuntime succeeds a SimPy event; RealRuntime sets a flag and
notifies a condition).  So both runtimes serve waiters in the same order and report the
same contract violations with the same words.  Every request is served through
`grant`, at once or later, so the order in which waiters wake is the rule's alone.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from simgpu.errors import DesignError

Grant = Callable[[Any, Any], None]


class FifoLock:
    """A mutex served in the order it was asked for.  `holder` names who holds it."""

    def __init__(self, name: str, grant: Grant) -> None:
        self.name = name
        self._grant = grant
        self.holder: str | None = None
        self.waiters: deque[tuple[Any, str, Any]] = deque()  # (ticket, who, note)

    def request(self, ticket: Any, who: str, note: Any = None) -> bool:
        """Take the lock now (granted, True) or queue behind the others (False)."""
        if self.holder is None:
            self.holder = who
            self._grant(ticket, None)
            return True
        self.waiters.append((ticket, who, note))
        return False

    def release(self) -> tuple[str, Any] | None:
        """Give the lock to the next waiter (granted); returns (who, note) of that waiter."""
        if self.holder is None:
            raise DesignError(f"lock {self.name} released while not held")
        if not self.waiters:
            self.holder = None
            return None
        ticket, who, note = self.waiters.popleft()
        self.holder = who
        self._grant(ticket, None)
        return who, note

    def cancel(self, ticket: Any) -> None:
        """A waiter gave up (the run was stopped): forget its ticket."""
        self.waiters = deque(w for w in self.waiters if w[0] is not ticket)

    def waiting_for(self) -> str:
        return f"lock {self.name}" + (f" (held by {self.holder})" if self.holder else "")


class FifoSemaphore:
    """A weighted counting semaphore, strictly FIFO: a large request at the head is not
    overtaken by small ones behind it (that is how a fair byte budget behaves)."""

    def __init__(self, name: str, capacity: int, grant: Grant) -> None:
        self.name = name
        self.capacity = int(capacity)
        self.available = int(capacity)
        self._grant = grant
        self.waiters: deque[tuple[Any, int]] = deque()

    def request(self, ticket: Any, amount: int) -> bool:
        amount = int(amount)
        if amount < 0:
            raise DesignError(f"{self.name}: asked for a negative amount ({amount})")
        if amount > self.capacity:
            raise DesignError(f"{self.name}: asked for {amount} of a capacity of {self.capacity}")
        if not self.waiters and amount <= self.available:
            self.available -= amount
            self._grant(ticket, None)
            return True
        self.waiters.append((ticket, amount))
        return False

    def release(self, amount: int) -> None:
        amount = int(amount)
        if amount < 0:
            raise DesignError(f"{self.name}: released a negative amount ({amount})")
        if self.available + amount > self.capacity:
            raise DesignError(f"{self.name}: released more than was acquired")
        self.available += amount
        while self.waiters and self.waiters[0][1] <= self.available:
            ticket, want = self.waiters.popleft()
            self.available -= want
            self._grant(ticket, None)

    def cancel(self, ticket: Any) -> None:
        self.waiters = deque(w for w in self.waiters if w[0] is not ticket)

    def waiting_for(self, amount: int) -> str:
        return f"{self.name} ({amount} wanted, {self.available} of {self.capacity} free)"


class FifoQueue:
    """A FIFO with an optional bound (0 = unbounded): `put` waits while it is full, `get`
    while it is empty, each side served in order."""

    def __init__(self, name: str, capacity: int, grant: Grant) -> None:
        self.name = name
        self.capacity = int(capacity)
        self._grant = grant
        self.items: deque[Any] = deque()
        self.getters: deque[Any] = deque()
        self.putters: deque[tuple[Any, Any]] = deque()

    def __len__(self) -> int:
        return len(self.items)

    def _full(self) -> bool:
        return self.capacity > 0 and len(self.items) >= self.capacity

    def put(self, ticket: Any, item: Any) -> bool:
        """Put now (True: handed to a waiting getter, or queued) or wait for room (False)."""
        if self.getters:
            self._grant(self.getters.popleft(), item)
            self._grant(ticket, None)
            return True
        if not self._full() and not self.putters:
            self.items.append(item)
            self._grant(ticket, None)
            return True
        self.putters.append((ticket, item))
        return False

    def get(self, ticket: Any) -> bool:
        """The next item now (True) or when one is put (False); granted to `ticket`."""
        if self.items:
            self._grant(ticket, self.items.popleft())
            if self.putters:  # the room just made goes to the first putter waiting
                pticket, pitem = self.putters.popleft()
                self.items.append(pitem)
                self._grant(pticket, None)
            return True
        self.getters.append(ticket)
        return False

    def cancel(self, ticket: Any) -> None:
        self.getters = deque(t for t in self.getters if t is not ticket)
        self.putters = deque(p for p in self.putters if p[0] is not ticket)

    def waiting_for_room(self) -> str:
        return f"room in queue {self.name} (full at {self.capacity})"

    def waiting_for_item(self) -> str:
        return f"an item from queue {self.name}"
