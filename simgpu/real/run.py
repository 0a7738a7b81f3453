"""A real run: the prover set up, driven by RealRuntime with a design, every proof verified.

`real_run` returns the same metrics the model gives (report.metrics), so `simgpu run`
prints what `simgpu predict` prints, and `simgpu validate` can set them side by side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simgpu.config import PipelineConfig, Workload
from simgpu.events import RunResult
from simgpu.report.metrics import RunSummary, summarize
from simgpu.sched.registry import Design


@dataclass
class RealOutcome:
    result: RunResult
    summary: RunSummary
    verification: dict[str, int]
    device_name: str
    vram_capacity: int
    setup_seconds: float | None


def real_run(
    constraints: int, partitions: int, cfg: PipelineConfig, design: Design, settings: Any, log: Any = None
) -> RealOutcome:
    """Prove `cfg.proofs` proofs of `partitions` x `constraints` with `design` for real.
    Every partition proof is verified (ProverExecutor's epilogue)."""
    from simgpu.real.executor import ProverExecutor
    from simgpu.real.runtime import RealRuntime

    spec = settings.spec(constraints)
    if log:
        log(
            f"preparing the prover ({settings.backend}, {constraints:,} constraints): keys, warm-up proof ..."
        )
    executor = ProverExecutor(spec, settings)
    try:
        rt = RealRuntime(
            executor, cfg, Workload(f"groth16-n{constraints}", partitions, constraints), seed=cfg.seed
        )
        result = rt.run(design.fn)
    finally:
        executor.close()
    ok = executor.verified
    verification = {
        "partitions_verified": sum(1 for v in ok.values() if v),
        "partitions_rejected": sum(1 for v in ok.values() if not v),
        "proofs_verified": sum(
            1 for p in result.proofs if not p.failed and all(ok.get((p.id, i)) for i in range(p.partitions))
        ),
    }
    return RealOutcome(
        result,
        summarize(result),
        verification,
        executor.device_name(),
        executor.vram_capacity(0),
        executor.setup_seconds,
    )
