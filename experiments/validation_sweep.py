"""Predictions against real runs on the GPU: docs/validation-log.md (its section on
the CPU-bound prover quotes this script's table at 2^20).

For a calibrated profile (default simgpu/profile/profiles/h200-cupy.toml) this script

1. finds a VRAM cap where the model says two-lock runs out of VRAM with 2-3 GPU
   workers and single-lock does not (the Phase 10 story, on this prover), from the
   profile's footprints alone;
2. runs a set of configurations (designs x GPU workers x VRAM caps x concurrency) both
   ways, `simgpu predict` (Monte Carlo) and `simgpu run` (real GPU, every proof
   verified), and writes the side-by-side table with prediction errors.

The runs validated here are full pipelines; the profile was fitted on stages timed one
by one (`simgpu calibrate`), so no run is used both to fit and to validate.

    python experiments/validation_sweep.py [--profile h200-cupy] [--constraints 2^20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from simgpu.config import PipelineConfig, Workload
from simgpu.model.montecarlo import predict
from simgpu.profile import load_profile
from simgpu.prover import B_G2_THREADS
from simgpu.real.executor import ProverSettings
from simgpu.real.run import real_run
from simgpu.report.compare import compare
from simgpu.report.document import Meta, build_document
from simgpu.report.metrics import aggregate
from simgpu.sched.registry import resolve_design
from simgpu.units import parse_count

ROOT = Path(__file__).resolve().parent.parent
MiB = 1 << 20


def predicted_doc(prof, cfg, wl, design, runs):
    p = predict(prof, cfg, wl, resolve_design(design), runs=runs)
    meta = Meta("predict", design, prof.name, {"name": wl.name}, {})
    return build_document(meta, p.aggregate(), p.summaries)


def find_two_lock_cap(prof, wl, partition_workers, runs=5):
    """Smallest cap (16 MiB steps above one partition's peak) where two-lock OOMs in most
    runs and single-lock never does, for 2 and 3 GPU workers."""
    r = prof.resolve(wl.constraints)
    single = r.vram_resident + r.vram_peak(("prestage", "kernels"))
    for step in range(0, 64):
        cap = single + step * 16 * MiB
        ok = True
        for gw in (2, 3):
            cfg = PipelineConfig(
                proofs=3,
                concurrency=3,
                gpu_workers_per_device=gw,
                partition_workers=partition_workers,
                vram=cap,
            )
            two = predicted_doc(prof, cfg, wl, "two-lock", runs)
            one = predicted_doc(prof, cfg, wl, "single-lock", runs)
            ok &= two["oom_risk"]["p"] >= 0.5 and one["oom_risk"]["p"] == 0.0
        if ok:
            return cap
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default=str(ROOT / "simgpu" / "profile" / "profiles" / "h200-cupy.toml"))
    ap.add_argument("--constraints", default="2^20")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--proofs", type=int, default=3)
    ap.add_argument("--partition-workers", type=int, default=8)
    ap.add_argument("--runs", type=int, default=5, help="Monte Carlo runs per prediction")
    ap.add_argument("--keys-dir", default=str(ROOT / "out" / "keys"))
    ap.add_argument("--out", default=str(ROOT / "out" / "validation-sweep.md"))
    ap.add_argument("--json", default=str(ROOT / "out" / "validation.json"))
    ap.add_argument("--backend", default="cupy")
    ap.add_argument("--limit", type=int, default=0, help="run only the first K configurations")
    args = ap.parse_args()

    prof = load_profile(args.profile)
    n = parse_count(args.constraints, "--constraints", 16)
    wl = Workload(f"groth16-n{n}", args.partitions, n)
    pw = args.partition_workers
    tight = find_two_lock_cap(prof, wl, pw)
    print(
        f"model: two-lock OOMs and single-lock does not at a VRAM cap of "
        f"{'-' if tight is None else f'{tight / MiB:.0f} MiB'}",
        flush=True,
    )
    configs = [
        # design, gpu workers, concurrency, cap (None = the whole card)
        ("single-lock", 1, 1, None),
        ("single-lock", 2, 2, None),
        ("single-lock", 3, 3, None),
        ("split-finalizer", 1, 2, None),
        ("split-finalizer", 2, 2, None),
        ("serial", 2, 2, None),
        ("two-lock-reserve", 2, 2, None),
        ("two-lock", 2, 2, None),
        ("split-finalizer", 2, 3, None),
        ("two-lock", 3, 3, None),
        # caps a little above one partition's peak (1.2x and 2x): tight, yet no OOM
        ("single-lock", 2, 2, "1.2x"),
        ("two-lock", 2, 2, "2x"),
    ]
    if tight is not None:
        configs += [
            ("two-lock", 2, 3, tight),
            ("single-lock", 2, 3, tight),
            ("two-lock", 3, 3, tight),
            ("single-lock", 3, 3, tight),
            ("two-lock-reserve", 3, 3, tight),
        ]
    if args.limit:
        configs = configs[: args.limit]
    r = prof.resolve(n)
    one = r.vram_resident + r.vram_peak(("prestage", "kernels"))
    configs = [
        (d, gw, j, -(-int(one * float(cap[:-1])) // MiB) * MiB if isinstance(cap, str) else cap)
        for d, gw, j, cap in configs
    ]
    rows = []
    for design, gw, j, cap in configs:
        cfg = PipelineConfig(
            proofs=args.proofs, concurrency=j, gpu_workers_per_device=gw, partition_workers=pw, vram=cap
        )
        t = time.perf_counter()
        pred = predicted_doc(prof, cfg, wl, design, args.runs)
        settings = ProverSettings(
            backend=args.backend,
            vram_limit=cap,
            partition_workers=pw,
            b_g2_threads=prof.calibrated_b_g2_threads or B_G2_THREADS,  # as calibrated
            keys_dir=Path(args.keys_dir),
        )
        outcome = real_run(n, args.partitions, cfg, resolve_design(design), settings)
        meta = Meta("run", design, outcome.device_name, {"name": wl.name}, {})
        real = build_document(meta, aggregate([outcome.summary]), [outcome.summary])
        cmp = {c["metric"]: c for c in compare(pred, real)}
        rows.append(
            {
                "design": design,
                "gpu_workers": gw,
                "concurrency": j,
                "vram_cap": cap,
                "comparison": cmp,
                "verified": outcome.verification,
                "seconds": time.perf_counter() - t,
            }
        )
        thr = cmp["throughput (s/proof)"]
        print(
            f"{design:17s} gw={gw} j={j} cap={'-' if cap is None else f'{cap // MiB}M':>6}: "
            f"throughput {thr['predicted'] or 0:.3f} vs {thr['measured'] or 0:.3f} s/proof, "
            f"OOM {cmp['OOM']['predicted']} vs {cmp['OOM']['measured']}, "
            f"verified {outcome.verification['proofs_verified']}",
            flush=True,
        )
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(rows, indent=2, default=float))
    write_markdown(Path(args.out), rows, prof, wl, tight, args)


def _num(x):
    return "-" if x is None else f"{x:.3f}"


def _pct(x):
    return "-" if x is None else f"{100 * x:+.1f}%"


def write_markdown(path: Path, rows, prof, wl, tight, args, cap_searched: bool = True) -> None:
    lines = [
        f"Profile `{prof.name}` ({prof.hardware.gpu}); workload {wl.partitions} partitions x "
        f"{wl.constraints:,} constraints, {args.proofs} proofs per configuration, "
        f"{args.partition_workers} synthesis workers; predictions are the mean of {args.runs} "
        f"Monte Carlo runs; real runs verify every proof.  {time.strftime('%Y-%m-%d')}.",
        "",
        "| design | GPU workers | j | VRAM cap | throughput pred / real (s/proof) | err | p50 err | p95 err "
        "| GPU busy pred / real | peak VRAM pred / real (MiB) | err | OOM pred / real | proofs verified |",
        "|---|---:|---:|---:|---|---:|---:|---:|---|---|---:|---|---:|",
    ]
    thr_err, vram_err, oom_ok = [], [], 0
    for r in rows:
        c = r["comparison"]
        thr, vram = c["throughput (s/proof)"], c["peak VRAM (MiB)"]
        busy = c["GPU busy"]
        if thr["rel_error"] is not None:
            thr_err.append(abs(thr["rel_error"]))
        if vram["rel_error"] is not None:
            vram_err.append(abs(vram["rel_error"]))
        oom_ok += c["OOM"]["predicted"] == c["OOM"]["measured"]
        cap = "card" if r["vram_cap"] is None else f"{r['vram_cap'] / MiB:.0f} MiB"
        lines.append(
            f"| {r['design']} | {r['gpu_workers']} | {r['concurrency']} | {cap} | "
            f"{_num(thr['predicted'])} / {_num(thr['measured'])} | {_pct(thr['rel_error'])} | "
            f"{_pct(c['latency p50 (s)']['rel_error'])} | {_pct(c['latency p95 (s)']['rel_error'])} | "
            f"{busy['predicted']:.2f} / {busy['measured']:.2f} | "
            f"{vram['predicted']:.0f} / {vram['measured']:.0f} | {_pct(vram['rel_error'])} | "
            f"{c['OOM']['predicted']} / {c['OOM']['measured']} | {r['verified']['proofs_verified']} |"
        )
    lines += [
        "",
        f"Median throughput error {100 * statistics.median(thr_err):.1f}% (target 10%), "
        f"median peak-VRAM error {100 * statistics.median(vram_err):.1f}% (target 5%), "
        f"OOM outcome right in {oom_ok} of {len(rows)} configurations."
        if thr_err and vram_err
        else "",
        "",
    ]
    stage_names = ("synthesis", "prep", "prestage", "kernels", "b_g2_msm", "epilogue")
    if any(f"{st} mean (s)" in r["comparison"] for r in rows for st in stage_names):
        lines += [
            "Mean stage times under load, predicted / real (ms), and the prediction's error:",
            "",
            "| design | GPU workers | j | VRAM cap | " + " | ".join(stage_names) + " |",
            "|---|---:|---:|---:|" + "---|" * len(stage_names),
        ]
        for r in rows:
            if not any(f"{st} mean (s)" in r["comparison"] for st in stage_names):
                continue  # a run recorded before reports had stage times
            cells = []
            for st in stage_names:
                c = r["comparison"].get(f"{st} mean (s)")
                cells.append(
                    "-"
                    if c is None
                    else f"{1e3 * c['predicted']:.0f} / {1e3 * c['measured']:.0f} ({_pct(c['rel_error'])})"
                )
            cap = "card" if r["vram_cap"] is None else f"{r['vram_cap'] / MiB:.0f} MiB"
            lines.append(
                f"| {r['design']} | {r['gpu_workers']} | {r['concurrency']} | {cap} | "
                + " | ".join(cells)
                + " |"
            )
        lines.append("")
    if cap_searched:
        found = "none found" if tight is None else f"{tight / MiB:.0f} MiB"
        lines.append(f"Two-lock cap from the model at this size: {found}.")
    path.parent.mkdir(parents=True, exist_ok=True)
    marker_a, marker_b = "<!-- validation-sweep -->", "<!-- /validation-sweep -->"
    text = path.read_text() if path.exists() else "# Validation\n\n" + marker_a + "\n" + marker_b + "\n"
    if marker_a not in text:
        text += "\n" + marker_a + "\n" + marker_b + "\n"
    head, rest = text.split(marker_a, 1)
    _, tail = rest.split(marker_b, 1)
    path.write_text(head + marker_a + "\n" + "\n".join(lines) + "\n" + marker_b + tail)


if __name__ == "__main__":
    main()
