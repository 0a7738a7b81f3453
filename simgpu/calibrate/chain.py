"""The driver's chain: every stage the driver runs, on one fresh partition, in turn.

Like a stopwatch walked down a production line with nothing else on it, it times each
of a partition's driver stages with the device idle at its start: what calibrate's
contention runs call alone and beside each load (simgpu.calibrate.measure,
simgpu.calibrate.lock), and what `experiments/gpu_validation.py measure --anchor`
calls before a run.  A caller watching something while a stage runs passes `around`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

#: Every stage the driver runs, in the order a partition meets them (the device stages'
#: launch loops and copies are the driver's work too): what calibrate times alone and
#: beside each of its loads (simgpu.calibrate.measure.measure_pressure and the rest).
PRESSURE_STAGES = ("prep", "prestage", "kernels", "b_g2_msm", "epilogue")
#: A synthesis result's way back (its phase "transfer": the worker's pickling and the
#: driver's receive), timed under this key beside the stages: host work like the rest.
TRIP = "synthesis.transfer"
#: A page-lock of a partition's a, b, c where they land, timed as a stage of its own beside
#: the pressure load (measure.measure_pressure): the profile's [pins] lock_pressure.
LOCK = "pins.lock"


def result_trip(wall: float, probe: dict[str, float]) -> float:
    """A synthesis result's way back: the stage's wall time less its compute and the
    timing work done in the worker (the executor's StageProbe seconds)."""
    return max(0.0, wall - probe.get("extra", 0.0) - probe.get("compute", 0.0))


def driver_chain(
    ex: Any,
    n: int,
    seed: int,
    around: Callable[[str, Callable[[], Any]], Any] | None = None,
    trip: bool = False,
) -> dict[str, float]:
    """Every driver stage (PRESSURE_STAGES) of one fresh partition in turn, each timed
    with the device idle at its start: stage -> seconds.  `around(stage, run)`, if
    given, runs each stage (to watch something while it runs) and returns its result.
    `trip`: also the partition's synthesis result's way back (TRIP), its wall time less
    its compute, as measure_size splits it (the executor's probe)."""
    from simgpu.prover import handoff
    from simgpu.real.executor import StageProbe
    from simgpu.sched.work import Partition, Proof

    backend = ex.backends[0]
    on_device = 0 if ex.settings.b_g2_on == "gpu" else None
    part = Partition(Proof(seed, 1, n), 0, n)
    kept = ex.probe
    probe = ex.probe = StageProbe() if trip else kept
    try:
        t = time.perf_counter()
        part.host = ex.run_stage("synthesis", part, None, {})
        wall = time.perf_counter() - t
    finally:
        ex.probe = kept
    out: dict[str, float] = {}
    if trip:
        out[TRIP] = result_trip(wall, probe.seconds)
    inputs: dict[str, Any] = {}
    for stage in PRESSURE_STAGES:
        device = on_device if stage == "b_g2_msm" else (0 if stage in ("prestage", "kernels") else None)
        backend.synchronize()

        def run(stage: str = stage, device: int | None = device, inputs: dict[str, Any] = inputs) -> Any:
            return ex.run_stage(stage, part, device, inputs)

        t = time.perf_counter()
        got = around(stage, run) if around is not None else run()
        out[stage] = time.perf_counter() - t
        if stage == "prestage":
            inputs = {"buffers": got}
            handoff.settled()  # its pin unlocked here, not in the kernels (as measure_size)
        elif stage == "kernels":
            inputs["buffers"].free()
            inputs = {}
    part.host.free()
    return out


def spanned(spans: dict[str, tuple[float, float]]) -> Callable[[str, Callable[[], Any]], Any]:
    """An `around` for driver_chain that notes each stage's span (start, end) in `spans`:
    for a caller that reads, afterwards, what something it watched did while each stage
    ran."""

    def around(stage: str, run: Callable[[], Any]) -> Any:
        t = time.perf_counter()
        try:
            return run()
        finally:
            spans[stage] = (t, time.perf_counter())

    return around
