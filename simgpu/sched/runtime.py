"""The runtime protocol: what scheduler code may ask of whoever drives it.

Designs and the daemon are generator functions.  They receive a runtime and ``yield``
what they wait for; the runtime performs it and sends back the result, or throws the
error in at that ``yield``:

    yield lock.acquire()              # blocks until held
    x = yield queue.get()             # blocks until an item is there
    yield queue.put(x)                # blocks while the queue is full (backpressure)
    yield budget.acquire(nbytes)      # counting semaphore (weighted)
    out = yield rt.stage("kernels", part, device, buffers=h)   # runs a stage
    value = yield task                # joins a spawned task, re-raising its error
    yield event                       # waits for someone to succeed()/fail() it
    yield rt.sleep(seconds)

Two runtimes implement it: ``simgpu.model.SimRuntime`` (SimPy events; stage durations
and footprints from a Profile) and ``simgpu.real.RealRuntime`` (threads; stages call the
real prover).  Scheduler code never imports simpy, threading or cupy, and never asks
which runtime it runs on.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Protocol, TypeAlias

#: What a scheduler generator is: it yields waitables and returns a value.
Proc: TypeAlias = Generator[Any, Any, Any]


class Waitable(Protocol):
    """Anything scheduler code may ``yield``.  Opaque: only the runtime looks inside."""


class Lock(Protocol):
    """A mutex named per device (e.g. the 'compute' lock of gpu0).  FIFO: waiters get it
    in the order they asked, in both runtimes."""

    name: str

    def acquire(self) -> Waitable: ...

    def release(self) -> None: ...


class Semaphore(Protocol):
    """A counting semaphore; ``acquire(k)`` takes k units (bytes of a VRAM reservation,
    a slot of a worker pool) and waits, FIFO, until they are free."""

    name: str
    capacity: int

    def acquire(self, amount: int = 1) -> Waitable: ...

    def release(self, amount: int = 1) -> None: ...


class Queue(Protocol):
    """A FIFO with an optional bound (0 = unbounded); ``put`` blocks while full."""

    name: str

    def put(self, item: Any) -> Waitable: ...

    def get(self) -> Waitable: ...

    def __len__(self) -> int: ...


class Event(Protocol):
    """A one-shot signal carrying a value or an error."""

    def succeed(self, value: Any = None) -> None: ...

    def fail(self, error: BaseException) -> None: ...

    def settle(self, value: Any = None, error: BaseException | None = None) -> bool:
        """Succeed with `value` (or fail with `error`) unless already triggered, in one
        step (two threads may race to end a partition): True if this call settled it."""
        ...

    @property
    def triggered(self) -> bool: ...


class Task(Protocol):
    """A spawned process; yielding it joins it."""

    name: str


class Handle(Protocol):
    """Buffers a stage left behind (on the device, or in host RAM) until freed."""

    def nbytes(self) -> int: ...


class Runtime(Protocol):
    """What scheduler code can ask for.  See the module docstring for the semantics."""

    def now(self) -> float: ...

    def spawn(self, proc: Proc, name: str, **context: Any) -> Task: ...

    def lock(self, name: str, device: int) -> Lock: ...

    def semaphore(self, name: str, capacity: int, device: int | None = None) -> Semaphore: ...

    def queue(self, name: str, capacity: int = 0) -> Queue: ...

    def event(self) -> Event: ...

    def sleep(self, seconds: float) -> Waitable: ...

    def stage(self, name: str, part: Any, device: int | None, **inputs: Any) -> Waitable: ...

    def free(self, handle: Handle | None) -> None: ...

    def vram_capacity(self, device: int) -> int:
        """Bytes a design may plan with on the device: capacity minus resident bytes."""
        ...

    def vram_free(self, device: int) -> int: ...

    def vram_estimate(self, part: Any, *stages: str) -> int:
        """Peak device bytes `part` needs running `stages` in order (from the profile's
        footprints in the model, from the kernels' memory functions for real)."""
        ...

    def host_budget(self) -> int:
        """The daemon's host-memory budget for partition working sets, in bytes."""
        ...

    def partition_estimate(self, part: Any) -> int:
        """What the daemon reserves from the host budget per partition (cuzk's estimate)."""
        ...

    def partition_release_at_gpu_start(self, part: Any) -> int:
        """Of that reservation, what goes back when the partition's GPU work starts (cuzk
        releases its a, b, c share then, the rest when the partition ends)."""
        ...

    def set_context(self, **context: Any) -> None:
        """Tag the calling task's later records (e.g. the partition a worker is on)."""
        ...

    def record(self, event: str, **fields: Any) -> None: ...
