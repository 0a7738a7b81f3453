"""Memory ledgers: who holds how many bytes of a pool (a GPU's VRAM, the host's RAM).

A ledger is plain arithmetic, with no notion of time of its own: the model's SimRuntime
and the real prover's CPU backend both book their allocations here, so "does it fit"
is decided in one place.  An allocation that does not fit raises the pool's
OutOfMemory subclass with the numbers a user needs: requested, free, capacity, and
whoever asked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from simgpu.errors import DesignError, HostRamExhausted, OutOfMemory, VramExhausted


@dataclass(eq=False)
class Allocation:
    """Bytes held in one ledger until released.  `tag` names the buffer (d_a, msm_buckets)."""

    ledger: Ledger
    nbytes: int
    tag: str
    owner: str = ""
    live: bool = True

    def release(self) -> None:
        self.ledger.release(self)


@dataclass
class Ledger:
    """Capacity, resident bytes (context, pinned SRS...) and live allocations of one pool.

    `clock` (optional) stamps every change so that `history` can draw memory over time.
    """

    pool: str
    capacity: int
    resident: int = 0
    error: type[OutOfMemory] = VramExhausted
    clock: Callable[[], float] | None = None
    used: int = field(init=False)
    peak: int = field(init=False)
    history: list[tuple[float, int]] = field(init=False, default_factory=list)
    _live: set[Allocation] = field(init=False, default_factory=set)

    def __post_init__(self) -> None:
        if self.capacity <= 0:
            raise ValueError(f"{self.pool}: capacity must be positive")
        if self.resident > self.capacity:
            raise ValueError(f"{self.pool}: resident bytes exceed capacity")
        self.used = self.resident
        self.peak = self.resident
        self._stamp()

    @property
    def free(self) -> int:
        return self.capacity - self.used

    @property
    def live(self) -> int:
        """Bytes held by allocations (excluding the resident baseline)."""
        return self.used - self.resident

    def allocations(self) -> list[Allocation]:
        return sorted(self._live, key=lambda a: -a.nbytes)

    def alloc(self, nbytes: int, tag: str, *, owner: str = "", **where: object) -> Allocation:
        """Book `nbytes` or raise the pool's OutOfMemory (nothing is booked then)."""
        nbytes = int(nbytes)
        if nbytes < 0:
            raise ValueError(f"negative allocation for {tag}")
        if nbytes > self.free:
            raise self.error(self.pool, nbytes, self.free, self.capacity, buffer=tag, **where)
        a = Allocation(self, nbytes, tag, owner)
        self._live.add(a)
        self.used += nbytes
        if self.used > self.peak:
            self.peak = self.used
        self._stamp()
        return a

    def release(self, a: Allocation) -> None:
        if not a.live or a not in self._live:
            raise DesignError(f"{self.pool}: {a.tag} released twice")
        a.live = False
        self._live.discard(a)
        self.used -= a.nbytes
        self._stamp()

    def _stamp(self) -> None:
        if self.clock is not None:
            t = self.clock()
            if self.history and self.history[-1][0] == t:
                self.history[-1] = (t, self.used)
            else:
                self.history.append((t, self.used))


def vram_ledger(device: int, capacity: int, resident: int = 0, clock=None) -> Ledger:
    return Ledger(f"gpu{device}", capacity, resident, VramExhausted, clock)


def host_ledger(capacity: int, resident: int = 0, clock=None) -> Ledger:
    return Ledger("host", capacity, resident, HostRamExhausted, clock)
