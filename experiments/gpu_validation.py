"""Designs where they differ: the real prover GPU-bound on the H200, predicted and measured.

Two steps, so that the device time goes to measuring only:

    python experiments/gpu_validation.py measure --profile out/h200-cupy.toml --json out/gpu-validation.json
    python experiments/gpu_validation.py predict --json docs/data/<day>/gpu-validation.json

`measure` (on the GPU machine, right after `simgpu calibrate` on the same machine) runs a
grid of configurations for real — designs x GPU workers x VRAM caps x concurrency, at
2^20 and 2^22 constraints and at 2^21, a size not on the calibration ladder — with the
prover settings the profile was calibrated with (circuit family, where b_g2_msm runs,
its split), every proof verified, and repeats some configurations to measure the
run-to-run spread.  One prover is set up per (size, cap) and reused across its
configurations.  The tight VRAM cap is the model's: the smallest at which two-lock runs
out of memory with three GPU workers while single-lock does not.  Each run keeps its
report, the host's speed before and after it, every stage's span (what ran beside what:
experiments/stream_share.py), with --alloc-trace every allocation of the pool, and with
--kernel-trace every kernel and copy on the device with the thread that launched it
(experiments/kernel_trace.py, CUPTI through PyTorch's profiler: the GPU machine's image).

`predict` (anywhere) predicts every measured configuration with the profile and writes
the table to --out (out/gpu-validation.md; a lease's section of docs/validation-log.md
quotes it): throughput, GPU busy, every stage's mean time under
load, peak VRAM and the OOM outcome, each with its error, beside the spread of the
repeats; and checks that every pair of configurations whose real throughputs differ by
more than that spread is ranked the same way by the model.  Two readings set the host's
drift apart from the model's error: `--host-scaled` predicts each run for the all-core
factor during it, `--anchored` each run measured with `--anchor` with its driver stages'
times alone as timed just before it.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import gzip
import itertools
import json
import math
import statistics
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

from simgpu.calibrate.build import HOST_DRIFT_WARN
from simgpu.calibrate.chain import PRESSURE_STAGES, TRIP
from simgpu.config import PipelineConfig, Workload
from simgpu.model.montecarlo import predict
from simgpu.profile import load_profile
from simgpu.report.compare import compare
from simgpu.report.document import build_document, meta_of
from simgpu.sched.registry import resolve_design

ROOT = Path(__file__).resolve().parent.parent
MiB = 1 << 20
STAGES = ("synthesis", "prep", "prestage", "kernels", "b_g2_msm", "epilogue")
STAGE_TARGET = 0.10  # issue #19: each GPU stage's mean under concurrency within 10%
VRAM_TARGET = 0.02  # issue #19: peak VRAM within 2%

#: (label, log2 size, design, GPU workers, concurrency, cap); cap None = the whole card,
#: "tight" = the model's two-lock cap at that size.
GRID: list[tuple[str, int, str, int, int, str | None]] = [
    ("A", 22, "single-lock", 1, 3, None),
    ("B", 22, "single-lock", 2, 3, None),
    ("C", 22, "single-lock", 3, 3, None),
    ("D", 22, "serial", 2, 3, None),
    ("E", 22, "split-finalizer", 2, 3, None),
    ("F", 22, "two-lock-reserve", 2, 3, None),
    ("G", 22, "two-lock", 2, 3, None),
    ("H", 22, "two-lock", 3, 3, "tight"),
    ("I", 22, "single-lock", 3, 3, "tight"),
    ("J", 22, "two-lock-reserve", 3, 3, "tight"),
    ("K", 22, "split-finalizer", 3, 3, "tight"),
    ("L", 20, "single-lock", 2, 3, None),
    ("M", 20, "serial", 2, 3, None),
    ("N", 20, "split-finalizer", 2, 3, None),
    ("O", 20, "two-lock-reserve", 2, 2, None),
    ("P", 20, "two-lock", 3, 3, "tight"),
    ("Q", 21, "single-lock", 2, 3, None),
    ("R", 21, "split-finalizer", 2, 3, None),
]
#: Configurations run three times in all: their spread is the runs' own noise.
REPEATED = ("B", "D", "E")


def config_of(
    args: argparse.Namespace, gw: int, j: int, cap: int | None, retries: int | None = None
) -> PipelineConfig:
    """One configuration of the grid; `retries` (a run's own, where it recorded one, else
    --retries) re-queues a partition after VramExhausted, on the card as in the model."""
    return PipelineConfig(
        proofs=args.proofs,
        concurrency=j,
        gpu_workers_per_device=gw,
        partition_workers=args.partition_workers,
        vram=cap,
        retries=getattr(args, "retries", 0) if retries is None else retries,
    )


def tight_cap(prof: Any, wl: Workload, args: argparse.Namespace) -> int | None:
    """The smallest cap (16 MiB steps above one partition's peak) where the model has
    two-lock with 3 GPU workers run out of VRAM in most runs and single-lock never."""
    r = prof.resolve(wl.constraints)
    one = r.vram_resident + r.vram_peak(("prestage", "kernels"))
    for step in range(64):
        cap = one + step * 16 * MiB
        cfg = config_of(args, 3, 3, cap)
        two = predict(prof, cfg, wl, resolve_design("two-lock"), runs=5).aggregate()
        single = predict(prof, cfg, wl, resolve_design("single-lock"), runs=5).aggregate()
        if two["oom_risk"]["p"] >= 0.6 and single["oom_risk"]["p"] == 0.0:
            return cap
    return None


def tight_mib(spec: str, log_n: int) -> int | None:
    """The tight cap --tight-mib gives at 2^log_n: '2112' for every size, '22=2112,20=735'
    per size (a size not named gets the model's)."""
    if not spec:
        return None
    if "=" not in spec:
        return int(spec)
    caps = dict(part.split("=") for part in spec.split(","))
    return int(caps[str(log_n)]) if str(log_n) in caps else None


def measure(args: argparse.Namespace) -> None:
    from simgpu.real.executor import ProverExecutor, ProverSettings
    from simgpu.real.run import real_document
    from simgpu.real.runtime import RealRuntime
    from simgpu.report.metrics import summarize
    from simgpu.report.trace import stage_rows

    if args.switch_interval:
        # how long a thread may hold the interpreter lock while another waits for it
        # (Python's default: 5 ms)
        sys.setswitchinterval(args.switch_interval)
    if args.map_in_one_call:
        # the mapping before simgpu.prover.address_space: populated, then unmapped, in one
        # call each (experiments/populate_hold.py), to time the two ways on one machine
        from populate_hold import _map_one_call

        from simgpu.prover import handoff

        handoff.map_populated = _map_one_call
    prof = load_profile(args.profile)
    caps: dict[int, int | None] = {}
    grid = [(lab, log_n + args.log_offset, *rest) for lab, log_n, *rest in GRID]
    if args.only:
        grid = [g for g in grid if g[0] in args.only]
    runs = [(g, 1) for g in grid] + [(g, k) for k in (2, 3) for g in grid if g[0] in REPEATED]
    out: list[dict[str, Any]] = []
    groups = itertools.groupby(
        sorted(runs, key=lambda r: (r[0][1], r[0][5] or "")), key=lambda r: r[0][1:6:4]
    )
    for (log_n, cap_kind), members in groups:
        n = 1 << log_n
        wl = Workload(f"groth16-n{n}", args.partitions, n)
        if cap_kind == "tight":
            mib = tight_mib(args.tight_mib, log_n)
            caps.setdefault(n, mib * MiB if mib else tight_cap(prof, wl, args))
            cap = caps[n]
            if cap is None:
                print(f"2^{log_n}: the model finds no two-lock cap; skipping the tight runs", flush=True)
                continue
        else:
            cap = None
        settings = ProverSettings.as_calibrated(
            prof,
            backend=args.backend,
            vram_limit=cap,
            partition_workers=args.partition_workers,
            keys_dir=Path(args.keys_dir),
            **({"abc_upload": args.abc_upload} if args.abc_upload else {}),
        )
        t = time.perf_counter()
        ex = ProverExecutor(settings.spec(n), settings)
        print(
            f"2^{log_n} cap {'card' if cap is None else f'{cap // MiB} MiB'}: set up in "
            f"{time.perf_counter() - t:.1f} s",
            flush=True,
        )
        try:
            for (label, _, design, gw, j, _), repeat in members:
                cfg = config_of(args, gw, j, cap)
                # the driver's stages alone on one partition, just before the run: the
                # host as the run meets it, against calibrate's reading (`--anchor`)
                anchor = _anchor(ex, n, 6000 + len(out)) if args.anchor else None
                ex.verified.clear()
                pools_at_start = _fresh_pools(ex)
                trace = _trace(ex, label in (args.alloc_trace or ()))
                flushes, shortfalls = _flushes(ex), len(_shortfalls(ex))
                uploads = dict(ex.abc_uploads)
                before, synth_before = _host_reference(), _synthesis_reference(settings.circuit)
                t, wall0 = time.perf_counter(), time.time()
                runtime = RealRuntime(ex, cfg, wl, seed=repeat)
                if label in (args.kernel_trace or ()):
                    from kernel_trace import KernelTrace

                    with KernelTrace(ex, args.py_sample) as ktrace:
                        result = runtime.run(resolve_design(design).fn)
                else:
                    ktrace = None
                    result = runtime.run(resolve_design(design).fn)
                wall1 = time.time()
                after, synth_after = _host_reference(), _synthesis_reference(settings.circuit)
                ok = ex.verified
                summary = summarize(result)
                verification = {
                    "partitions_verified": sum(1 for v in ok.values() if v),
                    "partitions_rejected": sum(1 for v in ok.values() if not v),
                    "proofs_verified": sum(
                        1
                        for p in result.proofs
                        if not p.failed and all(ok.get((p.id, i)) for i in range(p.partitions))
                    ),
                }
                outcome = _Outcome(result, summary, verification, ex.device_name(), ex.vram_capacity(0))
                doc = real_document(outcome, resolve_design(design), args.backend, wl, cfg)
                out.append(
                    {
                        "label": label,
                        "repeat": repeat,
                        "constraints": n,
                        "design": design,
                        "gpu_workers": gw,
                        "concurrency": j,
                        "vram_cap": cap,
                        "retries": cfg.retries,
                        "measured": doc,
                        # the pool's cache given back under memory pressure (CupyDevice.flush)
                        "pool_flushes": _flushes(ex) - flushes,
                        # at each failure a flush did not cure: the pool's bytes in arrays
                        # and in its cache (CupyDevice.shortfalls)
                        "pool_shortfalls": _shortfalls(ex)[shortfalls:],
                        # what the last run left in each device's pool, given back before
                        # this one (_fresh_pools): bytes in arrays and cached
                        "pool_at_start": pools_at_start,
                        # how the run's a, b, c reached the device: page-locked where they
                        # landed, or through the staging (ProverExecutor.abc_uploads)
                        "abc_uploads": {w: ex.abc_uploads[w] - uploads[w] for w in uploads},
                        # the host's speed just before and after the run: the seconds of
                        # calibrate's fixed loop (measure.reference_seconds), median of 9
                        "host_reference_s": [before, after],
                        # and the seconds of one small synthesis in the driver (compiled
                        # loops over memory, as synthesis and prep are), fastest of three
                        "host_synthesis_s": [synth_before, synth_after],
                        "switch_interval_s": sys.getswitchinterval(),
                        "mapping": "one call" if args.map_in_one_call else "in steps",
                        # set-up's objects out of the cyclic collector's sight (executor._freeze_setup)
                        "gc_frozen": ex.gc_frozen,
                        # when the run began and ended (unix seconds), to read the all-core
                        # host watcher's samples of its stretch (experiments/host_modes.py)
                        "wall_s": [wall0, wall1],
                        # each driver stage of one partition alone just before the run
                        # (seconds; calibrate's call of it alone, chain.driver_chain)
                        **({"anchor_s": anchor} if anchor is not None else {}),
                    }
                )
                # every stage of every partition, when it ran and on which worker: what ran
                # beside what (experiments/stream_share.py)
                out[-1]["stage_spans"] = stage_rows(result.records)
                if trace is not None:
                    out[-1]["alloc_trace"] = trace.rows
                if ktrace is not None:
                    out[-1]["kernel_trace"] = ktrace.record()
                print(
                    f"{label}{repeat} 2^{log_n} {design:16s} gw={gw} j={j}: "
                    f"{doc['throughput_s_per_proof'] or 0:.3f} s/proof, "
                    f"busy {doc['devices'][0]['busy_frac']:.2f}, "
                    f"OOM {bool(doc['oom_events'])}, verified {verification['proofs_verified']}, "
                    f"flushes {out[-1]['pool_flushes']}, "
                    f"{time.perf_counter() - t:.1f} s",
                    flush=True,
                )
                Path(args.json).write_text(json.dumps(out, indent=1, default=float))
        finally:
            ex.close()


def read_runs(path: str | Path) -> list[dict[str, Any]]:
    """The runs `measure` wrote to a JSON file (.json, or gzipped as .json.gz), as it
    wrote them: what the replays and the timelines of experiments/ read back."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        return json.load(fh)


def _anchor(ex: Any, n: int, seed: int) -> dict[str, float]:
    """Every driver stage of one fresh partition alone, as calibrate calls each alone
    (chain.driver_chain, with the synthesis result's way back): what the host gives
    the stages just before a run, minutes after calibrate read them.  The thirty-second
    lease's grid met a host 10-13% slower than calibrate's ladder (docs/validation-log.md)
    that neither the all-core factor nor one thread's loop read."""
    from simgpu.calibrate.chain import driver_chain

    return {stage: round(s, 6) for stage, s in driver_chain(ex, n, seed, trip=True).items()}


def _host_reference() -> float:
    from simgpu.calibrate.measure import reference_seconds

    return statistics.median(reference_seconds() for _ in range(9))


#: The size of the synthesis timed as the host's speed beside the loop: milliseconds.
SYNTHESIS_REFERENCE_N = 1 << 16


def _synthesis_reference(circuit: str) -> float:
    from simgpu.calibrate.measure import _synth_task

    return min(_synth_task(circuit, SYNTHESIS_REFERENCE_N, 990 + i) for i in range(3))


def _fresh_pools(ex: Any) -> list[dict[str, int]]:
    """Each device's pool as the last run left it (bytes in arrays, bytes cached), then
    its cache given back, so that every run starts as a fresh daemon's would and as
    the model's runs do.  Without this a group's runs shared one pool: its cache,
    split to the last configuration's sizes, carried over, and the capped group lost
    its runs a pass at a time (docs/validation-log.md, the twenty-sixth lease), which the
    OOM rule, reading runs as independent, cannot allow for.  [] without a pool."""
    out = []
    for b in ex.backends:
        pool = getattr(b, "pool", None)
        if pool is None or not hasattr(b, "flush"):
            continue
        in_arrays, total = int(pool.used_bytes()), int(pool.total_bytes())
        b.flush()
        out.append({"device": b.device, "in_arrays": in_arrays, "cached": total - in_arrays})
    return out


def _trace(ex: Any, on: bool) -> Any:
    """A fresh AllocTrace on the executor's devices when `on` (None, and tracing off,
    otherwise): every allocation and free of their pools during the next run, which
    starts with the pools' caches given back (_fresh_pools), so that a replay starts
    where the card does."""
    from simgpu.prover.device import AllocTrace

    trace = AllocTrace() if on else None
    pools = [b for b in ex.backends if hasattr(b, "alloc_trace")]
    for b in pools:
        b.alloc_trace = trace
    return trace if pools else None


def _shortfalls(ex: Any) -> list[dict[str, int]]:
    """Every device's record of failures a flush did not cure, in order ([] without a pool)."""
    return [x for b in ex.backends for x in getattr(b, "shortfalls", [])]


def _flushes(ex: Any) -> int:
    """Cache flushes so far on the executor's devices (0 where the backend has no pool)."""
    return sum(getattr(b, "flushes", 0) for b in ex.backends)


class _Outcome:
    """What real_document reads of a run (a RealOutcome without the set-up time)."""

    def __init__(self, result, summary, verification, device_name, vram_capacity) -> None:
        self.result, self.summary, self.verification = result, summary, verification
        self.device_name, self.vram_capacity, self.setup_seconds = device_name, vram_capacity, None


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def predict_all(args: argparse.Namespace) -> None:
    prof = load_profile(args.profile)
    rows = [r for path in [args.json, *args.more_json] for r in read_runs(path)]
    if args.only:
        rows = [r for r in rows if r["label"] in args.only]
        if not rows:
            raise SystemExit(f"error: no run of {', '.join(args.only)} in the files given")
    for r in rows:
        if r.get("retries"):  # another configuration than the grid's: its own row ("J/r1")
            r["label"] = f"{r['label']}/r{r['retries']}"
    table = []
    predicted: dict[tuple, dict] = {}  # one prediction a configuration: its runs share it
    peaks: dict[tuple, list[float]] = {}
    for r in rows:
        n = r["constraints"]
        retries = r.get("retries", 0)  # runs before --retries kept cuzk's 0
        key = (n, r["design"], r["gpu_workers"], r["concurrency"], r["vram_cap"], retries)
        if key not in predicted:
            wl = Workload(f"groth16-n{n}", args.partitions, n)
            cfg = config_of(args, r["gpu_workers"], r["concurrency"], r["vram_cap"], retries)
            p = predict(prof, cfg, wl, resolve_design(r["design"]), runs=args.runs)
            peaks[key] = [run.peak_vram[0] / MiB for run in p.summaries]
            meta = meta_of("predict", r["design"], prof.name, prof.hardware.vram, wl, cfg)
            predicted[key] = build_document(meta, p.aggregate(), p.summaries)
        pred = predicted[key]
        rows_of = {c["metric"]: c for c in compare(pred, r["measured"])}
        rows_of["OOM"]["p"] = pred["oom_risk"]["p"]  # the share of the model's runs out of memory
        rows_of["peak VRAM (MiB)"]["runs"] = peaks[key]  # each Monte Carlo run's own peak
        rows_of["proofs failed"]["runs"] = [run["failed"] for run in pred["runs"]]
        table.append((r, rows_of))
    lines = _markdown(table, prof, args) + _retried(table)
    print("\n".join(lines))
    _write_between_markers(Path(args.out), lines)


#: A real OOM count is the model's outcome when the model gives it at least this chance.
OOM_PLAUSIBLE = 0.05


def oom_plausible(p: float, k: int, n: int) -> bool:
    """Whether k of n real runs out of memory is an outcome the model's share p of runs
    out of memory gives at least OOM_PLAUSIBLE chance (binomial): p = 0 allows only k = 0,
    p = 1 only k = n, and a race (0 < p < 1) the counts it makes likely enough."""
    return math.comb(n, k) * p**k * (1 - p) ** (n - k) >= OOM_PLAUSIBLE


def like_model(c: dict[str, Any]) -> bool:
    """Whether a real run's OOM outcome is the likelier one of the model's (its share p of
    runs out of memory, above or below one half)."""
    return bool(c["OOM"]["measured"]) == (c["OOM"]["p"] >= 0.5)


def runs_upload(runs: list[dict[str, Any]]) -> str:
    """How the runs' a, b, c reached the device ("pinned", "staged", "mixed"); runs that
    did not count it predate the pins, and went through the staging."""
    ways = {w for r in runs for w, k in r.get("abc_uploads", {"staged": 1}).items() if k}
    return "mixed" if len(ways) > 1 else next(iter(ways), "staged")


def upload_note(calibrated: str | None, runs: list[dict[str, Any]]) -> str:
    """A sentence for the report where the profile measured a, b, c reaching the device
    one way and the runs another: their prestages then differ (transfer.pin_pages)."""
    # a profile that says nothing was not calibrated: its runs take the prover's default
    profile_way, runs_way = calibrated or "pinned", runs_upload(runs)
    if profile_way == runs_way:
        return ""
    return (
        f"  **The profile measured a, b and c {profile_way}, the runs {runs_way}: the prestage and "
        "what it leaves the kernels differ between the two, so read the stages with care.**"
    )


def drift_note(calibration: dict[str, Any]) -> str:
    """A sentence for the report where calibrate warned that the host's speed moved over
    its sizes ([calibration] host_drift above HOST_DRIFT_WARN): the profile's laws then mix
    host speeds, and its errors on any grid carry that (the fifty-third lease: 1.95x)."""
    drift = calibration.get("host_drift")
    if not isinstance(drift, int | float) or drift <= HOST_DRIFT_WARN:
        return ""
    return (
        f"  **Calibrate warned that the host's speed moved {drift:.2f}x over its sizes (a fixed "
        "loop's median, size by size): the profile's laws mix host speeds.**"
    )


def _markdown(table: list, prof: Any, args: argparse.Namespace) -> list[str]:
    first = {}
    for r, c in table:
        first.setdefault(r["label"], []).append((r, c))
    thr_err, first_err, vram_err, oom_ok, mixed, oom_wrong = [], [], [], 0, [], []
    complete_err: list[float] = []  # configurations whose every run completed every proof
    lines = [
        f"Profile `{prof.name}` ({prof.hardware.gpu}, calibrated on circuit "
        f"`{prof.calibrated_circuit}`, b_g2_msm on the {prof.calibrated_b_g2_on} over "
        f"{prof.calibrated_b_g2_threads} cores); {args.partitions} partitions a proof, "
        f"{args.proofs} proofs a "
        f"configuration, {args.partition_workers} synthesis workers; predictions are the mean of "
        f"{args.runs} Monte Carlo runs; every real proof verified.  The real s/proof is the mean "
        "of the configuration's runs (how many: `runs`), and so are the stage means (below); GPU "
        "busy and peak VRAM are those of its first run whose OOM outcome is the model's likelier "
        "one (its first run where none is); the real OOM outcome counts "
        "the runs that ran out of memory."
        + upload_note(prof.calibrated_abc_upload, [r for r, _ in table])
        + drift_note(tomllib.loads(Path(args.profile).read_text()).get("calibration", {})),
        "",
        "| cfg | n | design | GPU workers | j | VRAM cap | runs | s/proof pred / real | err | GPU busy "
        "pred / real | peak VRAM MiB pred / real | err | OOM: model's p / real runs |",
        "|---|---:|---|---:|---:|---:|---:|---|---:|---|---|---:|---|",
    ]
    real: dict[str, float] = {}  # label -> mean real s/proof over its runs
    for label, reps in first.items():
        r, c = reps[0]
        thr, oom = c["throughput (s/proof)"], c["OOM"]
        # peak VRAM and GPU busy from a run of the outcome the model gives: a run that ran
        # out of memory stopped allocating where it failed, so its peak says nothing of the
        # peak of one that completed, and the reverse
        like = next((cc for _, cc in reps if like_model(cc)), c)
        vram, busy = like["peak VRAM (MiB)"], like["GPU busy"]
        vals = [m for _, cc in reps if (m := cc["throughput (s/proof)"]["measured"])]
        ooms = sum(bool(cc["OOM"]["measured"]) for _, cc in reps)
        err = None
        # a throughput where the model expects the configuration to run out of memory
        # counts the few proofs its runs completed: not the prediction being tested
        if vals and thr["predicted"] and oom["p"] < 0.5:
            real[label] = statistics.mean(vals)
            err = thr["predicted"] / real[label] - 1
            thr_err.append(abs(err))
            if not any(cc["proofs failed"]["measured"] for _, cc in reps):
                complete_err.append(abs(err))  # no proof lost to an out-of-memory race
        if thr["rel_error"] is not None and oom["p"] < 0.5:
            first_err.append(abs(thr["rel_error"]))
        if vram["rel_error"] is not None:
            vram_err.append(abs(vram["rel_error"]))
        if 0 < ooms < len(reps):
            mixed.append(label)
        if oom_plausible(oom["p"], ooms, len(reps)):
            oom_ok += 1
        else:
            oom_wrong.append(label)
        cap = "card" if r["vram_cap"] is None else f"{r['vram_cap'] / MiB:.0f}"
        lines.append(
            f"| {label} | 2^{r['constraints'].bit_length() - 1} | {r['design']} | {r['gpu_workers']} | "
            f"{r['concurrency']} | {cap} | {len(reps)} | {thr['predicted'] or 0:.3f} / "
            f"{real.get(label, 0):.3f} | {_pct(err)} | {busy['predicted']:.2f} / {busy['measured']:.2f} | "
            f"{vram['predicted']:.0f} / {vram['measured']:.0f} | {_pct(vram['rel_error'])} | "
            f"{oom['p']:.2f} / {ooms} of {len(reps)} |"
        )
    # The noise the errors stand beside: configurations whose every run completed every
    # proof (where some fail, s/proof counts the few that did: another quantity).
    spreads = {}
    for label, reps in first.items():
        vals = [c["throughput (s/proof)"]["measured"] for _, c in reps]
        if len(vals) > 1 and all(vals) and not any(c["OOM"]["measured"] for _, c in reps):
            spreads[label] = (max(vals) - min(vals)) / statistics.mean(vals)
    spread = max(spreads.values()) if spreads else 0.0
    lines += [
        "",
        f"Throughput error against the mean of the runs: median {100 * statistics.median(thr_err):.1f}%, "
        f"max {100 * max(thr_err):.1f}% over {len(thr_err)} configurations (targets 5% and 12%); "
        + (
            f"over the {len(complete_err)} whose every run completed every proof: median "
            f"{100 * statistics.median(complete_err):.1f}%, max {100 * max(complete_err):.1f}%; "
            if complete_err
            else ""
        )
        + f"against each first run alone: median {100 * statistics.median(first_err):.1f}%, max "
        f"{100 * max(first_err):.1f}%.  Peak VRAM: median {100 * statistics.median(vram_err):.1f}%, "
        f"max {100 * max(vram_err):.1f}% (target 2%).  OOM outcome right in {oom_ok} of "
        f"{len(first)} configurations (the real count of runs out of memory is one the model's "
        f"share p gives at least a {OOM_PLAUSIBLE:.0%} chance)"
        + (f"; wrong: {', '.join(oom_wrong)}" if oom_wrong else "")
        + (f"; mixed from run to run on the card (a race): {', '.join(mixed)}." if mixed else ".")
        if thr_err and vram_err
        else "",
        "",
        "Run-to-run spread of the real throughput, (max - min) / mean over the runs of each "
        "configuration run more than once with every proof completed: "
        + ", ".join(f"{k} {100 * v:.1f}%" for k, v in spreads.items())
        + f"; the largest, {100 * spread:.1f}%, is the noise the errors above stand beside.",
        "",
        *_peak_states(first),
        *_host_speed(table, Path(args.profile)),
        *_anchors(table, prof),
        *_error_by_host_factor(table, args.host_watch, args.calibrate_span),
        *(_host_scaled(table, prof, args) if args.host_scaled else []),
        *(_anchored(table, prof, args) if args.anchored else []),
    ]
    pairs, wrong = 0, []
    for a, b in itertools.combinations(sorted(real), 2):
        (ra, _), (rb, _) = first[a][0], first[b][0]
        ma, mb = real[a], real[b]
        pa = first[a][0][1]["throughput (s/proof)"]["predicted"]
        pb = first[b][0][1]["throughput (s/proof)"]["predicted"]
        if ra["constraints"] != rb["constraints"] or not pa or not pb:
            continue
        if abs(ma - mb) / min(ma, mb) <= spread:
            continue
        pairs += 1
        if (ma < mb) != (pa < pb):
            wrong.append(f"{a}/{b}")
    lines += [
        f"Rankings: of the {pairs} pairs of configurations of one size whose real throughputs differ "
        f"by more than that spread, the model ranks {pairs - len(wrong)} the same way"
        + (f"; not: {', '.join(wrong)}." if wrong else "."),
        "",
        "Mean stage times under load, predicted / real (ms): the real mean is the mean of the "
        "configuration's runs, and beside the error is its own run-to-run spread "
        "((max - min) / mean of the runs' means), the noise a stage's error stands beside:",
        "",
        "| cfg | " + " | ".join(STAGES) + " |",
        "|---|" + "---|" * len(STAGES),
    ]
    within: dict[str, int] = dict.fromkeys(STAGES, 0)
    within_noise: dict[str, int] = dict.fromkeys(STAGES, 0)
    counted: dict[str, int] = dict.fromkeys(STAGES, 0)
    for label, reps in first.items():
        cells = []
        for st in STAGES:
            runs = [m for _, cc in reps if (x := cc.get(f"{st} mean (s)")) and (m := x["measured"])]
            pred = next((x["predicted"] for _, cc in reps if (x := cc.get(f"{st} mean (s)"))), None)
            if not runs or not pred:
                cells.append("-")
                continue
            mean = statistics.mean(runs)
            err = pred / mean - 1
            noise = (max(runs) - min(runs)) / mean
            counted[st] += 1
            within[st] += abs(err) <= STAGE_TARGET
            within_noise[st] += abs(err) <= max(STAGE_TARGET, noise)
            spread = f"; {100 * noise:.0f}%" if len(runs) > 1 else ""
            cells.append(f"{1e3 * pred:.0f} / {1e3 * mean:.0f} ({_pct(err)}{spread})")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Stage means within {100 * STAGE_TARGET:.0f}%: "
        + ", ".join(f"{st} {within[st]} of {counted[st]}" for st in STAGES)
        + f"; within the larger of {100 * STAGE_TARGET:.0f}% and the stage's own spread: "
        + ", ".join(f"{st} {within_noise[st]}" for st in STAGES)
        + ".",
    ]
    return lines


def _retried(table: list) -> list[str]:
    """The runs made with `[run] retries` (measure --retries): per configuration, the
    proofs each run lost against the model's runs, and the runs that lost any.  A
    re-queued partition is synthesised again and meets the pool as the others left it,
    so what retries buy is a property of the race, read here on both sides."""
    by: dict[str, list] = {}
    for r, c in table:
        if r.get("retries"):
            by.setdefault(r["label"], []).append((r, c))
    if not by:
        return []
    lines = [
        "",
        "Runs with retries (a partition re-queued after VramExhausted, `[run] retries`): the "
        "proofs a run lost, the model's mean over its runs against each run on the card; the "
        "share of runs that lost any, the card's count judged as the OOM outcome is (binomial, "
        f"at least {OOM_PLAUSIBLE:.0%} likely); the completed proofs' s/proof.",
        "",
        "| cfg | VRAM cap | retries | runs | proofs lost a run: model mean / card | runs losing any: "
        "model's share / card | as the model's | completed s/proof pred / real |",
        "|---|---:|---:|---:|---|---|---|---|",
    ]
    for label, reps in by.items():
        r, c = reps[0]
        model = c["proofs failed"]["runs"]
        card = [int(cc["proofs failed"]["measured"]) for _, cc in reps]
        share = sum(1 for x in model if x) / len(model)
        losing = sum(1 for x in card if x)
        real = [m for _, cc in reps if (m := cc["throughput (s/proof)"]["measured"])]
        pred = c["throughput (s/proof)"]["predicted"]
        cap = "card" if r["vram_cap"] is None else f"{r['vram_cap'] / MiB:.0f}"
        lines.append(
            f"| {label} | {cap} | {r['retries']} | {len(reps)} | {statistics.mean(model):.2f} / "
            f"{', '.join(map(str, card))} | {share:.2f} / {losing} of {len(card)} | "
            f"{'yes' if oom_plausible(share, losing, len(card)) else '**no**'} | "
            f"{f'{pred:.2f}' if pred else '-'} / {f'{statistics.mean(real):.2f}' if real else '-'} |"
        )
    return lines


def _peak_states(first: dict[str, list]) -> list[str]:
    """Where the model's runs peak at different heights (they ran out of memory at
    different points), the table's prediction is the highest, a worst case; this puts
    each of the card's peaks beside the heights the model's runs reach and how often."""
    lines = []
    for label, reps in first.items():
        model = [round(x) for x in reps[0][1]["peak VRAM (MiB)"].get("runs", [])]
        if len(set(model)) < 2:
            continue
        counts = sorted(collections.Counter(model).items(), key=lambda kv: -kv[1])
        card = [cc["peak VRAM (MiB)"]["measured"] for _, cc in reps]
        near = [sum(abs(m / c - 1) <= VRAM_TARGET for m in model) for c in card]
        lines.append(
            f"- {label}: the model's runs peak at "
            + ", ".join(f"{v} MiB ({n} of {len(model)})" for v, n in counts)
            + "; the card's at "
            + ", ".join(f"{c:.0f}" for c in card)
            + f" MiB, {sum(n > 0 for n in near)} of {len(card)} within {100 * VRAM_TARGET:.0f}% of a "
            "height the model's runs reach (in "
            + ", ".join(f"{n}" for n in near)
            + f" of {len(model)} runs)."
        )
    if not lines:
        return []
    return [
        "Peak VRAM where the model's runs peak at different heights (the table's prediction is "
        "their highest):",
        "",
        *lines,
        "",
    ]


def _host_speed(table: list, profile: Path) -> list[str]:
    """The host's speed during the runs beside calibrate's, as the seconds of one fixed
    loop (measure.reference_seconds): these machines' cores change speed 1.5-2x for
    minutes, and every stage time the profile holds was measured at calibrate's."""
    during = [x * 1e3 for r, _ in table for x in r.get("host_reference_s", [])]
    if not during:
        return []
    cal = tomllib.loads(profile.read_text()).get("calibration", {}).get("measurements", {})
    at = {
        int(m["constraints"]): statistics.median(m["epilogue_ref"]) * 1e3
        for m in cal.values()
        if "epilogue_ref" in m
    }
    synth = [x * 1e3 for r, _ in table for x in r.get("host_synthesis_s", [])]
    also = (
        f"  A 2^{SYNTHESIS_REFERENCE_N.bit_length() - 1} synthesis in the driver during the runs: "
        f"{min(synth):.1f}-{max(synth):.1f} ms, median {statistics.median(synth):.1f}."
        if synth
        else ""
    )
    return [
        "Host speed (a fixed loop's ms; higher is slower): during the runs "
        f"{min(during):.2f}-{max(during):.2f}, median {statistics.median(during):.2f}; during calibrate, "
        + (", ".join(f"at 2^{n.bit_length() - 1} {v:.2f}" for n, v in sorted(at.items())) or "not recorded")
        + "."
        + also,
        "",
        *_error_by_host_speed(table, statistics.median(at.values()) if at else None),
    ]


#: The bins of a run's host speed against calibrate's: the run's slower reading (before or
#: after it) over calibrate's median, up to each bound.
HOST_BINS = ((1.1, "within 10% of calibrate's"), (1.3, "10-30% slower"), (math.inf, "over 30% slower"))


def _tested(c: dict[str, Any]) -> bool:
    """Whether a run's throughput tests the model's: it completed every proof, and the
    model expects its configuration to (where it expects memory to run out, its s/proof
    counts the few proofs a run completes, as with retries at a cap the model refuses)."""
    return not c["proofs failed"]["measured"] and c["OOM"]["p"] < 0.5


def _error_by_host_speed(table: list, cal_ms: float | None) -> list[str]:
    """Each completed run's throughput error, grouped by how much slower than calibrate's
    the host ran during it: a model calibrated on a fast host predicts a slow one fast, and
    this tells that apart from the model's own error."""
    if not cal_ms:
        return []
    bins: dict[str, list[float]] = {name: [] for _, name in HOST_BINS}
    for r, c in table:
        thr, refs = c["throughput (s/proof)"], r.get("host_reference_s")
        if not refs or not thr["measured"] or not thr["predicted"] or not _tested(c):
            continue
        slow = max(refs) * 1e3 / cal_ms
        name = next(name for bound, name in HOST_BINS if slow <= bound)
        bins[name].append(100 * (thr["predicted"] / thr["measured"] - 1))
    rows = [
        f"{name}: {len(v)} runs, median {statistics.median(v):+.1f}% ({min(v):+.1f} to {max(v):+.1f})"
        for name, v in bins.items()
        if v
    ]
    if not rows:
        return []  # no run whose throughput tests the model's
    return [
        "Throughput error of each completed run by the host's speed during it (one thread's "
        "reading before and after the run: the mode its core was in then, see --host-watch): "
        + "; ".join(rows)
        + ".",
        "",
    ]


def _error_by_host_factor(table: list, watch: list[str], span: str) -> list[str]:
    """Each completed run's throughput error, grouped by the host's all-core mean factor
    during it over calibrate's (experiments/host_modes.py): every core sampled side by
    side, where `host_reference_s` is one thread's reading before and after a run."""
    if not watch or not span:
        return []
    from host_modes import mean_factor, read

    rows = [row for f in watch for row in read(Path(f))]
    if not rows:
        return []
    fastest = min(ms for _, _, ms in rows)
    t0, t1 = (float(x) for x in span.split(","))
    cal = [r for r in rows if t0 <= r[0] <= t1]
    if not cal:
        return [f"No all-core host samples between {t0:.0f} and {t1:.0f} (calibrate's stretch).", ""]
    at_cal = mean_factor(cal, fastest)
    bins: dict[str, list[tuple[float, float]]] = {name: [] for _, name in HOST_BINS}
    for r, c in table:
        thr, wall = c["throughput (s/proof)"], r.get("wall_s")
        if not wall or not thr["measured"] or not thr["predicted"] or not _tested(c):
            continue
        during = [x for x in rows if wall[0] <= x[0] <= wall[1]]
        if not during:
            continue
        ratio = mean_factor(during, fastest) / at_cal
        name = next(name for bound, name in HOST_BINS if ratio <= bound)
        bins[name].append((100 * (thr["predicted"] / thr["measured"] - 1), ratio))
    out = [
        f"{name}: {len(v)} runs (host {min(x for _, x in v):.2f}-{max(x for _, x in v):.2f}x calibrate's), "
        f"median {statistics.median(e for e, _ in v):+.1f}%"
        for name, v in bins.items()
        if v
    ]
    return [
        f"All-core host factor during calibrate {at_cal:.3f} (every core's fixed loop over the fastest "
        "sample, experiments/host_modes.py).  Throughput error of each completed run by that factor "
        "during it over calibrate's: " + "; ".join(out) + ".",
        "",
    ]


@dataclasses.dataclass(frozen=True)
class Scaled:
    """A stage time law taking `factor` times as long (a host slower by that much)."""

    law: Any
    factor: float

    def __call__(self, n: int) -> float:
        return self.factor * self.law(n)


def on_host(prof: Any, factor: float, elasticity: dict[str, float] | None = None) -> Any:
    """`prof` on a host `factor` times as slow as the one it was calibrated on: every phase
    takes factor ** e times its time, e its elasticity to its core's speed
    (experiments/host_sensitivity.py), read under "stage.phase" or else under the stage's
    name.  A stage `elasticity` does not name follows the host wholly if it is a CPU stage
    (`on = "cpu"`: synthesis, prep, the epilogue) and not at all if it runs on the GPU.
    Every contention use stays as calibrated."""
    elasticity = elasticity or {}

    def scaled(st: Any) -> Any:
        default = elasticity.get(st.name, 1.0 if st.on == "cpu" else 0.0)

        def phase(ph: Any) -> Any:
            e = elasticity.get(f"{st.name}.{ph.name}", default)
            return ph if e == 0 else dataclasses.replace(ph, time=Scaled(ph.time, factor**e))

        return dataclasses.replace(st, phases=tuple(phase(ph) for ph in st.phases))

    return dataclasses.replace(prof, stages={name: scaled(st) for name, st in prof.stages.items()})


#: The model's phase whose elasticity is the mean of host_sensitivity.py's steps, weighted
#: by their times: synthesis's trip back is its hand-off in the worker and the driver's
#: receive (simgpu.prover.handoff).
TRIP_STEPS = {"synthesis.transfer": ("synthesis.hand_off", "synthesis.receive")}


def read_elasticity(paths: list[str], n: int) -> dict[str, float]:
    """Each stage's (or phase's) elasticity to its core's speed from
    experiments/host_sensitivity.py's JSON files, each at its measured size nearest n (in
    log2); the trip back's from its steps (TRIP_STEPS)."""
    out: dict[str, float] = {}
    medians: dict[str, float] = {}
    for path in paths:
        doc = json.loads(Path(path).read_text())
        size = min(doc, key=lambda k: abs(int(k).bit_length() - n.bit_length()))
        for s, v in doc[size]["summary"].items():
            if not math.isnan(v["elasticity"]):
                out[s], medians[s] = v["elasticity"], v["median_s"]
    for phase, steps in TRIP_STEPS.items():
        if all(s in out for s in steps):
            total = sum(medians[s] for s in steps)
            out[phase] = sum(out[s] * medians[s] for s in steps) / total
    return out


def _anchors(table: list, prof: Any) -> list[str]:
    """The runs' anchors (`measure --anchor`: every driver stage of one partition alone
    just before each run) against the profile's time alone for that stage, size by size:
    the median over the runs of each stage's anchor over the profile's.  Near 1, the grid
    met the host calibrate read; apart from 1, by how much it did not (a stage's misses
    under load are then the host's before they are the model's)."""
    by_size: dict[int, list[dict[str, float]]] = {}
    for r, _ in table:
        if r.get("anchor_s"):
            ratios = anchor_ratios(prof, r["constraints"], r["anchor_s"])
            by_size.setdefault(r["constraints"], []).append(ratios)
    if not by_size:
        return []
    parts = []
    for n, each in sorted(by_size.items()):
        ratios = [
            f"{st} {statistics.median(xs):.2f}x"
            for st in (*PRESSURE_STAGES, TRIP)
            if (xs := [a[st] for a in each if st in a])
        ]
        parts.append(f"2^{n.bit_length() - 1} ({len(each)} runs): {', '.join(ratios)}")
    return [
        "Each driver stage alone just before each run (`--anchor`), median over the runs, "
        "against the profile's time alone: " + "; ".join(parts) + ".",
        "",
    ]


def _per_run(
    table: list, args: argparse.Namespace, profile_for: Any
) -> tuple[dict[str, float], dict[str, dict[str, list[tuple[float, float]]]]]:
    """Each completed run predicted with the profile `profile_for(run)` gives it (None:
    left out), the predictions cached by the profile's key; per configuration, the mean
    of those predictions against the mean of its runs' real throughputs (the error), and
    each stage's (predicted, measured) means per run."""
    got: dict[str, list[tuple[float, float]]] = {}
    # label -> stage -> (predicted for the run, measured) per completed run
    stage_got: dict[str, dict[str, list[tuple[float, float]]]] = {}
    cache: dict[tuple, dict] = {}
    for r, c in table:
        thr = c["throughput (s/proof)"]
        if not thr["measured"] or not _tested(c):
            continue
        made = profile_for(r)
        if made is None:
            continue
        variant, tag = made
        retries = r.get("retries", 0)
        key = (r["constraints"], r["design"], r["gpu_workers"], r["concurrency"], r["vram_cap"], retries, tag)
        if key not in cache:
            n = r["constraints"]
            cfg = config_of(args, r["gpu_workers"], r["concurrency"], r["vram_cap"], retries)
            wl = Workload(f"groth16-n{n}", args.partitions, n)
            p = predict(variant, cfg, wl, resolve_design(r["design"]), runs=args.runs)
            cache[key] = p.aggregate()
        got.setdefault(r["label"], []).append((cache[key]["throughput_s_per_proof"], thr["measured"]))
        for st in STAGES:
            pred = cache[key].get("stages", {}).get(st, {}).get("mean_s")
            real = (c.get(f"{st} mean (s)") or {}).get("measured")
            if pred and real:
                stage_got.setdefault(r["label"], {}).setdefault(st, []).append((pred, real))
    err = {
        label: statistics.mean(p for p, _ in v) / statistics.mean(m for _, m in v) - 1
        for label, v in got.items()
    }
    return err, stage_got


def _error_summary(table: list, err: dict[str, float]) -> str:
    """median and max of the errors, and each by size."""
    size = {r["label"]: r["constraints"].bit_length() - 1 for r, _ in table}
    by_size = ", ".join(
        f"2^{k}: {', '.join(f'{lab} {_pct(e)}' for lab, e in sorted(err.items()) if size[lab] == k)}"
        for k in sorted({size[lab] for lab in err})
    )
    errs = [abs(e) for e in err.values()]
    return (
        f"median {100 * statistics.median(errs):.1f}%, max {100 * max(errs):.1f}% over {len(err)} "
        f"configurations; {by_size}"
    )


def _host_scaled(table: list, prof: Any, args: argparse.Namespace) -> list[str]:
    """Each completed run predicted for the host it ran on (on_host, by the all-core
    factor during it over calibrate's); per configuration, the mean of those predictions
    against the mean of the runs' real throughputs: how much of the error the host's
    drift since calibrate explains, with no parameter fitted."""
    if not args.host_watch or not args.calibrate_span:
        return []
    from host_modes import mean_factor, read

    rows = [row for f in args.host_watch for row in read(Path(f))]
    fastest = min(ms for _, _, ms in rows)
    t0, t1 = (float(x) for x in args.calibrate_span.split(","))
    at_cal = mean_factor([x for x in rows if t0 <= x[0] <= t1], fastest)
    factors: list[float] = []
    elasticity: dict[int, dict[str, float]] = {}

    def profile_for(r: dict) -> tuple[Any, float] | None:
        wall = r.get("wall_s")
        during = [x for x in rows if wall[0] <= x[0] <= wall[1]] if wall else []
        if not during:
            return None
        factor = round(mean_factor(during, fastest) / at_cal, 2)
        factors.append(factor)
        n = r["constraints"]
        if n not in elasticity:  # the files read once a size
            elasticity[n] = read_elasticity(args.host_elasticity, n) if args.host_elasticity else {}
        return on_host(prof, factor, elasticity[n]), factor

    err, stage_got = _per_run(table, args, profile_for)
    if not err:
        return []
    return [
        "Each completed run predicted for the host it ran on (`--host-scaled`: "
        + (
            f"each stage's time scaled by its elasticity ({', '.join(args.host_elasticity)}) to "
            if args.host_elasticity
            else "its CPU stages' times scaled by "
        )
        + "the all-core factor during it over calibrate's, "
        f"{min(factors):.2f}-{max(factors):.2f} here; contention as calibrated): "
        f"{_error_summary(table, err)}.",
        "",
        *_stages_on_host(stage_got),
    ]


def on_anchor(prof: Any, ratios: dict[str, float]) -> Any:
    """`prof` with each driver stage's time alone as a run's anchor read it: every phase
    of a stage named in `ratios` (stage -> the anchor over the profile's time alone) takes
    that ratio times its time, and synthesis's transfer phase the trip's (TRIP); synthesis's
    compute, which no anchor times, stays as calibrated, and so does every contention use."""

    def scaled(st: Any) -> Any:
        def phase(ph: Any) -> Any:
            f = ratios.get(TRIP if st.name == "synthesis" and ph.name == "transfer" else st.name)
            return ph if f is None else dataclasses.replace(ph, time=Scaled(ph.time, f))

        return dataclasses.replace(st, phases=tuple(phase(ph) for ph in st.phases))

    return dataclasses.replace(prof, stages={name: scaled(st) for name, st in prof.stages.items()})


def anchor_ratios(prof: Any, n: int, anchor: dict[str, float]) -> dict[str, float]:
    """Each anchored stage's time just before a run over the profile's time alone at n
    (the trip: synthesis's transfer phase)."""
    res = prof.resolve(n)
    out = {}
    for st in (*PRESSURE_STAGES, TRIP):  # what an anchor (chain.driver_chain) times
        name, i = ("synthesis", 1) if st == TRIP else (st, None)
        if not anchor.get(st) or name not in res.stages:
            continue
        phases = res.stages[name].phases
        alone = phases[i].seconds if i is not None and len(phases) > i else sum(p.seconds for p in phases)
        if alone > 0:
            out[st] = anchor[st] / alone
    return out


def _anchored(table: list, prof: Any, args: argparse.Namespace) -> list[str]:
    """Each completed run that carries an anchor predicted with its driver stages' times
    alone as the anchor read them just before it (on_anchor): what is left of the error
    once the host's drift, as each stage alone met it, is taken out, with no parameter
    fitted.  The anchored runs alone are compared, so configurations run without anchors
    are left out."""

    def profile_for(r: dict) -> tuple[Any, tuple] | None:
        if not r.get("anchor_s"):
            return None
        ratios = anchor_ratios(prof, r["constraints"], r["anchor_s"])
        return on_anchor(prof, ratios), tuple(sorted((k, round(v, 3)) for k, v in ratios.items()))

    err, stage_got = _per_run(table, args, profile_for)
    if not err:
        return []
    plain, _ = _per_run(table, args, lambda r: (prof, "as calibrated") if r.get("anchor_s") else None)
    return [
        "Each anchored run predicted with its driver stages' times alone as its anchor read "
        "them (`--anchored`; synthesis's compute and every contention use as calibrated), "
        f"against those runs alone: {_error_summary(table, err)}.  The same runs predicted "
        f"as calibrated: {_error_summary(table, plain)}.",
        "",
        *_stages_on_host(stage_got),
    ]


def _stages_on_host(got: dict[str, dict[str, list[tuple[float, float]]]]) -> list[str]:
    """Each stage's mean under load with every completed run predicted for the host it
    ran on, against the mean of those runs: how many configurations come within
    STAGE_TARGET, and what is left where they do not (the stages the host's drift does
    not explain)."""
    within: dict[str, int] = dict.fromkeys(STAGES, 0)
    counted: dict[str, int] = dict.fromkeys(STAGES, 0)
    missed: dict[str, list[str]] = {st: [] for st in STAGES}
    for label, stages in got.items():
        for st, pairs in stages.items():
            err = statistics.mean(p for p, _ in pairs) / statistics.mean(m for _, m in pairs) - 1
            counted[st] += 1
            if abs(err) <= STAGE_TARGET:
                within[st] += 1
            else:
                missed[st].append(f"{label} {_pct(err)}")
    if not any(counted.values()):
        return []
    return [
        f"The same, stage by stage: each stage's mean within {100 * STAGE_TARGET:.0f}% in "
        + ", ".join(f"{st} {within[st]} of {counted[st]}" for st in STAGES if counted[st])
        + "; the rest: "
        + "; ".join(f"{st} {', '.join(m)}" for st, m in missed.items() if m)
        + ".",
        "",
    ]


def _write_between_markers(path: Path, lines: list[str]) -> None:
    a, b = "<!-- gpu-validation -->", "<!-- /gpu-validation -->"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = path.read_text() if path.exists() else "# Validation\n"
    if a not in text:
        text += f"\n{a}\n{b}\n"
    head, rest = text.split(a, 1)
    _, tail = rest.split(b, 1)
    path.write_text(head + a + "\n" + "\n".join(lines) + "\n" + b + tail)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("step", choices=("measure", "predict"))
    ap.add_argument("--profile", default=str(ROOT / "simgpu" / "profile" / "profiles" / "h200-cupy.toml"))
    ap.add_argument("--json", default=str(ROOT / "out" / "gpu-validation.json"))
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--proofs", type=int, default=6)
    ap.add_argument("--partition-workers", type=int, default=8)
    ap.add_argument(
        "--retries",
        type=int,
        default=0,
        help="measure: re-queue a partition this many times after VramExhausted ([run] retries; "
        "cuzk's and the grid's 0); predict reads each run's own",
    )
    ap.add_argument(
        "--abc-upload",
        choices=("pinned", "staged"),
        help="measure: how a, b, c reach the device (default: as the profile was calibrated)",
    )
    ap.add_argument(
        "--runs",
        type=int,
        default=40,
        help="Monte Carlo runs per prediction (the OOM rule reads their share out of memory: "
        "10, the default before the twenty-fifth lease, cannot tell 0 from a race of 1 in 50)",
    )
    ap.add_argument("--keys-dir", default=str(ROOT / "out" / "keys"))
    ap.add_argument(
        "--anchor",
        action="store_true",
        help="measure: time every driver stage of one partition alone before each run (anchor_s)",
    )
    ap.add_argument(
        "--out",
        default=str(ROOT / "out" / "gpu-validation.md"),
        help="predict: the markdown file whose <!-- gpu-validation --> block the table replaces "
        "(appended if it has none)",
    )
    ap.add_argument("--backend", default="cupy", help="cpu: a dry run on small sizes (with --log-offset)")
    ap.add_argument("--log-offset", type=int, default=0, help="shift every size by this power of two")
    ap.add_argument(
        "--tight-mib",
        default="",
        help="the tight cap in MiB instead of the model's: one for every size, or per size as 22=2112,20=735",
    )
    ap.add_argument(
        "--only", nargs="*", default=[], help="measure or predict only these configuration labels"
    )
    ap.add_argument(
        "--alloc-trace",
        nargs="*",
        default=[],
        help="record every allocation and free of the device pool in these configurations' runs",
    )
    ap.add_argument(
        "--kernel-trace",
        nargs="*",
        default=[],
        help="record every kernel and copy on the device, and the thread that launched it, in these runs",
    )
    ap.add_argument(
        "--py-sample",
        type=float,
        default=0.0,
        help="with --kernel-trace: sample every thread's Python frame this often, in seconds "
        "(experiments/py_sampler.py)",
    )
    ap.add_argument(
        "--more-json",
        nargs="*",
        default=[],
        help="predict: more measured runs of the same lease, appended to --json's (their repeats pooled)",
    )
    ap.add_argument(
        "--switch-interval",
        type=float,
        default=0.0,
        help="the interpreter's switch interval in seconds for the runs (0: Python's default, 5 ms)",
    )
    ap.add_argument(
        "--map-in-one-call",
        action="store_true",
        help="map and unmap handed-off results in one call each, as before simgpu.prover.address_space",
    )
    ap.add_argument(
        "--host-watch",
        nargs="*",
        default=[],
        help="predict: the all-core host samples of the lease (experiments/host_modes.py watch)",
    )
    ap.add_argument(
        "--host-scaled",
        action="store_true",
        help="predict: also each run for the host it ran on, its CPU stages scaled by the all-core "
        "factor during it over calibrate's (with --host-watch and --calibrate-span)",
    )
    ap.add_argument(
        "--anchored",
        action="store_true",
        help="predict: also each run measured with --anchor with its driver stages' times alone as "
        "its anchor read them (the host's drift as each stage alone met it, taken out)",
    )
    ap.add_argument(
        "--host-elasticity",
        nargs="*",
        default=[],
        help="predict: with --host-scaled, each stage follows the host by its elasticity to its "
        "core's speed, from experiments/host_sensitivity.py's JSON files (default: CPU stages wholly)",
    )
    ap.add_argument(
        "--calibrate-span",
        default="",
        help="predict: calibrate's start and end in unix seconds, T0,T1 (with --host-watch)",
    )
    args = ap.parse_args()
    measure(args) if args.step == "measure" else predict_all(args)


if __name__ == "__main__":
    main()
