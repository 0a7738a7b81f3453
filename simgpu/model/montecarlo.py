"""Seeded replications of one configuration: `predict` with --runs R."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simgpu.config import PipelineConfig, Workload
from simgpu.events import RunResult
from simgpu.model.sim import SimRuntime
from simgpu.profile import Profile
from simgpu.report.metrics import RunSummary, aggregate, summarize
from simgpu.sched.registry import Design

#: The most replications one prediction takes (a 95% interval is already within a few
#: percent at a few thousand).
MAX_RUNS = 100_000


@dataclass
class Prediction:
    """R replications: the first run's full result (for traces and plots) and every
    run's summary."""

    first: RunResult
    summaries: list[RunSummary]

    def aggregate(self) -> dict[str, Any]:
        return aggregate(self.summaries)


def predict(
    profile: Profile, config: PipelineConfig, workload: Workload, design: Design, runs: int = 1
) -> Prediction:
    """Run the daemon with `design` R times, seeds config.seed .. config.seed + R - 1.
    Stage noise makes the runs differ; the same seed gives the same run."""
    first: RunResult | None = None
    summaries = []
    for i in range(runs):
        rt = SimRuntime(profile, config, workload, seed=config.seed + i, record_phases=(i == 0))
        result = rt.run(design.fn)
        if first is None:
            first = result
        summaries.append(summarize(result))
    assert first is not None
    return Prediction(first, summaries)
