"""RealRuntime: the runtime protocol on threads, driving a real prover.

Each scheduler generator runs on a thread of its own: the thread sends each result back
into the generator, or throws the error in at the `yield`, exactly as SimRuntime does
with SimPy events, and one generator steps at a time (the step lock), so scheduler code
between two yields is as atomic as in the simulation; the waits and the stages run
outside it, in parallel.  Stages call a `StageExecutor` (simgpu.real.executor: the Groth16
prover on the CuPy or CPU backend); synthesis goes to worker processes there, so
CPU-heavy Python never holds this process's GIL.

A watchdog reports a deadlock (every live task parked on a lock, semaphore, queue,
event or task, twice in a row, with nothing running) and stops the run; Ctrl-C stops it
too: waiting tasks get `Cancelled`, running stages finish, and the report says what
finished.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from simgpu.config import PipelineConfig, Workload
from simgpu.errors import Deadlock, DesignError, OutOfMemory, SimgpuError
from simgpu.events import RunResult, TaskView, doing_text, with_doing
from simgpu.ledger import holder_scope
from simgpu.real.primitives import (
    Cancelled,
    RealEvent,
    RealLock,
    RealQueue,
    RealSemaphore,
    Sleep,
    Stop,
    Waitable,
)
from simgpu.sched.base import RuntimeBase
from simgpu.sched.daemon import Daemon
from simgpu.sched.runtime import Proc
from simgpu.sched.stuck import Wait, diagnose
from simgpu.sched.work import Partition

WATCHDOG_PERIOD = 0.5  # seconds between deadlock checks
#: Seconds with nothing recorded and no stage running after which a run is a livelock (a
#: design that never ends); every stage, lock and queue change records something.
STALL_SECONDS = 300.0


class StageExecutor(Protocol):
    """What RealRuntime needs from a prover."""

    def stage_on(self, name: str) -> str:
        """'cpu' or 'gpu'."""
        ...

    def run_stage(self, name: str, part: Partition, device: int | None, inputs: dict[str, Any]) -> Any: ...

    def free(self, handle: Any) -> None: ...

    def vram_capacity(self, device: int) -> int: ...

    def vram_resident(self, device: int) -> int: ...

    def vram_used(self, device: int) -> int: ...

    def vram_peak(self, device: int) -> int:
        """The device pool's peak since the last `reset_vram_peaks`."""
        ...

    def reset_vram_peaks(self) -> None:
        """Start the peaks over: each run reports its own, also on a reused executor."""
        ...

    def vram_estimate(self, part: Partition, stages: tuple[str, ...]) -> int: ...

    def partition_estimate(self, part: Partition) -> int: ...

    def partition_release_at_gpu_start(self, part: Partition) -> int: ...

    def host_budget(self) -> int: ...

    def host_capacity(self) -> int: ...

    def host_rss(self) -> int: ...


@dataclass
class Gauge:
    """A measured memory pool, with the attributes metrics/report read off a ledger."""

    pool: str
    capacity: int
    resident: int
    used: int = 0
    peak: int = 0
    history: list[tuple[float, int]] = field(default_factory=list)

    def observe(self, t: float, used: int) -> None:
        self.used = used
        self.peak = max(self.peak, used)
        if not self.history or self.history[-1][1] != used:
            self.history.append((t, used))

    @property
    def live(self) -> int:
        return self.used - self.resident

    def allocations(self) -> list:
        return []


class RealTask(Waitable):
    """A generator running on its own thread; waiting on it joins it."""

    def __init__(self, rt: RealRuntime, proc: Proc, name: str, ctx: dict[str, Any]) -> None:
        self.rt, self.proc, self.name, self.ctx = rt, proc, name, ctx
        self.what = f"task {name}"
        self.waiting: Waitable | None = None
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None
        self.joined = False
        self.thread = threading.Thread(target=self._drive, name=name, daemon=True)

    def _drive(self) -> None:
        self.rt._local.ctx = self.ctx
        try:
            self._loop()
        finally:
            # Only now, with _loop's frame (its last value and exception) gone: whoever
            # joins this task must not find device memory still held by this thread.
            self.proc = None
            self.done.set()

    def _loop(self) -> None:
        gen = self.proc
        send: Any = None
        exc: BaseException | None = None
        try:
            while True:
                try:
                    # One step of scheduler code at a time, as in the simulation: what a
                    # design or the daemon does between two yields is atomic on threads too
                    # (waits and stages run outside the step lock).
                    with self.rt._step:
                        obj = gen.throw(exc) if exc is not None else gen.send(send)
                except StopIteration as stop:
                    self.value = stop.value
                    return
                if not isinstance(obj, Waitable):
                    raise DesignError(
                        f"task {self.name} yielded {obj!r}, which is not a runtime waitable (a lock's "
                        "acquire(), a queue's put/get, rt.stage(...), rt.sleep(...), a task or an event)"
                    )
                self.waiting = obj
                try:
                    send, exc = obj.wait(), None
                except BaseException as e:  # delivered into the generator at its yield
                    send, exc = None, e
                finally:
                    self.waiting = None
                obj = None
        except BaseException as e:
            self.error = e
            # A design's bug (or any error that is not the domain's) stops the run.
            if isinstance(e, DesignError) or not isinstance(e, SimgpuError):
                self.rt._crashed(self, e)

    def wait(self) -> Any:
        self.joined = True
        while not self.done.wait(0.1):
            self.rt.stop.check()
        if self.error is not None:
            raise self.error
        return self.value


class _StageCall(Waitable):
    blocking = False

    def __init__(self, rt: RealRuntime, name: str, part: Partition, device: int | None, inputs: dict) -> None:
        self.rt, self.name, self.part, self.device, self.inputs = rt, name, part, device, inputs
        self.what = f"stage {name}"

    def wait(self) -> Any:
        return self.rt._run_stage(self.name, self.part, self.device, self.inputs)


class RealRuntime(RuntimeBase):
    """The runtime protocol on threads and a real prover.  Build one per run."""

    def __init__(
        self,
        executor: StageExecutor,
        config: PipelineConfig,
        workload: Workload,
        seed: int = 0,
        stall_seconds: float = STALL_SECONDS,
    ) -> None:
        super().__init__(config, workload, seed, guard=threading.Lock())
        self._step = threading.Lock()  # held while a task runs its scheduler code (RealTask)
        self.executor = executor
        self.stall_seconds = stall_seconds
        self._in_stage = 0
        self.stop = Stop()
        self._local = threading.local()
        self._t0 = time.perf_counter()
        self.tasks: list[RealTask] = []
        self._crash: tuple[RealTask, BaseException] | None = None
        executor.reset_vram_peaks()  # before the first sample: this run's peak, not the last run's
        self.vram = [
            Gauge(f"gpu{d}", executor.vram_capacity(d), executor.vram_resident(d))
            for d in range(config.devices)
        ]
        self.host = Gauge("host", executor.host_capacity(), executor.host_rss())
        self._sample()

    # ------------------------------------------------------------ RuntimeBase

    def now(self) -> float:
        return time.perf_counter() - self._t0

    def current_context(self) -> dict[str, Any]:
        ctx = getattr(self._local, "ctx", None)
        if ctx is None:
            ctx = self._local.ctx = {}
        return ctx

    def _new_lock(self, label: str) -> RealLock:
        return RealLock(label, self.stop, self.current_context, self.lock_acquired, self.lock_released)

    def _new_semaphore(self, label: str, capacity: int) -> RealSemaphore:
        return RealSemaphore(label, capacity, self.stop)

    def _new_queue(self, name: str, capacity: int) -> RealQueue:
        return RealQueue(name, capacity, self.stop)

    # ------------------------------------------------------------ protocol

    def spawn(self, proc: Proc, name: str, **context: Any) -> RealTask:
        task = RealTask(self, proc, name, self.child_context(context))
        self.tasks.append(task)
        task.thread.start()
        return task

    def event(self) -> RealEvent:
        return RealEvent(self.stop)

    def sleep(self, seconds: float) -> Sleep:
        return Sleep(seconds, self.stop)

    def stage(self, name: str, part: Partition, device: int | None, **inputs: Any) -> _StageCall:
        if self.executor.stage_on(name) == "gpu" and device is None:
            raise DesignError(f"stage {name} runs on a GPU: pass the worker's device")
        return _StageCall(self, name, part, device, inputs)

    def free(self, handle: Any) -> None:
        if handle is not None:
            self.executor.free(handle)
            self._sample()

    def vram_capacity(self, device: int) -> int:
        return self.executor.vram_capacity(device) - self.executor.vram_resident(device)

    def vram_free(self, device: int) -> int:
        return self.executor.vram_capacity(device) - self.executor.vram_used(device)

    def vram_estimate(self, part: Partition, *stages: str) -> int:
        return self.executor.vram_estimate(part, stages)

    def host_budget(self) -> int:
        return self.executor.host_budget()

    def partition_estimate(self, part: Partition) -> int:
        return self.executor.partition_estimate(part)

    def partition_release_at_gpu_start(self, part: Partition) -> int:
        return self.executor.partition_release_at_gpu_start(part)

    # ------------------------------------------------------------ stages

    def _sample(self) -> None:
        t = self.now()
        for d, g in enumerate(self.vram):
            g.observe(t, self.executor.vram_used(d))
            g.peak = max(g.peak, self.executor.vram_peak(d))
        self.host.observe(t, self.executor.host_rss())

    def _run_stage(self, name: str, part: Partition, device: int | None, inputs: dict[str, Any]) -> Any:
        self.stop.check()
        ctx = dict(self.current_context(), proof=part.proof.id, partition=part.index)
        on = self.executor.stage_on(name)
        self._emit("stage_start", ctx, {"stage": name, "on": on, "device": device})
        start = self.now()
        err: OutOfMemory | None = None
        with self._guard:
            self._in_stage += 1
        worker = ctx.get("worker", "")
        try:
            # the prover's devices book what they allocate in this stage for this partition
            with holder_scope(self.now, stage=name, worker=worker, proof=part.proof.id, partition=part.index):
                out = self.executor.run_stage(name, part, device, inputs)
        except OutOfMemory as e:
            # The backend knows the pool, bytes, buffer and holders; we know where it happened.
            err = type(e)(*e.args[:5], name, worker, part.proof.id, part.index, e.holders)
            # The failed call's frames hold views of device buffers in their locals; the
            # pool gets them back only when nothing references those frames.
            traceback.clear_frames(e.__traceback__)
        except BaseException as e:
            self._emit(
                "stage_end",
                ctx,
                {"stage": name, "on": on, "device": device, "seconds": self.now() - start, "error": str(e)},
            )
            raise
        finally:
            with self._guard:
                self._in_stage -= 1
        if err is not None:
            self._emit("oom", ctx, err.as_dict() | {"holders": with_doing(err.holders, self.task_views())})
            self._emit(
                "stage_end",
                ctx,
                {"stage": name, "on": on, "device": device, "seconds": self.now() - start, "error": str(err)},
            )
            self._sample()
            raise err  # outside the except block: no context chain back to those frames
        self._emit(
            "stage_end", ctx, {"stage": name, "on": on, "device": device, "seconds": self.now() - start}
        )
        self._sample()
        return out

    def task_views(self) -> list[TaskView]:
        """Every live task and what it is doing now (for an OOM's holders)."""
        with self._guard:
            locks = list(self._locks.values())
        parked = {}
        for lock in locks:
            with lock._cond:  # the FIFO's bookkeeping changes under its condition
                parked.update({who: (lock.name, lock._fifo.holder) for _, who, _ in lock._fifo.waiters})
        views = []
        for t in list(self.tasks):
            if t.done.is_set():
                continue
            lock, holder = parked.get(t.name, (None, None))
            what = getattr(t.waiting, "what", None)
            views.append(TaskView(t.name, dict(t.ctx), doing_text(what, lock, holder), lock))
        return views

    # ------------------------------------------------------------ running

    def _crashed(self, task: RealTask, error: BaseException) -> None:
        if self._crash is None:
            self._crash = (task, error)
        self.stop.set(f"task {task.name} crashed: {type(error).__name__}: {error}")

    def _waits(self) -> list[Wait] | None:
        """Every live task's wait, if every one of them is blocked (else None)."""
        live = [t for t in self.tasks if not t.done.is_set()]
        if not live:
            return None
        waits = []
        for t in live:
            w = t.waiting
            if w is None or not w.blocking:
                return None
            on = w.name if isinstance(w, RealTask) else getattr(w, "waits_on", lambda: None)()
            waits.append(Wait(t.name, w.what, on))
        return waits

    def _stuck(self, waits: list[Wait], kind: str, cause: str = "") -> Deadlock:
        cycle, roots = diagnose(waits)
        return Deadlock(self.now(), {w.task: w.what for w in waits}, cycle, roots, kind=kind, cause=cause)

    def _all_waits(self) -> list[Wait]:
        out = []
        for t in self.tasks:
            if not t.done.is_set():
                w = t.waiting
                out.append(Wait(t.name, w.what if w is not None else "running", None))
        return out

    def run(self, design: Callable[..., Proc]) -> RunResult:
        """Run the daemon with `design` until every proof has ended, or the run is stopped:
        a deadlock (every task blocked, twice in a row), a livelock (nothing recorded and no
        stage running for `stall_seconds`), a crash, or Ctrl-C."""
        wall = time.perf_counter()
        daemon = Daemon(self, self.config, self.workload, design)
        main = self.spawn(daemon.run(), "daemon")
        stuck: Deadlock | None = None
        interrupted = None
        suspect: list[Wait] | None = None
        seen, quiet_since = len(self.records), time.perf_counter()
        try:
            while not main.done.wait(WATCHDOG_PERIOD):
                if self._crash is not None:
                    break
                waits = self._waits()
                if waits is not None and waits == suspect:
                    stuck = self._stuck(waits, "deadlock")
                    self.stop.set(str(stuck))
                    break
                suspect = waits
                if len(self.records) != seen or self._in_stage:
                    seen, quiet_since = len(self.records), time.perf_counter()
                elif time.perf_counter() - quiet_since > self.stall_seconds:
                    cause = f"nothing recorded and no stage running for {self.stall_seconds:g} s"
                    stuck = self._stuck(self._all_waits(), "livelock", cause)
                    self.stop.set(str(stuck))
                    break
        except KeyboardInterrupt:
            interrupted = "interrupted by Ctrl-C"
            self.stop.set(interrupted)
        if self.stop.reason is not None:
            # let every task see the stop and unwind; running stages finish first
            for t in list(self.tasks):
                while t.thread.is_alive():
                    try:
                        t.thread.join()
                    except KeyboardInterrupt:
                        interrupted = interrupted or "interrupted by Ctrl-C"
        if self._crash is not None:
            task, error = self._crash
            if isinstance(error, DesignError):
                raise DesignError(str(error)) from None
            raise DesignError(f"task {task.name} raised {type(error).__name__}: {error}") from error
        if self.stop.reason is not None:
            daemon.abandon(f"not finished: {self.stop.reason}")
        self._sample()
        for t in list(self.tasks):  # every task has returned; let its thread finish too
            t.thread.join(timeout=5.0)
        leaks = [
            f"{g.pool}: {g.live} bytes still allocated at the end"
            for g in self.vram
            if g.live > 0 and stuck is None and interrupted is None
        ]
        result = self.result(
            daemon.proofs,
            self.vram,
            self.host,
            time.perf_counter() - wall,
            deadlock=stuck,
            leaks=leaks,
            interrupted=interrupted,
        )
        result.config = self.config
        return result


__all__ = ["Cancelled", "RealRuntime", "RunResult", "StageExecutor"]
