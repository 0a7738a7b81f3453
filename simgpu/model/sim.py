"""SimRuntime: the runtime protocol on SimPy, with stage costs from a Profile.

Each scheduler generator becomes a SimPy process.  A stage is a process of its own: the
stage interpreter (model.interpreter) walks the stage's plan, booking its footprints in
the VRAM and host ledgers (raising VramExhausted / HostRamExhausted at the allocation
that does not fit) and spending its profile time, stretched by noise and by contention
for shared resources (model.contention).  What both runtimes share (contexts, named
primitives, records, the result) is simgpu.sched.base's.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from typing import Any

import simpy

from simgpu.config import PipelineConfig, Workload
from simgpu.devicepool import POOLS
from simgpu.errors import Deadlock, DesignError, SimgpuError, UserError
from simgpu.events import RunResult, TaskView, doing_text
from simgpu.ledger import host_ledger, vram_ledger
from simgpu.model import hostmem
from simgpu.model.contention import FluidShare
from simgpu.model.interpreter import Buffers, run_stage
from simgpu.model.primitives import Signal, SimLock, SimQueue, SimSemaphore
from simgpu.profile import Profile, ResolvedPhase
from simgpu.profile.resolve import StagePlan
from simgpu.profile.schema import SCALING_RESOURCES
from simgpu.sched.base import RuntimeBase
from simgpu.sched.daemon import Daemon
from simgpu.sched.runtime import Proc
from simgpu.sched.stuck import Wait, diagnose
from simgpu.sched.work import Partition


def _lognormal_params(cv: float) -> tuple[float, float]:
    sigma2 = math.log1p(cv * cv)
    return -sigma2 / 2, math.sqrt(sigma2)


class SimRuntime(RuntimeBase):
    """The runtime protocol on SimPy.  Build one per run."""

    def __init__(
        self,
        profile: Profile,
        config: PipelineConfig,
        workload: Workload,
        seed: int = 0,
        record_phases: bool = True,
    ) -> None:
        super().__init__(config, workload, seed)
        simulated = config.proofs * workload.partitions
        if simulated > MAX_PARTITIONS:
            raise UserError(
                f"{config.proofs:,} proofs x {workload.partitions:,} partitions: at most "
                f"{MAX_PARTITIONS:,} partitions in one simulated run (each takes about 1 ms and "
                f"17 KB of event records); submit fewer proofs or partitions"
            )
        self.profile = profile
        self.record_phases = record_phases
        self.env = simpy.Environment()
        self.resolved = profile.resolve(workload.constraints)
        hw = profile.hardware
        host_ram = config.host_ram or hw.host_ram  # [hardware] host_ram overrides the profile's
        if host_ram <= hw.host_resident:
            raise UserError(
                f"host RAM of {host_ram:,} bytes is not more than the {hw.host_resident:,} bytes "
                f"resident on the host in profile {profile.name} (raise --host-ram)"
            )
        # each device its own capacity: --vram for every device, one per device, or the profile's
        vrams = [hw.vram if config.vram_of(d) is None else config.vram_of(d) for d in range(config.devices)]
        resident = self.resolved.vram_resident
        for d, vram in enumerate(vrams):
            if vram <= resident:
                on = f" (gpu{d})" if config.devices > 1 else ""
                raise UserError(
                    f"--vram {vram} bytes{on} is not more than the {resident} bytes resident "
                    f"on the device in profile {profile.name}"
                )
        now = self.now
        self.vram = [
            vram_ledger(d, vram, resident, now, self._pool(config.vram_of(d), vram - resident))
            for d, vram in enumerate(vrams)
        ]
        self.host = host_ledger(host_ram, hw.host_resident, clock=now)
        # One driver process drives every device: one interpreter lock, one result channel.
        capacity: dict[Any, float] = {
            "membw": hw.membw_gbps,
            "cores": float(hw.cpu_cores),
            "gil": 1.0,
            "driver_rx": 1.0,
            "pressure": float(hw.cpu_cores),
            "handoff": 1.0,
        }
        for d in range(config.devices):
            capacity[("gpu", d)] = 1.0
            capacity[("h2d", d)] = hw.h2d_gbps
        self.fluid = FluidShare(
            self.env,
            capacity,
            bursty=hostmem.bursty(profile, config.devices),
            scaling=frozenset(SCALING_RESOURCES),
            through=hostmem.links(config.devices),
            thrash=hostmem.thrashing(profile, config.devices),
            conserved=hostmem.shared_by(profile, config.devices, "conserved"),
        )
        self.pin_stalls: list[tuple[float, float]] = []  # model.interpreter.pin_pause
        self.pin_desk = simpy.Resource(self.env, capacity=1)  # model.interpreter.pin_pause
        # per device, the pinned copies' turns on its stream (model.interpreter.on_link)
        self.copy_lanes = [simpy.Resource(self.env, capacity=1) for _ in range(config.devices)]
        self.rng = random.Random(seed)
        self._ctx: dict[simpy.Process, dict[str, Any]] = {}
        self._names: dict[simpy.Process, str] = {}
        self._uses_cache: dict[tuple[str, str, int | None], tuple] = {}
        self._plans: dict[tuple[str, frozenset[str]], StagePlan] = {}
        self._noise = {st.name: _lognormal_params(st.noise_cv) for st in self.resolved.stages.values()}
        too_big = "circuit too big for this profile"
        need = self.resolved.vram_peak(("prestage", "kernels"))
        # On mixed cards a partition may fit only some of them: the run goes ahead, and a
        # partition placed on a card too small runs out of memory there (a prediction).
        if need > max(vrams) - resident:
            raise UserError(
                f"a partition of {workload.constraints:,} constraints needs {need / 2**30:.1f} GiB of "
                f"VRAM at its peak, more than the {(max(vrams) - resident) / 2**30:.1f} GiB free on an "
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

    def _pool(self, cap: int | None, limit: int) -> Any:
        """The device's allocator under a cap (None: the exact ledger).  Uncapped, a
        caching pool grows into the whole card and hands out what it caches again, so
        the exact ledger answers the same."""
        kind = self.profile.hardware.vram_pool
        return None if cap is None or kind == "exact" else POOLS[kind](limit)

    # ------------------------------------------------------------ RuntimeBase

    def now(self) -> float:
        return self.env.now

    def current_context(self) -> dict[str, Any]:
        return self._ctx.setdefault(self.env.active_process, {})

    def _new_lock(self, label: str) -> SimLock:
        return SimLock(self.env, label, self._who, self.lock_acquired, self.lock_released)

    def _new_semaphore(self, label: str, capacity: int) -> SimSemaphore:
        return SimSemaphore(self.env, label, capacity)

    def _new_queue(self, name: str, capacity: int) -> SimQueue:
        return SimQueue(self.env, name, capacity)

    def _who(self) -> tuple[str, dict[str, Any]]:
        p = self.env.active_process
        return self._names.get(p, "?"), dict(self._ctx.get(p, {}))

    # ------------------------------------------------------------ protocol

    def spawn(self, proc: Proc, name: str, **context: Any) -> simpy.Process:
        ctx = self.child_context(context)
        p = self.env.process(proc)
        self._ctx[p] = ctx
        self._names[p] = name
        p.what = f"task {name}"
        return p

    def event(self) -> Signal:
        ev = Signal(self.env)
        ev.what = "a partition to finish"
        return ev

    def sleep(self, seconds: float) -> simpy.Event:
        t = self.env.timeout(max(0.0, seconds))
        t.what = f"a {seconds:.3f}s sleep"
        return t

    def stage(self, name: str, part: Partition, device: int | None, **inputs: Any) -> simpy.Process:
        if name not in self.resolved.stages:
            raise DesignError(f"unknown stage {name!r} (profile has {', '.join(self.resolved.stages)})")
        st = self.resolved.stages[name]
        if st.on == "gpu" and device is None:
            raise DesignError(f"stage {name} runs on a GPU: pass the worker's device")
        handle = inputs.get("buffers")
        handed = frozenset(handle.allocs) if isinstance(handle, Buffers) else frozenset()
        plan = self._plans.get((name, handed))
        if plan is None:  # a stage's plan depends on its name and what it was handed only
            plan = self._plans[(name, handed)] = self.resolved.plan(name, handed=handed)
        ctx = dict(self._ctx.get(self.env.active_process, {}))
        p = self.env.process(run_stage(self, plan, part, device, ctx, handle))
        p.what = f"stage {name}"
        return p

    def free(self, handle: Buffers | None) -> None:
        if handle is not None:
            handle.free()

    def vram_capacity(self, device: int) -> int:
        led = self.vram[device]
        return led.capacity - led.resident

    def vram_free(self, device: int) -> int:
        # What a design sees, as the real runtime reports it: the cap less the bytes arrays
        # hold.  A caching pool's cache counts as free here (CuPy's used_bytes leaves it
        # out), though it may not fit an allocation: the ledger's own `free` says that.
        led = self.vram[device]
        return led.capacity - led.used

    def vram_estimate(self, part: Partition, *stages: str) -> int:
        return self.resolved.vram_peak(stages)

    def host_budget(self) -> int:
        return self._host_budget

    def partition_estimate(self, part: Partition) -> int:
        return self.resolved.partition_estimate

    def partition_release_at_gpu_start(self, part: Partition) -> int:
        return self.resolved.release_at_gpu_start

    # ------------------------------------------------------------ for the interpreter

    def stage_noise(self, stage: str) -> float:
        """This run of `stage`'s noise factor (lognormal, mean 1), drawn from the run's seed."""
        mu, sigma = self._noise[stage]
        return self.rng.lognormvariate(mu, sigma) if sigma > 0 else 1.0

    def uses_of(self, stage: str, phase: ResolvedPhase, device: int | None) -> tuple:
        """(resource, demand, bound) of a phase of `stage` run on `device`, for FluidShare."""
        key = (stage, phase.name, device)
        cached = self._uses_cache.get(key)
        if cached is None:
            out = []
            for res, use in phase.uses.items():
                if res in ("gpu", "h2d"):
                    if device is None:
                        continue  # a CPU stage naming a device resource: nothing to share
                    out.append(((res, device), use.demand, use.bound))
                else:
                    out.append((res, use.demand, use.bound))
            cached = self._uses_cache[key] = tuple(out)
        return cached

    # ------------------------------------------------------------ running

    def run(self, design: Callable[..., Proc]) -> RunResult:
        """Run the daemon with `design` until every proof has ended, or the run is found
        stuck: a deadlock (nothing left to happen), or a livelock (simulated time past
        HORIZON, or STALL_EVENTS events in a row with nothing recorded)."""
        wall = time.perf_counter()
        daemon = Daemon(self, self.config, self.workload, design)
        main = self.spawn(daemon.run(), "daemon")
        env = self.env
        stuck: Deadlock | None = None
        quiet, seen = 0, 0
        try:
            while not main.triggered:
                when = env.peek()
                if when == math.inf:
                    stuck = self._stuck("deadlock")
                    break
                if when > HORIZON:
                    stuck = self._stuck("livelock", f"simulated time would pass {HORIZON:.0e} s")
                    break
                env.step()
                if len(self.records) != seen:
                    seen, quiet = len(self.records), 0
                else:
                    quiet += 1
                    # every live task may wake once without recording (a client's start):
                    # the budget grows with them, so a large closed loop is not a livelock
                    limit = STALL_EVENTS + 4 * len(self._names)
                    if quiet > limit:
                        stuck = self._stuck("livelock", f"{limit:,} events in a row recorded nothing")
                        break
        except SimgpuError:
            raise
        except RuntimeError as e:
            if "Invalid yield value" in str(e):
                raise DesignError(_invalid_yield(str(e))) from None
            raise DesignError(f"design raised {type(e).__name__}: {e}") from e
        except Exception as e:  # a design that breaks: name it, no traceback
            raise DesignError(f"design raised {type(e).__name__}: {e}") from e
        if stuck is not None:
            daemon.abandon(f"the run cannot finish ({stuck.kind})")
        if main.triggered and not main.ok:
            raise main.value
        leaks = []
        if stuck is None:
            for led in self.vram:
                if led.live:
                    tags = ", ".join(a.tag for a in led.allocations())
                    leaks.append(f"{led.pool}: {led.live} bytes still allocated at the end ({tags})")
        result = self.result(
            daemon.proofs, self.vram, self.host, time.perf_counter() - wall, deadlock=stuck, leaks=leaks
        )
        result.config = self.config
        result.saturation = {
            r if isinstance(r, str) else f"{r[0]}{r[1]}": spans
            for r, spans in self.fluid.saturation(env.now).items()
        }
        if self.pin_stalls:  # the devices stood still for page-locks ([pins])
            result.saturation["pins"] = [list(x) for x in self.pin_stalls]
        return result

    def task_views(self) -> list[TaskView]:
        """Every live task and what it is doing now (for an OOM's holders)."""
        parked = {
            who: (lock.name, lock.holder) for lock in self._locks.values() for _, who, _ in lock._fifo.waiters
        }
        active = self.env.active_process
        views = []
        for proc, name in self._names.items():
            if not proc.is_alive:
                continue
            target = proc.target
            # a task in a stage: the stage's process, itself parked on a phase's work
            inner = (
                getattr(target.target, "what", None)
                if isinstance(target, simpy.Process) and target is not active
                else None
            )
            lock, holder = parked.get(name, (None, None))
            views.append(
                TaskView(
                    name,
                    self._ctx.get(proc, {}),
                    doing_text(getattr(target, "what", None), lock, holder, inner),
                    lock,
                )
            )
        return views

    def _stuck(self, kind: str, cause: str = "") -> Deadlock:
        waits = []
        for proc, name in self._names.items():
            if proc.is_alive:
                target = proc.target
                what = getattr(target, "what", None) or repr(target)
                holder = getattr(target, "waits_on", None)
                on = holder() if callable(holder) else self._names.get(target)
                waits.append(Wait(name, what, on))
        cycle, roots = diagnose(waits)
        return Deadlock(self.env.now, {w.task: w.what for w in waits}, cycle, roots, kind=kind, cause=cause)


#: Simulated seconds after which a run counts as a livelock (about 31,700 years: no
#: proving pipeline's prediction gets near it, a design that sleeps for ever does).
HORIZON = 1e12
#: Events in a row that record nothing before a run counts as a livelock (plus four per
#: task spawned): every stage start and end, lock, queue and proof change records
#: something, so a run that makes progress never goes near this.
STALL_EVENTS = 200_000
#: Partitions (proofs x partitions per proof) one simulated run may hold: 10,000 proofs of
#: cuzk's 10.  The model takes about 0.9 ms and 17 KB of records a partition (30,000 in
#: 27.6 s and 0.5 GB on a 2-core CI machine), so this bounds a run near 90 s and 2 GB,
#: where a larger one would look hung or exhaust the machine's memory.
MAX_PARTITIONS = 100_000


def _invalid_yield(message: str) -> str:
    """SimPy's 'Invalid yield value' report as one line naming the value and the line."""
    lines = [x.strip() for x in message.strip().splitlines() if x.strip()]
    value = lines[-1].replace("Invalid yield value", "").strip().strip('"')
    where = next((x for x in lines if x.startswith("File ")), "")
    return (
        f"a task yielded {value}, which is not a runtime waitable (a lock's acquire(), a queue's "
        f"put/get, rt.stage(...), rt.sleep(...), a task or an event)" + (f"; {where}" if where else "")
    )
