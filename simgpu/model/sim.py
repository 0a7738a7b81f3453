"""SimRuntime: the runtime protocol on SimPy, with stage costs from a Profile.

Each scheduler generator becomes a SimPy process.  A stage is a process of its own that
books its footprints in the VRAM and host ledgers (raising VramExhausted /
HostRamExhausted at the allocation that does not fit) and spends its profile time,
stretched by noise and by contention for shared resources (model.contention).
"""

from __future__ import annotations

import math
import random
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import simpy

from simgpu.config import PipelineConfig, Workload
from simgpu.errors import Deadlock, DesignError, OutOfMemory, SimgpuError, UserError
from simgpu.events import LockStats, Record, RunResult
from simgpu.ledger import Allocation, Ledger, host_ledger, vram_ledger
from simgpu.model.contention import FluidShare
from simgpu.model.primitives import Signal, SimLock, SimQueue, SimSemaphore
from simgpu.profile import Profile, ResolvedStage
from simgpu.sched.daemon import Daemon
from simgpu.sched.runtime import Proc
from simgpu.sched.work import Partition


class Buffers:
    """A handle on named allocations in one ledger (a stage's output)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.allocs: dict[str, Allocation] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.allocs

    def add(self, name: str, alloc: Allocation) -> None:
        self.allocs[name] = alloc

    def release(self, name: str) -> None:
        a = self.allocs.pop(name, None)
        if a is not None:
            a.release()

    def free(self) -> None:
        for name in list(self.allocs):
            self.release(name)

    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.allocs.values())

    def __repr__(self) -> str:
        return f"Buffers({self.ledger.pool}: {', '.join(self.allocs)})"


def _lognormal_params(cv: float) -> tuple[float, float]:
    sigma2 = math.log1p(cv * cv)
    return -sigma2 / 2, math.sqrt(sigma2)


class SimRuntime:
    """The runtime protocol on SimPy.  Build one per run."""

    def __init__(
        self,
        profile: Profile,
        config: PipelineConfig,
        workload: Workload,
        seed: int = 0,
        record_phases: bool = True,
    ) -> None:
        self.profile = profile
        self.config = config
        self.workload = workload
        self.seed = seed
        self.record_phases = record_phases
        self.env = simpy.Environment()
        self.resolved = profile.resolve(workload.constraints)
        hw = profile.hardware
        host_ram = config.host_ram or hw.host_ram  # [hardware] host_ram overrides the profile's
        vram = config.vram if config.vram is not None else hw.vram
        resident = self.resolved.vram_resident
        if vram <= resident:
            raise UserError(
                f"--vram {vram} bytes is not more than the {resident} bytes resident "
                f"on the device in profile {profile.name}"
            )
        now = self.now
        self.vram = [vram_ledger(d, vram, resident, clock=now) for d in range(config.devices)]
        self.host = host_ledger(host_ram, hw.host_resident, clock=now)
        # One driver process drives every device: one interpreter lock, one result channel.
        capacity: dict[Any, float] = {
            "membw": hw.membw_gbps,
            "cores": float(hw.cpu_cores),
            "gil": 1.0,
            "driver_rx": 1.0,
        }
        for d in range(config.devices):
            capacity[("gpu", d)] = 1.0
            capacity[("h2d", d)] = hw.h2d_gbps
        self.fluid = FluidShare(self.env, capacity, bursty=frozenset({"gil"}))
        self.rng = random.Random(seed)
        self.records: list[Record] = []
        self._locks: dict[tuple[str, int], SimLock] = {}
        self._sems: dict[tuple[str, int | None], SimSemaphore] = {}
        self._queues: dict[str, SimQueue] = {}
        self.lock_stats: dict[str, LockStats] = defaultdict(LockStats)
        self._ctx: dict[simpy.Process, dict[str, Any]] = {}
        self._names: dict[simpy.Process, str] = {}
        self._uses_cache: dict[tuple[str, int, int | None], tuple] = {}
        self._noise = {st.name: _lognormal_params(st.noise_cv) for st in self.resolved.stages.values()}
        too_big = "circuit too big for this profile"
        need = self.resolved.vram_peak(("prestage", "kernels"))
        if need > vram - resident:
            raise UserError(
                f"a partition of {workload.constraints:,} constraints needs {need / 2**30:.1f} GiB of "
                f"VRAM at its peak, more than the {(vram - resident) / 2**30:.1f} GiB free on an "
                f"idle device: {too_big} (raise --vram or lower --constraints)"
            )
        host_need = sum(size for _, size in self.resolved.stages["synthesis"].host_out)
        if host_need > host_ram - hw.host_resident:
            raise UserError(
                f"a partition of {workload.constraints:,} constraints needs {host_need / 2**30:.1f} GiB "
                f"of host RAM, more than the machine has beyond its resident set: {too_big}"
            )
        budget = config.total_budget if config.total_budget is not None else host_ram - config.safety_margin
        self._host_budget = max(0, budget - hw.host_resident)
        if self.resolved.partition_estimate > self._host_budget:
            raise UserError(
                f"a partition of {workload.constraints} constraints needs "
                f"{self.resolved.partition_estimate / 2**30:.1f} GiB of host budget but "
                f"{profile.name} has {self._host_budget / 2**30:.1f} GiB: {too_big}"
            )

    # ------------------------------------------------------------ protocol

    def now(self) -> float:
        return self.env.now

    def spawn(self, proc: Proc, name: str, **context: Any) -> simpy.Process:
        parent = self._ctx.get(self.env.active_process, {})
        p = self.env.process(proc)
        ctx = {k: v for k, v in parent.items() if k in ("device", "worker")}
        ctx.update(context)
        self._ctx[p] = ctx
        self._names[p] = name
        p.what = f"task {name}"
        return p

    def set_context(self, **context: Any) -> None:
        ctx = self._ctx.setdefault(self.env.active_process, {})
        ctx.update(context)

    def _who(self) -> tuple[str, dict[str, Any]]:
        p = self.env.active_process
        ctx = self._ctx.get(p, {})
        return (ctx.get("worker") or self._names.get(p, "?")), dict(ctx)

    def _lock_acquired(self, lock: SimLock, waited: float, ctx: dict[str, Any]) -> None:
        self.lock_stats[lock.name].add(waited)
        self._emit("lock_acquired", ctx, {"lock": lock.name, "waited": waited})

    def lock(self, name: str, device: int) -> SimLock:
        key = (name, device)
        lk = self._locks.get(key)
        if lk is None:
            lk = self._locks[key] = _RecordingLock(self, f"gpu{device}/{name}")
        return lk

    def semaphore(self, name: str, capacity: int, device: int | None = None) -> SimSemaphore:
        key = (name, device)
        sem = self._sems.get(key)
        if sem is None:
            label = name if device is None else f"gpu{device}/{name}"
            sem = self._sems[key] = SimSemaphore(self.env, label, capacity)
        return sem

    def queue(self, name: str, capacity: int = 0) -> SimQueue:
        q = self._queues.get(name)
        if q is None:
            q = self._queues[name] = SimQueue(self.env, name, capacity)
        return q

    def event(self) -> Signal:
        ev = Signal(self.env)
        ev.what = "a partition to finish"
        return ev

    def sleep(self, seconds: float) -> simpy.Event:
        t = self.env.timeout(max(0.0, seconds))
        t.what = f"a {seconds:.3f}s sleep"
        return t

    def stage(self, name: str, part: Partition, device: int | None, **inputs: Any) -> simpy.Process:
        st = self.resolved.stages.get(name)
        if st is None:
            raise DesignError(f"unknown stage {name!r} (profile has {', '.join(self.resolved.stages)})")
        if st.on == "gpu" and device is None:
            raise DesignError(f"stage {name} runs on a GPU: pass the worker's device")
        ctx = dict(self._ctx.get(self.env.active_process, {}))
        p = self.env.process(self._run_stage(st, part, device, ctx, inputs))
        p.what = f"stage {name}"
        return p

    def free(self, handle: Buffers | None) -> None:
        if handle is not None:
            handle.free()

    def vram_capacity(self, device: int) -> int:
        led = self.vram[device]
        return led.capacity - led.resident

    def vram_free(self, device: int) -> int:
        return self.vram[device].free

    def vram_estimate(self, part: Partition, *stages: str) -> int:
        return self.resolved.vram_peak(stages)

    def host_budget(self) -> int:
        return self._host_budget

    def partition_estimate(self, part: Partition) -> int:
        return self.resolved.partition_estimate

    def record(self, event: str, **fields: Any) -> None:
        ctx = self._ctx.get(self.env.active_process, {})
        self._emit(event, ctx, fields)

    def _emit(self, event: str, ctx: dict[str, Any], fields: dict[str, Any]) -> None:
        proof = fields.pop("proof", ctx.get("proof"))
        partition = fields.pop("partition", ctx.get("partition"))
        device = fields.pop("device", ctx.get("device"))
        self.records.append(Record(self.env.now, event, proof, partition, device, ctx.get("worker"), fields))

    # ------------------------------------------------------------ stages

    def _uses(self, st: ResolvedStage, i: int, device: int | None) -> tuple:
        key = (st.name, i, device)
        cached = self._uses_cache.get(key)
        if cached is None:
            out = []
            for res, use in st.phases[i].uses.items():
                if res in ("gpu", "h2d"):
                    if device is None:
                        continue  # a CPU stage naming a device resource: nothing to share
                    out.append(((res, device), use.demand, use.bound))
                else:
                    out.append((res, use.demand, use.bound))
            cached = self._uses_cache[key] = tuple(out)
        return cached

    def _run_stage(
        self,
        st: ResolvedStage,
        part: Partition,
        device: int | None,
        ctx: dict[str, Any],
        inputs: dict[str, Any],
    ) -> Proc:
        name = st.name
        where = {
            "stage": name,
            "worker": ctx.get("worker", ""),
            "proof": part.proof.id,
            "partition": part.index,
        }
        rec_ctx = dict(ctx, proof=part.proof.id, partition=part.index)
        self._emit("stage_start", rec_ctx, {"stage": name, "on": st.on, "device": device})
        start = self.env.now
        mu, sigma = self._noise[name]
        noise = self.rng.lognormvariate(mu, sigma) if sigma > 0 else 1.0
        dev = self.vram[device] if device is not None else None
        handle_in = inputs.get("buffers")
        out: Buffers | None = None
        own: dict[str, Allocation] = {}  # inputs this stage allocated itself
        temps: list[Allocation] = []
        host_added: list[str] = []
        try:
            if st.host_out:
                # Host results join the partition's host buffers (freed by host_release or
                # when the partition ends); the stage returns that handle.
                if not isinstance(part.host, Buffers):
                    part.host = Buffers(self.host)
                out = part.host
                for buf, size in st.host_out:
                    out.add(buf, self.host.alloc(size, buf, **where))
                    host_added.append(buf)
            for buf, size in st.host_transient:
                temps.append(self.host.alloc(size, buf, **where))
            if st.vram_out:
                out = Buffers(dev)
                for buf, size in st.vram_out:
                    out.add(buf, dev.alloc(size, buf, **where))
            missing = [(b, s) for b, s in st.vram_in if handle_in is None or b not in handle_in]
            if missing:
                # Nothing was pre-staged: allocate the inputs here and do the producer's
                # work (the upload) before our own.
                for buf, size in missing:
                    own[buf] = dev.alloc(size, buf, **where)
                producer = self.resolved.producer_of(missing[0][0])
                if producer is not None:
                    pst = self.resolved.stages[producer]
                    for i, ph in enumerate(pst.phases):
                        yield self.fluid.submit(
                            ph.seconds * noise,
                            self._uses(pst, i, device),
                            f"{name}: {producer} {ph.name}",
                        )
                    self._release_host(part, pst.host_release)
            for i, ph in enumerate(st.phases):
                phase_temps = [dev.alloc(size, buf, **where) for buf, size in ph.transient]
                temps.extend(phase_temps)
                if self.record_phases and len(st.phases) > 1:
                    self._emit("phase_start", rec_ctx, {"stage": name, "phase": ph.name})
                yield self.fluid.submit(ph.seconds * noise, self._uses(st, i, device), f"{name}.{ph.name}")
                for a in phase_temps:
                    a.release()
                    temps.remove(a)
                for buf in ph.release:
                    if buf in own:
                        own.pop(buf).release()
                    elif handle_in is not None:
                        handle_in.release(buf)
                if self.record_phases and len(st.phases) > 1:
                    self._emit("phase_end", rec_ctx, {"stage": name, "phase": ph.name})
            self._release_host(part, st.host_release)
        except OutOfMemory as e:
            for a in list(own.values()) + temps:
                if a.live:
                    a.release()
            if out is not None and out.ledger is not self.host:
                out.free()
            for buf in host_added:
                part.host.release(buf)
            self._emit("oom", rec_ctx, e.as_dict() | {"stage": name})
            self._emit(
                "stage_end",
                rec_ctx,
                {
                    "stage": name,
                    "on": st.on,
                    "device": device,
                    "seconds": self.env.now - start,
                    "error": str(e),
                },
            )
            raise
        for a in list(own.values()) + temps:
            a.release()
        self._emit(
            "stage_end",
            rec_ctx,
            {"stage": name, "on": st.on, "device": device, "seconds": self.env.now - start},
        )
        return out

    @staticmethod
    def _release_host(part: Partition, names: tuple[str, ...]) -> None:
        if names and isinstance(part.host, Buffers):
            for buf in names:
                part.host.release(buf)

    # ------------------------------------------------------------ running

    def run(self, design: Callable[..., Proc]) -> RunResult:
        wall = time.perf_counter()
        daemon = Daemon(self, self.config, self.workload, design)
        main = self.spawn(daemon.run(), "daemon")
        deadlock = None
        try:
            self.env.run(until=main)
        except RuntimeError as e:
            if "No scheduled events left" not in str(e):
                raise
            deadlock = Deadlock(self.env.now, self._waiting())
        except SimgpuError:
            raise
        except Exception as e:  # a design that breaks: name it, no traceback
            raise DesignError(f"design raised {type(e).__name__}: {e}") from e
        proofs = main.value if main.triggered and main.ok else []
        leaks = []
        if deadlock is None:
            for led in self.vram:
                if led.live:
                    tags = ", ".join(a.tag for a in led.allocations())
                    leaks.append(f"{led.pool}: {led.live} bytes still allocated at the end ({tags})")
        return RunResult(
            records=self.records,
            proofs=proofs,
            vram=self.vram,
            host=self.host,
            locks=dict(self.lock_stats),
            end_time=self.env.now,
            wall_seconds=time.perf_counter() - wall,
            deadlock=deadlock,
            leaks=leaks,
            seed=self.seed,
        )

    def _waiting(self) -> dict[str, str]:
        out = {}
        for proc, name in self._names.items():
            if proc.is_alive:
                target = proc.target
                out[name] = getattr(target, "what", None) or repr(target)
        return out


class _RecordingLock(SimLock):
    """A SimLock that records releases too."""

    def __init__(self, rt: SimRuntime, name: str) -> None:
        super().__init__(rt.env, name, rt._who, rt._lock_acquired)
        self._rt = rt

    def release(self) -> None:
        self._rt.record("lock_released", lock=self.name)
        super().release()
