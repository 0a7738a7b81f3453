"""Which resource bounded progress, and for what share of the makespan.

Like a traffic report that says which junction held the cars up, not only where they
stood: a wait is charged to what holds up whoever it waits behind.  From a run's records
(both runtimes emit the same) and, for the model, the intervals during which its fluid
share was oversubscribed, each resource gets the share of the makespan during which it
bounded progress:

* ``lock L``: a task waits for L while L's holder is *not* running kernels.  Behind a
  holder that runs kernels the wait is the GPU's: a finer lock would not shorten it.
* ``gpu<d>``: device d runs kernels (a GPU stage other than the pre-stage, as
  `busy_frac` counts) while work waits for it: a partition in the GPU queue, or a task
  waiting for a lock whose holder runs kernels on d.
* ``host_membw``: host memory bandwidth is oversubscribed (the model stretches the jobs
  bound to it); null for a real run, which cannot see it.
* ``pin_stalls``: the devices stand still for page-locks (a profile's [pins]: each
  partition's a, b, c locked as they land and unlocked once uploaded; the stalled part
  of each); only for a model run whose profile pins.
* ``synthesis_pool``: the pool is full with partitions waiting behind it (for a slot, or
  for their budget share while no slot is free), and host memory bandwidth is not
  oversubscribed (when it is, the syntheses holding the slots are bandwidth-bound: a
  larger pool would split the same bandwidth).
* ``host_budget``: a partition waits for its share of the budget while a synthesis slot
  is free.
* ``gpu_queue_full``: a synthesised partition waits for room in the GPU queue
  (backpressure); ``gpu_queue_empty``: every GPU worker waits for a partition.

Each share is measured on its own, so shares overlap: they can add up to more than 1
(synthesis bandwidth-bound while the GPU has a queue) or to less (a lone partition at
full speed waits for nothing).  Over Monte Carlo runs, each share is the mean.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from simgpu.events import Record
from simgpu.report.intervals import Spans, at_least, clip, intersect, length, subtract, union

#: The shares' keys besides the per-device and per-lock ones, in the order they are reported.
FIXED = ("host_membw", "synthesis_pool", "host_budget", "gpu_queue_full", "gpu_queue_empty")


class _Slot:
    """One partition attempt's synthesis slot: taken when its synthesis starts, given
    back when its put into the GPU queue is done (or its synthesis or prep fails)."""

    __slots__ = ("start", "end")

    def __init__(self, start: float) -> None:
        self.start = start
        self.end: float | None = None


def bottleneck(
    records: list[Record],
    window: tuple[float, float],
    saturation: dict[str, Spans] | None = None,
    config: Any = None,
) -> dict[str, float | None]:
    """Per resource, the share of `window` (the makespan) during which it bounded
    progress, by the rules of the module docstring.  `config` (the run's PipelineConfig)
    gives the pool's and the workers' counts; without it a slot wait stands for a full
    pool and the workers are those the records name."""
    lo, hi = window
    span = hi - lo
    open_stage: dict[tuple, float] = {}
    kernels_on: dict[int | None, list[tuple[float, float]]] = defaultdict(list)
    kernels_of: dict[tuple, list[tuple[float, float, int | None]]] = defaultdict(list)
    holds: dict[str, list[tuple[float, float, tuple]]] = defaultdict(list)
    held: dict[str, tuple[float, tuple]] = {}
    lock_waits: dict[str, list[tuple[float, float]]] = defaultdict(list)
    queue: list[tuple[float, int]] = []
    waits: dict[str, list[tuple[float, float]]] = defaultdict(list)
    idle: list[tuple[float, int]] = []
    workers: set[str] = set()
    slots: list[_Slot] = []
    open_slot: dict[tuple, _Slot] = {}
    putting: dict[tuple, _Slot] = {}
    for r in records:
        ev = r.event
        f = r.fields
        # the most frequent events first (this loop is per record).  A stage keeps a GPU
        # busy when it runs on one and is not the pre-stage (copies): busy_frac's rule.
        if ev == "stage_start":
            stage = f.get("stage")
            if f.get("on") == "gpu" and stage != "prestage":
                open_stage[(r.device, stage, r.proof, r.partition, r.worker)] = r.t
            elif stage == "synthesis":
                slot = open_slot[(r.proof, r.partition)] = _Slot(r.t)
                slots.append(slot)
        elif ev == "stage_end":
            stage = f.get("stage")
            if f.get("on") == "gpu" and stage != "prestage":
                t0 = open_stage.pop((r.device, stage, r.proof, r.partition, r.worker), None)
                if t0 is not None:
                    kernels_on[r.device].append((t0, r.t))
                    kernels_of[(r.proof, r.partition)].append((t0, r.t, r.device))
            elif "error" in f and stage in ("synthesis", "prep"):
                slot = open_slot.pop((r.proof, r.partition), None)
                if slot is not None:
                    slot.end = r.t
        elif ev == "lock_acquired":
            lock = f["lock"]
            held[lock] = (r.t, (r.proof, r.partition))
            waited = f.get("waited") or 0.0
            if waited > 0:
                lock_waits[lock].append((r.t - waited, r.t))
        elif ev == "lock_released":
            lock = f["lock"]
            got = held.pop(lock, None)
            if got is not None:
                holds[lock].append((got[0], r.t, got[1]))
        elif ev == "waited":
            on = f.get("on")
            since = r.t - f["waited"]
            waits[on].append((since, r.t))
            if on == "gpu_queue_room":
                slot = putting.pop((r.proof, r.partition), None)
                if slot is not None:
                    slot.end = r.t
            elif on == "gpu_queue_item" and r.worker:
                workers.add(r.worker)
                idle += [(since, 1), (r.t, -1)]
        elif ev == "partition_queued":
            queue.append((r.t, 1))
            key = (r.proof, r.partition)
            slot = open_slot.pop(key, None)
            if slot is not None:
                slot.end = r.t  # unless its put has to wait for room (above)
                putting[key] = slot
        elif ev == "partition_picked":
            queue.append((r.t, -1))
            if r.worker:
                workers.add(r.worker)
    for lock, (t0, key) in held.items():  # still held when the records end
        holds[lock].append((t0, hi, key))

    def share(x: Spans) -> float:
        return length(clip(x, lo, hi)) / span if span > 0 else 0.0

    out: dict[str, float | None] = {}
    membw = None if saturation is None else union(saturation.get("membw", []))
    out["host_membw"] = None if membw is None else share(membw)
    if saturation and saturation.get("pins"):
        out["pin_stalls"] = share(union(saturation["pins"]))
    # lock waits: behind kernels (the GPU's) or not (the lock's)
    behind_kernels: dict[int | None, list[Spans]] = defaultdict(list)
    lock_shares: dict[str, float] = {}
    for lock in sorted(set(holds) | set(lock_waits)):
        waiting = union(lock_waits.get(lock, []))
        per_device: dict[int | None, list[tuple[float, float]]] = defaultdict(list)
        for a, b, key in holds.get(lock, []):
            for k0, k1, dev in kernels_of.get(key, []):
                if min(b, k1) > max(a, k0):
                    per_device[dev].append((max(a, k0), min(b, k1)))
        kernels_held = union(x for spans in per_device.values() for x in spans)
        for dev, spans in per_device.items():
            behind_kernels[dev].append(intersect(waiting, union(spans)))
        lock_shares[f"lock {lock}"] = share(subtract(waiting, kernels_held))
    in_queue = at_least(queue, 1)
    for dev in sorted(kernels_on, key=lambda d: (d is None, d)):
        waited_for = union([*in_queue, *(x for spans in behind_kernels.get(dev, []) for x in spans)])
        out[f"gpu{dev}"] = share(intersect(union(kernels_on[dev]), waited_for))
    out.update(lock_shares)
    slot_waits = union(waits.get("synthesis_slot", []))
    budget_waits = union(waits.get("host_budget", []))
    if config is not None:
        taken = [(s.start, 1) for s in slots] + [(s.end if s.end is not None else hi, -1) for s in slots]
        full = at_least(taken, config.partition_workers)
        n_workers = config.devices * config.gpu_workers_per_device
    else:
        full, n_workers = slot_waits, len(workers)
    behind_pool = union([*slot_waits, *intersect(budget_waits, full)])
    out["synthesis_pool"] = share(behind_pool if membw is None else subtract(behind_pool, membw))
    out["host_budget"] = share(subtract(budget_waits, full))
    out["gpu_queue_full"] = share(union(waits.get("gpu_queue_room", [])))
    out["gpu_queue_empty"] = share(at_least(idle, n_workers)) if n_workers else 0.0
    return out


def ranked(shares: dict[str, float | None]) -> list[tuple[str, float]]:
    """The shares that were measured and not zero, the largest first."""
    return sorted(((k, v) for k, v in shares.items() if v), key=lambda kv: (-kv[1], kv[0]))


#: How the table and explain name each kind of share.
LABELS = {
    "host_membw": "host memory bandwidth",
    "pin_stalls": "devices standing still for page-locks (pins)",
    "synthesis_pool": "synthesis pool",
    "host_budget": "host budget",
    "gpu_queue_full": "GPU queue full (backpressure)",
    "gpu_queue_empty": "GPU queue empty (GPU workers idle)",
}


def label(key: str) -> str:
    """How the table and explain name a share (LABELS; the key itself for a lock or device)."""
    return LABELS.get(key, key)


def mean_shares(per_run: list[dict[str, float | None]]) -> dict[str, float | None]:
    """Each share's mean over runs (a lock or device one run never used counts 0 there;
    a share no run could measure stays null)."""
    keys: list[str] = []
    for shares in per_run:
        keys += [k for k in shares if k not in keys]
    out: dict[str, float | None] = {}
    for k in keys:
        values = [s.get(k, 0.0) for s in per_run]
        measured = [v for v in values if v is not None]
        out[k] = sum(measured) / len(measured) if measured else None
    return out
