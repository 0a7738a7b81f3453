"""A prediction and a real run of the same configuration, side by side.

`real_run` proves for real (RealRuntime + the prover) and returns the same metrics the
model gives; `compare` lines up the two JSON documents metric by metric with the
relative error of the prediction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simgpu.config import PipelineConfig, Workload
from simgpu.events import RunResult
from simgpu.metrics import RunSummary, summarize
from simgpu.profile import Hardware
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
    from simgpu.real.circuits import CircuitSpec
    from simgpu.real.executor import ProverExecutor
    from simgpu.real.runtime import RealRuntime

    spec = CircuitSpec(constraints=constraints)
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


def machine_differences(hw: Hardware, device_name: str, cpu_cores: int) -> list[str]:
    """How the machine of a real run differs from the one a profile was measured on, in
    what calibrate records and a run can see (the GPU's model, the host's cores).  Hosts
    that match here can still differ: two "H200" machines ran b_g2_msm 1.5x apart
    (docs/validation.md)."""
    out = []
    if device_name != hw.gpu:
        out.append(f"the GPU is {device_name}, not {hw.gpu}")
    if cpu_cores != hw.cpu_cores:
        out.append(f"the host has {cpu_cores} cores, not {hw.cpu_cores}")
    return out


METRICS = (
    ("throughput (s/proof)", lambda d: d["throughput_s_per_proof"]),
    ("latency p50 (s)", lambda d: d["latency_s"]["p50"]),
    ("latency p95 (s)", lambda d: d["latency_s"]["p95"]),
    ("GPU busy", lambda d: d["devices"][0]["busy_frac"]),
    ("peak VRAM (MiB)", lambda d: d["devices"][0]["peak_vram_bytes"] / 2**20),
    ("proofs failed", lambda d: d["proofs"]["failed"]),
    ("OOM", lambda d: bool(d["oom_events"])),
)


def compare(predicted: dict[str, Any], measured: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows of (metric, predicted, measured, relative error of the prediction): the
    pipeline metrics, then each stage's mean duration where both runs have it."""
    rows = []
    metrics = list(METRICS)
    pst, mst = predicted.get("stages", {}), measured.get("stages", {})
    for stage in [s for s in mst if s in pst]:
        metrics.append((f"{stage} mean (s)", lambda d, s=stage: d["stages"][s]["mean_s"]))
    for name, get in metrics:
        p, m = get(predicted), get(measured)
        if isinstance(p, bool) or isinstance(m, bool):
            err = None if p == m else 1.0
        elif p is None or m is None or m == 0:
            err = None
        else:
            err = (p - m) / m
        rows.append({"metric": name, "predicted": p, "measured": m, "rel_error": err})
    return rows
