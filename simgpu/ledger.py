"""Memory ledgers: who holds how many bytes of a pool (a GPU's VRAM, the host's RAM).

A ledger is plain arithmetic, with no notion of time of its own: the model's SimRuntime
and the real prover's CPU backend both book their allocations here, so "does it fit"
is decided in one place.  An allocation that does not fit raises the pool's
OutOfMemory subclass with the numbers a user needs: requested, free, capacity, whoever
asked, and every allocation live at that instant with its holder (like a cloakroom's
ticket stubs: whose coat, which hook, since when).

A holder is the partition an allocation was made for: its worker, proof and partition,
the stage that made it and when.  The model's interpreter says so with each `alloc`; the
real prover's devices allocate deep inside a stage, so the runtime names the holder once
per stage for the calling thread (`holder_scope`) and they read it (`current_holder`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from simgpu.errors import DesignError, HostRamExhausted, OutOfMemory, VramExhausted

_scope = threading.local()


@contextlib.contextmanager
def holder_scope(clock: Callable[[], float] | None = None, **holder: Any) -> Iterator[None]:
    """Within the block, allocations made on this thread without saying for whom are
    booked for `holder` (stage, worker, proof, partition), stamped with `clock()`."""
    previous = getattr(_scope, "holder", None)
    _scope.holder = (holder, clock)
    try:
        yield
    finally:
        _scope.holder = previous


def current_holder() -> dict[str, Any]:
    """The holder this thread allocates for (with `t`, the time now), or {} outside any
    `holder_scope` (set-up work: keys, warm-up, caches)."""
    scope = getattr(_scope, "holder", None)
    if scope is None:
        return {}
    holder, clock = scope
    out = dict(holder)
    if clock is not None:
        out["t"] = clock()
    return out


def largest_first(holders: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Holder records in the order reports list them: the largest first, then the oldest."""
    return sorted(holders, key=lambda h: (-h["bytes"], h["t"] if h["t"] is not None else -1.0, h["buffer"]))


def holder_record(buffer: str, nbytes: int, holder: dict[str, Any]) -> dict[str, Any]:
    """One live allocation as OOM reports carry it (the same keys from every pool)."""
    return {
        "worker": holder.get("worker") or "",
        "proof": holder.get("proof"),
        "partition": holder.get("partition"),
        "buffer": buffer,
        "bytes": int(nbytes),
        "stage": holder.get("stage") or "",
        "t": holder.get("t"),
    }


@dataclass(eq=False, slots=True)
class Allocation:
    """Bytes held in one ledger until released.  `tag` names the buffer (d_a, msm_buckets);
    the holder is the partition it was made for (worker, proof, partition), by which
    stage and when (`t`, the ledger's clock or the holder scope's)."""

    ledger: Ledger
    nbytes: int
    tag: str
    owner: str = ""
    live: bool = True
    stage: str = ""
    worker: str = ""
    proof: int | None = None
    partition: int | None = None
    t: float | None = None
    chunk: Any = None  # its places (chunks) in the ledger's device pool, where it has one

    def release(self) -> None:
        self.ledger.release(self)

    def holder(self) -> dict[str, Any]:
        return holder_record(
            self.tag,
            self.nbytes,
            {
                "worker": self.worker,
                "proof": self.proof,
                "partition": self.partition,
                "stage": self.stage,
                "t": self.t,
            },
        )


@dataclass
class Ledger:
    """Capacity, resident bytes (context, pinned SRS...) and live allocations of one pool.

    `clock` (optional) stamps every change so that `history` can draw memory over time.
    `allocator` (optional): a caching pool (simgpu.devicepool) that decides what
    fits and what is free, its cached bytes counted against the capacity; `used`, the
    peak and the history stay the bytes allocations hold.
    `watch` (optional): called with every allocation booked, as it is booked (the
    model's side of an allocation trace: experiments/alloc_order.py --model).
    """

    pool: str
    capacity: int
    resident: int = 0
    error: type[OutOfMemory] = VramExhausted
    clock: Callable[[], float] | None = None
    allocator: Any = None
    watch: Callable[[Allocation], None] | None = None
    used: int = field(init=False)
    peak: int = field(init=False)
    history: list[tuple[float, int]] = field(init=False, default_factory=list)
    # in allocation order (a dict, not a set): reports list ties the same way every run
    _live: dict[Allocation, None] = field(init=False, default_factory=dict)

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
        if self.allocator is not None:
            return max(0, self.capacity - self.resident - self.allocator.reserved)
        return self.capacity - self.used

    @property
    def live(self) -> int:
        """Bytes held by allocations (excluding the resident baseline)."""
        return self.used - self.resident

    def allocations(self) -> list[Allocation]:
        return sorted(self._live, key=lambda a: -a.nbytes)

    def holders(self) -> list[dict[str, Any]]:
        """Every live allocation with its holder, the largest first (ties: the oldest)."""
        return largest_first([a.holder() for a in self._live])

    def alloc(
        self,
        nbytes: int,
        tag: str,
        *,
        owner: str = "",
        parts: tuple[float, ...] = (),
        whole: bool = False,
        **where: Any,
    ) -> Allocation:
        """Book `nbytes` for the holder in `where` (stage, worker, proof, partition; by
        default this thread's `holder_scope`) or raise the pool's OutOfMemory, naming who
        holds what (nothing is booked then).  `parts`: the fractions the bytes come in as
        separate arrays, for the device pool (one array when empty); the ledger counts the
        whole.  `whole`: the arrays are one repeatable call's, retried together after a
        refusal (simgpu.devicepool.CachingPool.malloc_parts)."""
        nbytes = int(nbytes)
        if nbytes < 0:
            raise ValueError(f"negative allocation for {tag}")
        if not where:
            where = current_holder()
        t = where.pop("t", None)
        if self.allocator is not None:
            chunk, reached = self.allocator.malloc_parts(nbytes, parts, whole=whole)
            short = chunk is None
            if short and self.used + reached > self.peak:
                self.peak = self.used + reached  # its first arrays were live before one failed
        else:
            chunk, short = None, nbytes > self.free
        if short:
            cached = self.allocator.cached if self.allocator is not None else 0
            raise self.error(
                self.pool,
                nbytes,
                self.free,
                self.capacity,
                buffer=tag,
                holders=self.holders(),
                cached=cached,
                **where,
            )
        clock = self.clock
        if clock is not None:
            t = clock()
        a = Allocation(
            self,
            nbytes,
            tag,
            owner,
            True,
            where.get("stage", ""),
            where.get("worker", ""),
            where.get("proof"),
            where.get("partition"),
            t,
            chunk,
        )
        self._live[a] = None
        self.used += nbytes
        if self.used > self.peak:
            self.peak = self.used
        if clock is not None:
            self._stamp(t)
        if self.watch is not None:
            self.watch(a)
        return a

    def release(self, a: Allocation) -> None:
        if not a.live or a not in self._live:
            raise DesignError(f"{self.pool}: {a.tag} released twice")
        a.live = False
        del self._live[a]
        self.used -= a.nbytes
        if a.chunk is not None:
            self.allocator.free_parts(a.chunk)
        self._stamp()

    def _stamp(self, t: float | None = None) -> None:
        if self.clock is not None:
            if t is None:
                t = self.clock()
            if self.history and self.history[-1][0] == t:
                self.history[-1] = (t, self.used)
            else:
                self.history.append((t, self.used))


def vram_ledger(
    device: int,
    capacity: int,
    resident: int = 0,
    clock: Callable[[], float] | None = None,
    allocator: Any = None,
) -> Ledger:
    """The VRAM ledger of GPU `device` (pool "gpu<device>"), raising VramExhausted when an
    allocation does not fit."""
    return Ledger(f"gpu{device}", capacity, resident, VramExhausted, clock, allocator)


def host_ledger(capacity: int, resident: int = 0, clock: Callable[[], float] | None = None) -> Ledger:
    """The ledger of the host's RAM (pool "host"), raising HostRamExhausted when an allocation
    does not fit."""
    return Ledger("host", capacity, resident, HostRamExhausted, clock)
