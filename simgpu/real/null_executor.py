"""An executor whose stages do nothing (or sleep): what is left is the runtime itself.

Used to measure RealRuntime's own cost per partition (locks, queues, thread hand-offs,
event records; benchmarks/bench_runtime.py) and to test its mechanics without a prover.
"""

from __future__ import annotations

import time
from typing import Any

GPU_STAGES = ("prestage", "kernels")


class NullExecutor:
    """Every stage returns after `delay` seconds (0: at once), holding no memory."""

    def __init__(self, delay: float = 0.0, vram: int = 1 << 30) -> None:
        self.delay = delay
        self.vram = vram

    def stage_on(self, name: str) -> str:
        return "gpu" if name in GPU_STAGES else "cpu"

    def run_stage(self, name: str, part: Any, device: int | None, inputs: dict[str, Any]) -> None:
        if self.delay:
            time.sleep(self.delay)

    def free(self, handle: Any) -> None:
        pass

    def vram_capacity(self, device: int) -> int:
        return self.vram

    def vram_resident(self, device: int) -> int:
        return 0

    def vram_used(self, device: int) -> int:
        return 0

    def vram_peak(self, device: int) -> int:
        return 0

    def reset_vram_peaks(self) -> None:
        pass

    def vram_estimate(self, part: Any, stages: tuple[str, ...]) -> int:
        return 1 << 20

    def partition_estimate(self, part: Any) -> int:
        return 1

    def partition_release_at_gpu_start(self, part: Any) -> int:
        return 0

    def host_budget(self) -> int:
        return 1 << 40

    def host_capacity(self) -> int:
        return 1 << 40

    def host_rss(self) -> int:
        return 0
