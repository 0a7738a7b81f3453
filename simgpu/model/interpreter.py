"""The stage interpreter: a stage's plan carried out in simulated time.

Like a stage manager reading cues off a script, it walks the stage's `StagePlan`
(simgpu.profile.resolve) step by step: each ALLOC books bytes in the VRAM or host ledger
(raising VramExhausted / HostRamExhausted at the step that does not fit), each WORK
spends a phase's time through the fluid share of contended resources, each STAGE uploads
an array of a phase's staging over the link (pinned copies in turn: on_link), each FREE
gives bytes back.  Whatever the stage booked is given back if it fails half way, so an
OOM in one stage never strands bytes in a ledger.
"""

from __future__ import annotations

from typing import Any, Protocol

from simgpu.errors import OutOfMemory
from simgpu.events import TaskView, with_doing
from simgpu.ledger import Allocation, Ledger
from simgpu.model import hostmem
from simgpu.model.contention import MAX_FACTOR, FluidShare
from simgpu.profile.resolve import (
    ALLOC,
    COPY,
    FREE,
    HOST_RELEASE,
    STAGE,
    WORK,
    Resolved,
    ResolvedPhase,
    StagePlan,
)
from simgpu.sched.runtime import Proc
from simgpu.sched.work import Partition


class StageHost(Protocol):
    """What the interpreter needs of the runtime it plays a stage in (SimRuntime is
    one): the clock and records, the fluid share, the ledgers, the resolved profile."""

    fluid: FluidShare
    host: Ledger
    vram: list[Ledger]
    resolved: Resolved
    record_phases: bool
    #: (start, end) of the time every device stood still for page-locks (pin_pause)
    pin_stalls: list[tuple[float, float]]
    #: the driver's page-locking desk (a simpy.Resource of capacity 1): one lock or
    #: unlock at a time (pin_pause)
    pin_desk: Any
    #: per device, its copy lane (a simpy.Resource of capacity 1): the pinned uploads
    #: the workers queue on the one stream, one after another (on_link)
    copy_lanes: list[Any]

    def now(self) -> float: ...

    def _emit(self, event: str, ctx: dict[str, Any], fields: dict[str, Any]) -> None: ...

    def stage_noise(self, stage: str) -> float: ...

    def uses_of(self, stage: str, phase: ResolvedPhase, device: int | None) -> tuple: ...

    def task_views(self) -> list[TaskView]: ...


class Buffers:
    """A handle on named allocations in one ledger (a stage's output, or a partition's
    host buffers)."""

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


def run_stage(
    rt: StageHost,
    plan: StagePlan,
    part: Partition,
    device: int | None,
    ctx: dict[str, Any],
    handle_in: Buffers | None,
) -> Proc:
    """Carry out `plan` for `part` on `device`; returns the stage's output handle (device
    outputs, or the partition's host buffers for a stage with host outputs)."""
    st = plan.stage
    name = st.name
    where = {"stage": name, "worker": ctx.get("worker", ""), "proof": part.proof.id, "partition": part.index}
    rec_ctx = dict(ctx, proof=part.proof.id, partition=part.index)
    rt._emit("stage_start", rec_ctx, {"stage": name, "on": st.on, "device": device})
    start = rt.now()
    noise = rt.stage_noise(name)
    dev = rt.vram[device] if device is not None else None
    out: Buffers | None = None
    held: dict[tuple[str, str], Allocation] = {}  # what this stage booked for itself, until freed
    host_added: list[str] = []
    pins = rt.resolved.pins
    locks = unlocks = False  # whether this stage page-locks / unlocks the uploaded buffers
    phased = rt.record_phases and len(st.phases) > 1
    # the lane this stage's pinned uploads queue in, where the prover sends every pinned
    # copy down the one stream (Resolved.upload_gpu); and the stage whose work is one
    # upload queued at once, where its inputs are page-locked where they lie ([pins]):
    # packed through staging blocks instead, its copies leave a block at a time
    lane = rt.copy_lanes[device] if device is not None and rt.resolved.upload_gpu is not None else None
    upload = rt.resolved.upload_stage
    uploader = upload.name if upload is not None and rt.resolved.pins is not None else None
    try:
        for step in plan.steps:
            if step.op == ALLOC:
                if step.pool == "host":
                    a = rt.host.alloc(step.nbytes, step.buffer, **where)
                    if step.keep:
                        # Host results join the partition's host buffers (freed by a later
                        # stage's host release, or when the partition ends).
                        if not isinstance(part.host, Buffers):
                            part.host = Buffers(rt.host)
                        part.host.add(step.buffer, a)
                        host_added.append(step.buffer)
                        locks = locks or (pins is not None and step.buffer in pins.buffers)
                        out = part.host
                    else:
                        held[("host", step.buffer)] = a
                else:
                    assert dev is not None, f"stage {name} allocates device memory with no device"
                    a = dev.alloc(step.nbytes, step.buffer, parts=step.parts, whole=step.whole, **where)
                    if step.keep:
                        if out is None or out.ledger is not dev:
                            out = Buffers(dev)
                        out.add(step.buffer, a)
                    else:
                        held[("vram", step.buffer)] = a
            elif step.op == FREE:
                a = held.pop((step.pool, step.buffer), None)
                if a is not None:
                    a.release()
                elif handle_in is not None:
                    handle_in.release(step.buffer)
            elif step.op == HOST_RELEASE:
                if isinstance(part.host, Buffers):
                    part.host.release(step.buffer)
                unlocks = unlocks or (pins is not None and step.buffer in pins.buffers)
            elif step.op in (COPY, STAGE):
                # COPY: inputs nobody pre-staged, from pageable memory; STAGE: a phase's
                # staging, from pinned memory, queued on the device as prestage's copies are.
                assert device is not None
                pageable = step.op == COPY
                gbps = rt.resolved.pageable_gbps if pageable else rt.resolved.h2d_gbps
                assert gbps, f"stage {name}: a {step.op} step with no bandwidth for it"
                on_stream = None if pageable else rt.resolved.upload_gpu
                work, uses = hostmem.link_upload(step.nbytes, gbps, device, on_stream)
                what = "pageable upload" if pageable else "staging upload"
                yield from on_link(rt, None if pageable else lane, work * noise, uses, f"{name}: {what}")
            elif step.op == WORK:
                ph = step.phase
                assert ph is not None
                own = step.stage == name
                if phased and own:
                    rt._emit("phase_start", rec_ctx, {"stage": name, "phase": ph.name})
                what = f"{name}.{ph.name}" if own else f"{name}: {step.stage} {ph.name}"
                queue = lane if step.stage == uploader else None
                yield from on_link(rt, queue, ph.seconds * noise, rt.uses_of(step.stage, ph, device), what)
                if phased and own:
                    rt._emit("phase_end", rec_ctx, {"stage": name, "phase": ph.name})
    except OutOfMemory as e:
        for a in held.values():
            a.release()
        if out is not None and out.ledger is not rt.host:
            out.free()
        if isinstance(part.host, Buffers):
            for buf in host_added:
                part.host.release(buf)
        # who held the rest, and what each holder's task was doing at this instant
        rt._emit(
            "oom", rec_ctx, e.as_dict() | {"stage": name, "holders": with_doing(e.holders, rt.task_views())}
        )
        rt._emit(
            "stage_end",
            rec_ctx,
            {"stage": name, "on": st.on, "device": device, "seconds": rt.now() - start, "error": str(e)},
        )
        raise
    if pins is not None:
        # as the results land (the lock) and once the upload's copies have left (the
        # unlock), each in its turn at the driver (pin_pause)
        if locks:
            turn = rt.pin_desk.request()
            yield turn  # the receiving thread's call returns once the driver has done it
            pin_pause(rt, *pins.lock, f"{name}: its uploads page-locked", pins.lock_pressure, turn)
        if unlocks:
            # the releaser thread unlocks (simgpu.prover.prepared.release_host_abc): the
            # stage goes on, the pause waits for its turn
            turn = rt.pin_desk.request()
            what = f"{name}: its uploads unlocked"
            turn.callbacks.append(lambda _ev: pin_pause(rt, *pins.unlock, what, 0.0, turn))
    end = {"stage": name, "on": st.on, "device": device, "seconds": rt.now() - start}
    rt._emit("stage_end", rec_ctx, end)
    return out


def on_link(rt: StageHost, lane: Any, work: float, uses: tuple, what: str) -> Proc:
    """Run an upload's `work` through the fluid share, in `lane`'s turn (None: at once).

    Like lorries at a single-lane toll gate, the pinned copies that the workers queue on
    the one stream cross in the order they were queued, each whole: a prestage queued
    just after another worker's first staging array waits for that array to cross, then
    takes the link alone, where sharing the link would have slowed both from the start.
    On the forty-third lease's traces (docs/data/h100-2026-12-06p, experiments/
    stream_timeline.py) a prestage waited 3.5 ms behind the other worker's first
    b_g2_msm array (about 200 MB, queued 0.1-0.9 ms before it), then its own 7.3 ms of
    copies ran unbroken.  Who queues in it: each array of a phase's staging, and the
    prestage whole where a, b, c are page-locked where they lie ([pins]: its thread
    queues their copies in 0.5 ms).  Packed through staging blocks (no [pins]), a
    prestage's copies leave one block at a time as the packers fill them, between
    other copies: it shares the link instead (on the twenty-sixth lease's H200 grid,
    whose prestage packed for 55 ms, sharing reads 4.5% / 10.0%, holding the lane whole
    7.3% / 13.7%).  The lane orders copies among themselves only: the kernels on the
    stream still share it by the device's law (model.contention)."""
    if lane is None:
        yield rt.fluid.submit(work, uses, what)
        return
    with lane.request() as turn:
        yield turn
        yield rt.fluid.submit(work, uses, what)


def pin_pause(
    rt: StageHost, seconds: float, stall: float, what: str, pressure: float = 0.0, turn: Any = None
) -> None:
    """Every device stands still for `stall` of the next `seconds` (longer where busy
    cores slow it, by `pressure`, a sensitivity as a stage's: pinning pages is host
    work): host memory being page-locked or unlocked (cudaHostRegister,
    cudaHostUnregister) holds the driver, and an unlock first waits for the device's
    queued work and then holds it whole (experiments/pin_barrier.py: a 384 MiB unlock
    stalled a spin-kernel stage on another thread, or another stream, by all of its
    6.4 ms).  `turn`: the driver's desk (rt.pin_desk), held until the pause ends.

    The driver does one at a time, like a single loading dock where lorries that arrive
    together back in one after another: the forty-third lease's kernel traces
    (docs/data/h100-2026-12-06p) show locks asked for at once by a proof's results
    ending 14, 28 and 42 ms in, where one alone took 13-14 ms, and the device idle
    through the whole row (92-100% of the time a lock ran, against 23-32% elsewhere).
    So a proof whose four results land together holds every device four locks long.

    It runs beside the stages, not in one: the lock's own time is already in the stage
    that locks, as calibrate timed it.  It starts when the unlock is issued, not after
    its wait for the queued work: the prover launches a few ms ahead (a median wait of
    0.1-4.8 ms on the stored kernel traces, experiments/queue_drain.py), and the device
    works off that queue meanwhile.  A job on each device's `gpu` whose demand leaves
    the jobs bound to it 1 - stall of their speed (all but none at a stall of 1)."""
    host = (("pressure", 1.0, pressure),) if pressure > 0.0 else ()
    start = rt.now()
    jobs = []
    if seconds > 0.0 and stall > 0.0:
        demand = MAX_FACTOR if stall >= 1.0 else stall / (1.0 - stall)
        jobs = [
            rt.fluid.submit(seconds, ((("gpu", d), demand, 0.0), *host), what) for d in range(len(rt.vram))
        ]

        def noted(_ev: Any) -> None:  # for the bottleneck report, as long as it lasted
            rt.pin_stalls.append((start, start + (rt.now() - start) * min(1.0, stall)))

        jobs[0].callbacks.append(noted)
    if turn is not None:
        # a lock that stalls nothing still keeps the driver for its time
        held = jobs[0] if jobs else rt.fluid.submit(seconds, host, what)
        held.callbacks.append(lambda _ev: rt.pin_desk.release(turn))
