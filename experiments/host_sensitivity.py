"""How much of each driver stage's time follows the speed of the core it runs on.

On these VMs each core flips between about 1.1x and 1.9x its fastest every 0.1-0.4 s
(experiments/host_modes.py), and a host can run 10% faster during a lease's grid than
during its calibrate (docs/validation-log.md, the twenty-fifth lease).  A CPU stage takes
that change whole; a GPU stage only in its host part, the Python and launches of its
loop.  How large that part is decides how far a host's drift moves a prediction, and it
is not the device share calibrate reads (a stage wholly on the device by the exclusive
reading still launches from the host).

This times every driver stage of a fresh partition over and over, as calibrate's
pressure runs do (simgpu.calibrate.measure's driver chain, the device idle at each
stage's start), with the reference loop (calibrate's measure of the host's speed) run on
the same thread just before and just after each stage.  A sample whose two readings
agree (within AGREE) ran on a core that stayed in one mode; over those samples the
stage's elasticity is the least-squares slope of log(stage time) on log(reference
time): 1 for a stage wholly bound to its core's speed, 0 for one that does not follow
it at all.

    python experiments/host_sensitivity.py 2^20 2^21 --repeats 60 --json out/host-sensitivity.json
    python experiments/host_sensitivity.py 2^10 --backend cpu --repeats 8   # a dry run

`--what synthesis` times synthesis's steps on this thread instead (SYNTHESIS_STEPS), with no
keys to build; `--what both`, both.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from simgpu.calibrate.chain import PRESSURE_STAGES, driver_chain
from simgpu.calibrate.measure import reference_seconds
from simgpu.units import parse_count

#: Two reference readings (before and after a stage) that differ by less than this share
#: of the smaller say the core stayed in one mode through the stage.
AGREE = 0.15


def elasticity(samples: list[tuple[float, float]]) -> tuple[float, float, int]:
    """(slope, r^2, n) of log(seconds) on log(reference) over (reference, seconds)
    samples: how the stage's time scales with its core's speed.  With fewer than three
    samples, or no spread in the references, the slope is nan."""
    pts = [(math.log(r), math.log(s)) for r, s in samples if r > 0 and s > 0]
    if len(pts) < 3:
        return math.nan, math.nan, len(pts)
    mx = statistics.fmean(x for x, _ in pts)
    my = statistics.fmean(y for _, y in pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    syy = sum((y - my) ** 2 for _, y in pts)
    if sxx <= 0:
        return math.nan, math.nan, len(pts)
    sxy = sum((x - mx) * (y - my) for x, y in pts)
    slope = sxy / sxx
    return slope, (sxy * sxy / (sxx * syy) if syy > 0 else math.nan), len(pts)


def measure(ex: Any, n: int, repeats: int, log: Callable[[str], None]) -> dict[str, list[list[float]]]:
    """stage -> [[reference before, seconds, reference after], ...] over `repeats` driver
    chains of fresh partitions (one more first, as a warm-up, not kept)."""
    rows: dict[str, list[list[float]]] = {s: [] for s in PRESSURE_STAGES}

    def around(stage: str, run: Callable[[], Any]) -> Any:
        before = reference_seconds()
        t = time.perf_counter()
        got = run()
        dt = time.perf_counter() - t
        rows[stage].append([before, dt, reference_seconds()])
        return got

    driver_chain(ex, n, 9000)
    for i in range(repeats):
        driver_chain(ex, n, 9001 + i, around=around)
        if (i + 1) % 10 == 0:
            log(f"  {i + 1}/{repeats} chains")
    return rows


#: Synthesis's steps as the pipeline runs them: the witness in a worker, its arrays into
#: shared memory there, and the driver's mapping of them (simgpu.prover.handoff).
SYNTHESIS_STEPS = ("synthesis.compute", "synthesis.hand_off", "synthesis.receive")


def measure_synthesis(spec: Any, repeats: int, log: Callable[[str], None]) -> dict[str, list[list[float]]]:
    """As `measure`, for synthesis's steps (SYNTHESIS_STEPS), run on this thread: in the
    pipeline they run in a worker process, where the driver's readings do not reach."""
    from simgpu.prover import handoff
    from simgpu.prover.synthesis import synthesize

    rows: dict[str, list[list[float]]] = {s: [] for s in SYNTHESIS_STEPS}

    def timed(step: str | bool, fn: Callable[[], Any]) -> Any:
        before = reference_seconds()
        t = time.perf_counter()
        got = fn()
        dt = time.perf_counter() - t
        if step:
            rows[str(step)].append([before, dt, reference_seconds()])
        return got

    tag = f"host-sensitivity-{time.time_ns()}"
    try:
        for i in range(repeats + 1):  # the first warms up: not kept
            keep = i > 0
            synth = timed(keep and SYNTHESIS_STEPS[0], lambda i=i: synthesize(spec, 7000 + i))
            out = timed(keep and SYNTHESIS_STEPS[1], lambda synth=synth: handoff.hand_off(synth, tag))
            del synth
            got = timed(keep and SYNTHESIS_STEPS[2], lambda out=out: handoff.receive(out))
            del got, out
            if keep and i % 10 == 0:
                log(f"  {i}/{repeats} syntheses")
    finally:
        handoff.clear(tag)
    return rows


def summarize(rows: dict[str, list[list[float]]]) -> dict[str, dict[str, float]]:
    """Per stage: its median seconds, the samples kept (references agreeing), the
    references' spread over them (max / min), and the elasticity with its r^2."""
    out = {}
    for stage, rs in rows.items():
        kept = [(statistics.fmean((a, b)), s) for a, s, b in rs if abs(a - b) <= AGREE * min(a, b)]
        slope, r2, k = elasticity(kept)
        refs = [r for r, _ in kept]
        out[stage] = {
            "median_s": statistics.median(s for _, s, _ in rs) if rs else math.nan,
            "kept": k,
            "of": len(rs),
            "ref_spread": max(refs) / min(refs) if refs else math.nan,
            "elasticity": slope,
            "r2": r2,
        }
    return out


def main() -> None:
    from beside_prep import probe_parser  # experiments/: run from there, as its siblings

    from simgpu.profile import find_profile, load_profile
    from simgpu.real.executor import ProverExecutor, ProverSettings

    ap = probe_parser(__doc__, repeats=60)
    ap.add_argument(
        "--what",
        choices=("driver", "synthesis", "both"),
        default="driver",
        help="the driver's stages (a prover set up, its keys built), synthesis's steps on this "
        "thread (no keys), or both",
    )
    args = ap.parse_args()
    prof = load_profile(find_profile(args.profile))
    out = {}
    for size in args.sizes:
        n = parse_count(size, "size", minimum=1)
        settings = ProverSettings.as_calibrated(
            prof, backend=args.backend, partition_workers=1, keys_dir=Path(args.keys_dir)
        )
        rows: dict[str, list[list[float]]] = {}
        if args.what in ("driver", "both"):
            t = time.perf_counter()
            ex = ProverExecutor(settings.spec(n), settings)
            print(f"{size}: set up in {time.perf_counter() - t:.1f} s", flush=True)
            try:
                rows |= measure(ex, n, args.repeats, lambda line: print(line, flush=True))
            finally:
                ex.close()
        if args.what in ("synthesis", "both"):
            rows |= measure_synthesis(settings.spec(n), args.repeats, lambda line: print(line, flush=True))
        got = summarize(rows)
        out[str(n)] = {"rows": rows, "summary": got}
        print(f"| {size} stage | median ms | kept | reference spread | elasticity | r^2 |")
        print("|---|---:|---:|---:|---:|---:|")
        for s, v in got.items():
            print(
                f"| {s} | {1e3 * v['median_s']:.1f} | {v['kept']} of {v['of']} | {v['ref_spread']:.2f} | "
                f"{v['elasticity']:.2f} | {v['r2']:.2f} |",
                flush=True,
            )
        if args.json:  # after each size: a later one cut short keeps the earlier
            Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
