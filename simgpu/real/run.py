"""A real run: the prover set up, driven by RealRuntime with a design, every proof verified.

`real_run` returns the same metrics the model gives (report.metrics), so `simgpu run`
prints what `simgpu predict` prints, and `simgpu validate` can set them side by side.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from simgpu.config import PipelineConfig, Workload
from simgpu.errors import Interrupted
from simgpu.events import RunResult
from simgpu.report.metrics import RunSummary, summarize
from simgpu.sched.registry import Design


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """A `kill` (SIGTERM) stops a run the way Ctrl-C does: tasks unwind, the worker
    processes are shut down and the report says what finished, instead of the process
    dying with its pools' semaphores left behind."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass
class RealOutcome:
    """What a real run gives back: its records and metrics, how many partition proofs and
    proofs verified, the device and its VRAM capacity (bytes of device 0), and the seconds
    the key setup took (None: the keys were loaded)."""

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
    with _terminate_as_interrupt():
        try:
            executor = ProverExecutor(spec, settings)
        except KeyboardInterrupt:
            raise Interrupted(
                "interrupted by Ctrl-C while the prover was being set up: no proof was started"
            ) from None
        try:
            rt = RealRuntime(
                executor, cfg, Workload(f"groth16-n{constraints}", partitions, constraints), seed=cfg.seed
            )
            if log:
                log(f"proving {cfg.proofs} proof(s) of {partitions} partition(s) with {design.label} ...")
            result = rt.run(design.fn)
        except BaseException:
            executor.close(stop=True)
            raise
        executor.close(stop=result.interrupted is not None)
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


def real_document(
    outcome: RealOutcome, design: Design, backend: str, workload: Workload, cfg: PipelineConfig
) -> dict:
    """The JSON document of a real run: predict's, with the run's own fields (verification,
    why it stopped early if it did, wall and set-up times)."""
    from simgpu.report.document import build_document, meta_of
    from simgpu.report.metrics import aggregate

    profile = f"real {backend}: {outcome.device_name}"
    meta = meta_of("run", design.label, profile, outcome.vram_capacity, workload, cfg)
    meta.extra = {
        "verification": outcome.verification,
        "interrupted": outcome.result.interrupted,
        "runtime": {"wall_s": outcome.result.wall_seconds, "setup_s": outcome.setup_seconds},
    }
    return build_document(meta, aggregate([outcome.summary]), [outcome.summary])
