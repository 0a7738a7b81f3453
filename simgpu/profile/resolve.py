"""A profile evaluated at one partition size, and each stage's plan of allocations.

Where a profile is a recipe ("a + b*N bytes"), a resolved profile is the shopping list
for one size n.  A `StagePlan` is one stage's footprint as the ordered steps it takes
(allocate, work, free), given which inputs it was handed: the model's stage interpreter
books these steps in its ledgers, `vram_peak` walks them with a counter, and the prover's
memory plan is checked against them.  One walk, one rule: a stage's allocations, its
peak and its frees are decided here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property


@dataclass(frozen=True)
class Use:
    """How a stage leans on one shared resource: `demand` while it runs at full speed
    (GB/s of memory bandwidth, cores, a fraction of the GPU...) and `bound`, the fraction
    of its unloaded time that this resource limits.  When the resource is oversubscribed
    by a factor f, that fraction of the stage stretches by f (see model.contention)."""

    demand: float
    bound: float


@dataclass(frozen=True)
class ResolvedPhase:
    """A phase at one partition size: its seconds, its transients and staging with their bytes,
    the buffers it releases, and how it leans on each shared resource."""

    name: str
    seconds: float
    transient: tuple[tuple[str, int], ...]
    release: tuple[str, ...]
    uses: Mapping[str, Use]
    #: buffers uploaded before the phase's work (Phase.staging), with their bytes
    staging: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class ResolvedStage:
    """A stage at one partition size: seconds and bytes instead of laws."""

    name: str
    on: str
    phases: tuple[ResolvedPhase, ...]
    noise_cv: float
    host_out: tuple[tuple[str, int], ...]
    vram_out: tuple[tuple[str, int], ...]
    vram_in: tuple[tuple[str, int], ...]
    host_release: tuple[str, ...]
    host_transient: tuple[tuple[str, int], ...]

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.phases)


#: Step operations of a StagePlan.
ALLOC, FREE, WORK, HOST_RELEASE, COPY, STAGE = "alloc", "free", "work", "host_release", "copy", "stage"
#: Bytes per GB, as bandwidths are given (GB/s).
GB = 1e9


def link_seconds(nbytes: int, gbps: float) -> float:
    """Seconds a copy of `nbytes` over the host-to-device link takes at `gbps`, unloaded."""
    return nbytes / (gbps * GB)


def array_bytes(nbytes: int, parts: tuple[float, ...]) -> tuple[int, ...]:
    """A buffer of `nbytes` cut into the arrays `parts` gives the fractions of (empty:
    one array), in whole bytes that add up to `nbytes`."""
    if len(parts) < 2:
        return (nbytes,)
    total = sum(parts)
    cuts = [round(nbytes * sum(parts[: i + 1]) / total) for i in range(len(parts))]
    cuts[-1] = nbytes
    return tuple(b - a for a, b in zip([0, *cuts[:-1]], cuts, strict=True) if b > a)


@dataclass(frozen=True, slots=True)
class Step:
    """One thing a stage does, in order.  ALLOC books `nbytes` of `buffer` in the `pool`
    ("vram" or "host"; `keep`: it outlives the stage, as the stage's output); FREE gives a
    buffer back (the stage's own, a phase's transient, or an input it was handed);
    HOST_RELEASE frees one of the partition's host buffers (synthesis output, by name);
    WORK spends `phase`'s time (`stage` says whose phase: the producer's, when this stage
    must do an input's upload itself); COPY moves `nbytes` from pageable host memory to
    the device (inputs nobody pre-staged from a pinned buffer); STAGE uploads one array
    of a phase's staging, `nbytes` from pinned memory over the link, before the phase's
    transients are allocated.  A device ALLOC's `parts` are the fractions the prover cuts the
    buffer into ([buffer_arrays]; empty: one array), for a caching pool; `whole`: they
    are one call's temporaries, which the prover repeats whole after a refusal (a
    phase's transients: simgpu.prover.cupy_device._guarded), where other buffers'
    arrays are each allocated, and retried, on their own."""

    op: str
    pool: str = ""
    buffer: str = ""
    nbytes: int = 0
    keep: bool = False
    phase: ResolvedPhase | None = None
    stage: str = ""
    parts: tuple[float, ...] = ()
    whole: bool = False


@dataclass(frozen=True)
class StagePlan:
    """A stage's steps, given the inputs it was handed.

    The order: host outputs and host scratch; device outputs; the inputs nobody pre-staged,
    allocated here, with their producer's work (the upload) and its host releases; then per
    phase its transients, its work, its transients freed and the inputs it is done with
    freed; the stage's host releases; last, what it allocated for itself given back.
    """

    stage: ResolvedStage
    steps: tuple[Step, ...]

    def walk_vram(self, live: dict[str, int]) -> int:
        """Apply the plan's device steps to `live` (buffer -> bytes held, in and out) and
        return the peak of its total during the stage."""
        peak = sum(live.values())
        for step in self.steps:
            if step.pool != "vram":
                continue
            if step.op == ALLOC:
                live[step.buffer] = step.nbytes
                peak = max(peak, sum(live.values()))
            elif step.op == FREE:
                live.pop(step.buffer, None)
        return peak

    def peak(self, handed: Mapping[str, int] | None = None) -> int:
        """Peak device bytes during the stage, counting the inputs it was handed."""
        return self.walk_vram(dict(handed or {}))

    def balanced(self) -> bool:
        """Every allocation is freed by the plan itself, except the stage's outputs."""
        held: set[tuple[str, str]] = set()
        for step in self.steps:
            if step.op == ALLOC and not step.keep:
                held.add((step.pool, step.buffer))
            elif step.op == FREE:
                held.discard((step.pool, step.buffer))
        return not held


@dataclass(frozen=True)
class PinCosts:
    """[pins]: page-locking the uploaded host buffers where they lie, per GiB, and how
    much of it the device stands still for (model.interpreter's pin pauses), like a
    loading dock that closes the road while a lorry backs in."""

    lock_s_per_gib: float
    unlock_s_per_gib: float
    lock_stall: float
    unlock_stall: float
    #: how a lock slows with busy cores (a `pressure` sensitivity): pinning pages is host work
    lock_pressure: float = 0.0


@dataclass(frozen=True)
class PinPauses:
    """A profile's [pins] at one size: which host buffers the prover page-locks where
    they land, and the (seconds, stall) of locking them (as they land) and unlocking them
    (once the stage that uploads them has ended): during each, the device's other work
    stands still for `stall` of the time."""

    buffers: frozenset[str]
    lock: tuple[float, float]
    unlock: tuple[float, float]
    #: the lock's `pressure` sensitivity (PinCosts.lock_pressure)
    lock_pressure: float = 0.0


@dataclass(frozen=True)
class Resolved:
    """A profile evaluated at one partition size n."""

    n: int
    buffers: Mapping[str, int]
    stages: Mapping[str, ResolvedStage]
    partition_estimate: int
    vram_resident: int = 0
    #: Of partition_estimate, what the daemon gives back when the partition's GPU work
    #: starts (its a, b, c are on the device by then); the rest when the partition ends.
    release_at_gpu_start: int = 0
    #: GB/s of a copy from pageable host memory ([hardware] h2d_pageable_gbps): what a
    #: stage uploading inputs nobody pre-staged runs at; None: such copies are not modelled.
    pageable_gbps: float | None = None
    #: GB/s of a copy from pinned host memory ([hardware] h2d_gbps): what a phase's
    #: staging is uploaded at.
    h2d_gbps: float = 0.0
    #: [buffer_arrays]: device buffer -> the fractions the prover allocates it in.
    buffer_arrays: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    #: [pins]: what page-locking the uploaded host buffers costs; None: not pinned.
    pin_costs: PinCosts | None = None

    @cached_property
    def upload_stage(self) -> ResolvedStage | None:
        """The stage that does nothing but upload: it makes device buffers in one phase
        that leans on the host-to-device link (prestage); None where there is none."""
        for st in self.stages.values():
            if st.vram_out and len(st.phases) == 1 and "h2d" in st.phases[0].uses:
                return st
        return None

    @cached_property  # asked at every staging upload; the stages never change
    def upload_gpu(self) -> Use | None:
        """How a pinned upload shares the device: the `gpu` use of the upload stage.  A
        prover that sends every pinned copy the one way, as simgpu's does
        (simgpu.gpu.transfer: onto the one stream the workers share), queues a phase's
        staging exactly as it queues prestage's copies, so a STAGE step shares the device
        as calibrate read prestage to (simgpu.calibrate.fit.exclusive_uses).  None where
        no upload stage leans on the device: uploads then use the link alone."""
        st = self.upload_stage
        return None if st is None else st.phases[0].uses.get("gpu")

    @cached_property
    def pins(self) -> PinPauses | None:
        """[pins] at this size: the host buffers the upload stage gives back (what it
        copied from, so what the prover locked), and each pause's (seconds, stall).
        None where the prover does not pin them."""
        costs, st = self.pin_costs, self.upload_stage
        if costs is None or st is None or not st.host_release:
            return None
        sizes = {b: size for s in self.stages.values() for b, size in s.host_out}
        gib = sum(sizes.get(b, 0) for b in st.host_release) / 2**30
        return PinPauses(
            frozenset(st.host_release),
            (costs.lock_s_per_gib * gib, costs.lock_stall),
            (costs.unlock_s_per_gib * gib, costs.unlock_stall),
            costs.lock_pressure,
        )

    def producer_of(self, buffer: str) -> str | None:
        for st in self.stages.values():
            if any(name == buffer for name, _ in st.vram_out):
                return st.name
        return None

    def plan(self, name: str, handed: Collection[str] = ()) -> StagePlan:
        """Stage `name`'s steps when the buffers in `handed` were passed to it (the
        handle of an earlier stage); see StagePlan for the order."""
        st = self.stages[name]
        arrays = self.buffer_arrays

        def vram(buffer: str, size: int, keep: bool = False, whole: bool = False) -> Step:
            # a device buffer comes in the arrays the prover cuts it into (a caching pool's grain)
            return Step(ALLOC, "vram", buffer, size, keep=keep, parts=arrays.get(buffer, ()), whole=whole)

        steps: list[Step] = []
        steps += [Step(ALLOC, "host", b, size, keep=True) for b, size in st.host_out]
        steps += [Step(ALLOC, "host", b, size) for b, size in st.host_transient]
        steps += [vram(b, size, keep=True) for b, size in st.vram_out]
        missing = [(b, size) for b, size in st.vram_in if b not in handed]
        own = [b for b, _ in missing]
        if missing:
            # Nothing was pre-staged: the stage allocates its inputs and does the
            # producer's work (the upload) before its own.
            steps += [vram(b, size) for b, size in missing]
            producer = self.producer_of(missing[0][0])
            if producer is not None:
                pst = self.stages[producer]
                steps += [Step(WORK, phase=ph, stage=producer) for ph in pst.phases]
                steps += [Step(HOST_RELEASE, "host", b) for b in pst.host_release]
            if self.pageable_gbps is not None:
                # ... and the copy is from pageable memory, not a pinned staging buffer
                steps.append(Step(COPY, "vram", nbytes=sum(size for _, size in missing), stage=name))
        for ph in st.phases:
            work = ph
            if ph.staging:
                # The staging first, then the transients: a phase's MSM temporaries are
                # allocated once its bases are on the device.  The upload is part of the
                # phase's measured time, so its work is what is left of it.
                staged = sum(size for _, size in ph.staging)
                steps += [vram(b, size) for b, size in ph.staging]
                # one upload per array, as the prover queues them (each its own copy,
                # with the next array's allocation between): another worker's copies
                # can take the link between two of them (model.interpreter's copy lane)
                steps += [
                    Step(STAGE, "vram", nbytes=part, stage=name)
                    for b, size in ph.staging
                    for part in array_bytes(size, arrays.get(b, ()))
                ]
                work = replace(ph, seconds=max(0.0, ph.seconds - self.staging_seconds(staged)))
            steps += [vram(b, size, whole=True) for b, size in ph.transient]
            steps.append(Step(WORK, phase=work, stage=name))
            steps += [Step(FREE, "vram", b) for b, _ in ph.transient + ph.staging]
            for b in ph.release:
                if b in own:
                    own.remove(b)
                    steps.append(Step(FREE, "vram", b))
                elif b in handed:
                    steps.append(Step(FREE, "vram", b))
        steps += [Step(HOST_RELEASE, "host", b) for b in st.host_release]
        steps += [Step(FREE, "vram", b) for b in own]
        steps += [Step(FREE, "host", b) for b, _ in st.host_transient]
        return StagePlan(st, tuple(steps))

    def staging_seconds(self, nbytes: int) -> float:
        """Unloaded seconds of a phase's staging upload of `nbytes` (pinned, h2d_gbps)."""
        return link_seconds(nbytes, self.h2d_gbps) if self.h2d_gbps > 0 else 0.0

    def vram_peak(self, stages: tuple[str, ...]) -> int:
        """Peak device bytes one partition holds running `stages` in order, each handed
        what the earlier ones left behind (the design frees that handle afterwards)."""
        live: dict[str, int] = {}
        peak = 0
        for name in stages:
            peak = max(peak, self.plan(name, handed=set(live)).walk_vram(live))
        return peak
