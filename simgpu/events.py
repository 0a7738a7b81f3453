"""Event records and run results: what both runtimes produce, so predicted and measured
runs line up and one piece of code (metrics.py) measures both.

One record per thing that happened, TIMELINE-style: time (seconds since the run
started), event name, proof, partition, device, worker, and free-form fields.

Events (fields):
    proof_submitted (partitions) / proof_completed (latency) / proof_failed (reason)
    partition_admitted: the admitter gave the partition its budget share and a synthesis
        slot (in the daemon's order: proofs as they arrived, each one's partitions by index)
    partition_queued / partition_completed / partition_failed (reason) / partition_retry
    partition_placed (device, placement, need, available): the dispatcher chose a device
        (simgpu.sched.placement; not recorded under the shared queue, where workers take
        partitions themselves)
    partition_picked: a GPU worker took the partition (the end of its wait in the queue,
        cuzk's GPU_PICKUP)
    stage_start (stage, on) / stage_end (stage, on, seconds)
    phase_start (stage, phase) / phase_end (stage, phase)
    lock_acquired (lock, waited)  / lock_released (lock)
    waited (on, waited): a partition's wait that ended, recorded only when it lasted:
        on "host_budget" (its share of the budget), "synthesis_slot" (a slot of the pool),
        "gpu_queue_room" (a full GPU queue: backpressure), "gpu_queue_item" (a GPU worker
        idle, waiting for a partition; proof and partition null)
    oom (kind, pool, stage, worker, buffer, requested_bytes, free_bytes, capacity_bytes,
        holders): holders are the allocations live at that instant (ledger.holder_record)
        with what the task carrying each one's partition was doing then (`doing`, and
        `waits_for`: the lock it was parked on, or null)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from simgpu.errors import Deadlock


@dataclass(slots=True)
class Record:
    """One thing that happened in a run: its time (seconds since the run started), event
    name, proof, partition, device, worker, and the event's own fields (see above)."""

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
    "partition_admitted",
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


@dataclass(frozen=True)
class TaskView:
    """One live task at an instant, as its runtime sees it: its name, its context
    (device, worker, proof, partition), what it is doing, and the lock it is parked on."""

    name: str
    ctx: dict[str, Any]
    doing: str
    waits_for: str | None = None


def doing_text(
    what: str | None, lock: str | None = None, lock_holder: str | None = None, inner: str | None = None
) -> str:
    """What a task is doing, in words, from the `what` of the waitable it is parked on
    (both runtimes name their waitables alike): "in stage kernels (kernels.h_msm)",
    "waiting for lock gpu0/compute (held by gpu0.w1)", "waiting for a partition to finish"."""
    if lock:
        return f"waiting for lock {lock}" + (f" (held by {lock_holder})" if lock_holder else "")
    if not what:
        return "running"
    if what.startswith("stage "):
        stage = what[len("stage ") :]
        # a stage of one phase names its phase after itself: "prep.prep" says nothing more
        return f"in {what}" + (f" ({inner})" if inner and inner != f"{stage}.{stage}" else "")
    return f"waiting for {what}"


def _carrier(tasks: list[TaskView], holder: dict[str, Any]) -> TaskView | None:
    """The task carrying a holder's partition: the one of its worker if that still works
    on it, else a GPU worker's task on it (a partition's host buffers outlive its
    synthesis), else any task of that partition."""
    if holder.get("proof") is None:
        return None  # set-up memory (keys, caches): nobody's partition
    same = [
        v
        for v in tasks
        if v.ctx.get("proof") == holder["proof"] and v.ctx.get("partition") == holder["partition"]
    ]
    worker = holder.get("worker")
    return (
        next((v for v in same if worker and v.ctx.get("worker") == worker), None)
        or next((v for v in same if v.ctx.get("worker")), None)
        or (same[0] if same else None)
    )


def with_doing(holders: list[dict[str, Any]], tasks: list[TaskView]) -> list[dict[str, Any]]:
    """Each holder record with what the task carrying its partition was doing."""
    out = []
    for h in holders:
        v = _carrier(tasks, h)
        out.append(h | {"doing": v.doing if v else "", "waits_for": v.waits_for if v else None})
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
    #: The run's configuration (its runtime's PipelineConfig): the report reads the pool
    #: and queue sizes off it.
    config: Any = None
    #: Per shared resource the model's fluid share knows ("membw", "cores", "h2d0" ...),
    #: the intervals during which it was oversubscribed; None where the runtime cannot see
    #: it (a real run).
    saturation: dict[str, list[tuple[float, float]]] | None = None
