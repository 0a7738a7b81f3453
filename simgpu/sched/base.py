"""The plumbing both runtimes share, in pure scheduler code.

Like the chassis two cars of one model share under different engines: task contexts
(a spawned task inherits its parent's device and worker), the named locks, semaphores
and queues (one per name and device, made on first use), the event records, the lock
statistics and the assembly of a run's result are the same whether time is simulated
(simgpu.model.SimRuntime) or real (simgpu.real.RealRuntime).  A runtime subclasses
`RuntimeBase` and supplies only how a wait is carried out: its clock, the current
task's context, and the primitives built on simgpu.sched.fifo.

No simpy, threading or cupy here: `guard` is whatever mutual exclusion the runtime needs
around the shared tables (nothing for SimPy's single thread, a lock for threads).
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from simgpu.config import PipelineConfig, Workload
from simgpu.errors import Deadlock
from simgpu.events import LockStats, Record, RunResult

#: The context keys a spawned task inherits from the task that spawned it.
INHERITED = ("device", "worker")


class RuntimeBase:
    """Contexts, named primitives, records and results; see the module docstring."""

    def __init__(
        self,
        config: PipelineConfig,
        workload: Workload,
        seed: int = 0,
        guard: contextlib.AbstractContextManager[Any] | None = None,
    ) -> None:
        # a configuration built in Python gets the one-line answer a flag or a TOML gets
        self.config = config.validate()
        self.workload = workload
        self.seed = seed
        self.records: list[Record] = []
        self.lock_stats: dict[str, LockStats] = defaultdict(LockStats)
        self._guard = guard if guard is not None else contextlib.nullcontext()
        self._locks: dict[tuple[str, int], Any] = {}
        self._sems: dict[tuple[str, int | None], Any] = {}
        self._queues: dict[str, Any] = {}

    # ---------------------------------------------------------------- supplied by a runtime

    def now(self) -> float:
        raise NotImplementedError

    def current_context(self) -> dict[str, Any]:
        """The running task's context (a mutable dict the runtime keeps per task)."""
        raise NotImplementedError

    def _new_lock(self, label: str) -> Any:
        raise NotImplementedError

    def _new_semaphore(self, label: str, capacity: int) -> Any:
        raise NotImplementedError

    def _new_queue(self, name: str, capacity: int) -> Any:
        raise NotImplementedError

    # ---------------------------------------------------------------- contexts

    def child_context(self, context: dict[str, Any]) -> dict[str, Any]:
        """A new task's context: the inherited keys of the spawner's, then its own."""
        parent = self.current_context()
        ctx = {k: v for k, v in parent.items() if k in INHERITED}
        ctx.update(context)
        return ctx

    def set_context(self, **context: Any) -> None:
        self.current_context().update(context)

    # ---------------------------------------------------------------- named primitives

    def lock(self, name: str, device: int) -> Any:
        return self._named(self._locks, (name, device), lambda: self._new_lock(f"gpu{device}/{name}"))

    def semaphore(self, name: str, capacity: int, device: int | None = None) -> Any:
        label = name if device is None else f"gpu{device}/{name}"
        return self._named(self._sems, (name, device), lambda: self._new_semaphore(label, capacity))

    def queue(self, name: str, capacity: int = 0) -> Any:
        return self._named(self._queues, name, lambda: self._new_queue(name, capacity))

    def _named(self, table: dict, key: Any, make: Callable[[], Any]) -> Any:
        with self._guard:
            obj = table.get(key)
            if obj is None:
                obj = table[key] = make()
            return obj

    # ---------------------------------------------------------------- records

    def record(self, event: str, **fields: Any) -> None:
        self._emit(event, self.current_context(), fields)

    def _emit(self, event: str, ctx: dict[str, Any], fields: dict[str, Any]) -> None:
        proof = fields.pop("proof", ctx.get("proof"))
        partition = fields.pop("partition", ctx.get("partition"))
        device = fields.pop("device", ctx.get("device"))
        rec = Record(self.now(), event, proof, partition, device, ctx.get("worker"), fields)
        with self._guard:
            self.records.append(rec)

    def lock_acquired(self, lock: str, ctx: dict[str, Any], waited: float) -> None:
        """Account and record a lock taken by the task whose context is `ctx`."""
        with self._guard:
            self.lock_stats[lock].add(waited)
        self._emit("lock_acquired", ctx, {"lock": lock, "waited": waited})

    def lock_released(self, lock: str) -> None:
        self.record("lock_released", lock=lock)

    # ---------------------------------------------------------------- the result

    def result(
        self,
        proofs: list[Any],
        vram: list[Any],
        host: Any,
        wall_seconds: float,
        deadlock: Deadlock | None = None,
        leaks: list[str] | None = None,
        interrupted: str | None = None,
    ) -> RunResult:
        with self._guard:
            records = list(self.records)
            locks = dict(self.lock_stats)
        return RunResult(
            records=records,
            proofs=proofs,
            vram=vram,
            host=host,
            locks=locks,
            end_time=self.now(),
            wall_seconds=wall_seconds,
            deadlock=deadlock,
            leaks=leaks or [],
            seed=self.seed,
            interrupted=interrupted,
        )
