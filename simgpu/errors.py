"""The exceptions simgpu raises, shared by the model and the real prover.

Running out of memory is an event in the domain, not a crash: both runtimes raise
`VramExhausted` or `HostRamExhausted` at the `yield` where the allocation failed, and
the daemon decides what happens to the partition.  Everything a user can get wrong on
the command line or in a file is a `UserError`: the CLI prints its one line and exits 2.
"""

from __future__ import annotations

GiB = 1 << 30


def fmt_bytes(n: float) -> str:
    """Human-readable binary size: 12.0 GiB, 512.0 MiB, 96 B."""
    n = float(n)
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"


class SimgpuError(Exception):
    """Base of every error simgpu raises on purpose."""


class UserError(SimgpuError):
    """Bad input: a flag, a size, a TOML file, a design reference.  One line, exit 2."""


class OutOfMemory(SimgpuError):
    """An allocation did not fit.  Carries where it happened, by how much, and who held
    the rest: `holders`, every allocation live at that instant (worker, proof, partition,
    buffer, bytes, the stage and time it was allocated; simgpu.ledger.holder_record), the
    largest first.  A runtime adds what each holder was doing before it records the OOM.
    `cached`: of the rest, the bytes a caching pool keeps free in blocks that arrays
    still hold, which giving its wholly free blocks back could not return (a pool's
    fragmentation: simgpu.devicepool); 0 where the pool caches nothing."""

    kind = "memory"

    def __init__(
        self,
        pool: str,
        requested: int,
        free: int,
        capacity: int,
        buffer: str = "",
        stage: str = "",
        worker: str = "",
        proof: int | None = None,
        partition: int | None = None,
        holders: list[dict] | None = None,
        cached: int = 0,
    ) -> None:
        self.pool = pool
        self.requested = int(requested)
        self.free = int(free)
        self.capacity = int(capacity)
        self.buffer = buffer
        self.stage = stage
        self.worker = worker
        self.proof = proof
        self.partition = partition
        self.holders = list(holders or [])
        self.cached = int(cached)
        # Every field in args: SimPy re-creates an exception as type(e)(*e.args) when it
        # throws it into the process that waits.
        super().__init__(
            pool,
            requested,
            free,
            capacity,
            buffer,
            stage,
            worker,
            proof,
            partition,
            self.holders,
            self.cached,
        )

    def __str__(self) -> str:
        return self.describe()

    def describe(self) -> str:
        where = []
        if self.stage:
            where.append(f"stage {self.stage}")
        if self.worker:
            where.append(f"worker {self.worker}")
        if self.proof is not None:
            part = f"proof {self.proof}"
            if self.partition is not None:
                part += f" partition {self.partition}"
            where.append(part)
        what = f" for {self.buffer}" if self.buffer else ""
        loc = f" in {', '.join(where)}" if where else ""
        cached = f" ({fmt_bytes(self.cached)} more free in split blocks)" if self.cached else ""
        return (
            f"{self.kind} exhausted on {self.pool}{loc}: requested {fmt_bytes(self.requested)}"
            f"{what}, free {fmt_bytes(self.free)} of {fmt_bytes(self.capacity)}{cached}"
        )

    def as_dict(self) -> dict:
        return {
            "kind": self.kind,
            "pool": self.pool,
            "stage": self.stage,
            "worker": self.worker,
            "buffer": self.buffer,
            "proof": self.proof,
            "partition": self.partition,
            "requested_bytes": self.requested,
            "free_bytes": self.free,
            "capacity_bytes": self.capacity,
            "cached_bytes": self.cached,
            "holders": self.holders,
        }


class VramExhausted(OutOfMemory):
    """A device allocation failed (the sim ledger's cap, or CuPy's OutOfMemoryError)."""

    kind = "VRAM"


class HostRamExhausted(OutOfMemory):
    """A host allocation failed: the daemon's RSS would exceed the machine's RAM."""

    kind = "host RAM"


class DesignError(SimgpuError):
    """A design broke the runtime contract (e.g. freed a handle twice, released a lock it
    does not hold).  A bug in the design, reported with the design's name."""


class Interrupted(SimgpuError):
    """The user stopped the command (Ctrl-C) before it had anything to report."""


class RunStopped(SimgpuError):
    """The run is being stopped (Ctrl-C, or a deadlock found) while this task waited; the
    daemon fails what was in flight with this reason instead of proving on."""


class Deadlock(SimgpuError):
    """A run that cannot finish.  `kind` is "deadlock" (every live task waits and nothing
    can wake them) or "livelock" (tasks keep running but nothing progresses, or simulated
    time ran past its bound); `cause` says which.  `waiting` maps each stuck task to what
    it waits for; `cycle` is a cycle of tasks each waiting on the next, and `roots` the
    tasks at the bottom of the pile-up when there is no cycle."""

    def __init__(
        self,
        at: float,
        waiting: dict[str, str],
        cycle: list[str] | None = None,
        roots: list[str] | None = None,
        kind: str = "deadlock",
        cause: str = "",
    ) -> None:
        self.at = at
        self.waiting = dict(waiting)
        self.cycle = list(cycle or [])
        self.roots = list(roots or [])
        self.kind = kind
        self.cause = cause
        super().__init__(self.describe())

    def describe(self) -> str:
        head = f"{self.kind} at t={self.at:.3f}s"
        if self.cause:
            head += f" ({self.cause})"
        if self.cycle:
            ring = " -> ".join(f"{t} (waits for {self.waiting.get(t, '?')})" for t in self.cycle)
            return f"{head}: cycle {ring} -> {self.cycle[0]}"
        if self.roots:
            lead = "; ".join(f"{t} waits for {self.waiting.get(t, '?')}" for t in self.roots[:3])
            more = len(self.waiting) - min(3, len(self.roots))
            return f"{head}: {lead}" + (f" ({more} more tasks wait behind)" if more > 0 else "")
        return head

    def as_dict(self) -> dict:
        return {
            "at": self.at,
            "kind": self.kind,
            "cause": self.cause,
            "cycle": self.cycle,
            "roots": self.roots,
            "waiting": self.waiting,
        }
