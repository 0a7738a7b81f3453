"""Event records and run results: what both runtimes produce, so predicted and measured
runs line up and one piece of code (metrics.py) measures both.

One record per thing that happened, TIMELINE-style: time (seconds since the run
started), event name, proof, partition, device, worker, and free-form fields.

Events (fields):
    proof_submitted (partitions) / proof_completed (latency) / proof_failed (reason)
    partition_queued / partition_completed / partition_failed (reason) / partition_retry
    stage_start (stage, on) / stage_end (stage, on, seconds)
    phase_start (stage, phase) / phase_end (stage, phase)
    lock_acquired (lock, waited)  / lock_released (lock)
    oom (pool, stage, buffer, requested, free, capacity)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from simgpu.errors import Deadlock


@dataclass(slots=True)
class Record:
    t: float
    event: str
    proof: int | None = None
    partition: int | None = None
    device: int | None = None
    worker: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


#: The events whose per-partition order is fixed by the design (not by timing); the
#: sim-vs-real comparison looks at these.
PARTITION_EVENTS = (
    "stage_start",
    "stage_end",
    "lock_acquired",
    "lock_released",
    "partition_queued",
    "partition_completed",
    "partition_failed",
)


def partition_sequence(records: list[Record], proof: int, partition: int) -> list[tuple[str, str]]:
    """The ordered (event, stage-or-lock) pairs one partition went through."""
    out = []
    for r in records:
        if r.proof == proof and r.partition == partition and r.event in PARTITION_EVENTS:
            out.append((r.event, str(r.fields.get("stage") or r.fields.get("lock") or "")))
    return out


@dataclass
class LockStats:
    """Waits for one lock over a run."""

    acquisitions: int = 0
    wait_total: float = 0.0
    wait_max: float = 0.0

    def add(self, waited: float) -> None:
        self.acquisitions += 1
        self.wait_total += waited
        self.wait_max = max(self.wait_max, waited)


@dataclass
class RunResult:
    """Everything one run produced.  `vram` and `host` are the model's ledgers or the real
    runtime's gauges: both have pool, capacity, resident, used, peak and history."""

    records: list[Record]
    proofs: list[Any]
    vram: list[Any]
    host: Any
    locks: dict[str, LockStats]
    end_time: float
    wall_seconds: float
    deadlock: Deadlock | None = None
    leaks: list[str] = field(default_factory=list)
    seed: int = 0
    interrupted: str | None = None  # real runs: why the run stopped early (Ctrl-C)
