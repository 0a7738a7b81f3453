"""A profile evaluated at one partition size: seconds and bytes instead of laws.

Where a profile is a recipe ("a + b*N bytes"), a resolved profile is the shopping list
for one size n.  The model's stage interpreter, `vram_estimate` and the prover's memory
plan all read a stage's footprint from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


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
    name: str
    seconds: float
    transient: tuple[tuple[str, int], ...]
    release: tuple[str, ...]
    uses: Mapping[str, Use]


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

    def producer_of(self, buffer: str) -> str | None:
        for st in self.stages.values():
            if any(name == buffer for name, _ in st.vram_out):
                return st.name
        return None

    def vram_peak(self, stages: tuple[str, ...]) -> int:
        """Peak device bytes one partition holds running `stages` in order, when the
        buffers a stage leaves behind stay until the end of the sequence (the design
        frees its handle afterwards)."""
        live: dict[str, int] = {}
        peak = 0
        for name in stages:
            st = self.stages[name]
            for buf, size in st.vram_in:
                if buf not in live:
                    live[buf] = size  # allocated by the stage itself (nothing pre-staged)
            peak = max(peak, sum(live.values()))
            for ph in st.phases:
                cur = sum(live.values()) + sum(b for _, b in ph.transient)
                peak = max(peak, cur)
                for buf in ph.release:
                    live.pop(buf, None)
            for buf, size in st.vram_out:
                live[buf] = size
                peak = max(peak, sum(live.values()))
        return peak
