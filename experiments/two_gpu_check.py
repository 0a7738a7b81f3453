"""One GPU against two, predicted and run side by side (issue 18): docs/validation-log.md.

For every design (default single-lock and two-lock) and every device count (default 1
and 2) this script runs `simgpu predict` (Monte Carlo over `--runs` seeds) and
`simgpu run` (the real prover, every proof verified) on the same configuration and sets
the throughput and each device's peak VRAM side by side, against the targets: throughput
within 10%, peak VRAM per device within 2%.

    # on a machine with two GPUs, against the profile measured there
    python experiments/two_gpu_check.py --profile h200-cupy --constraints 2^22 --partitions 4
    # without a GPU (CI's machine): the CPU backend, a profile calibrated here first
    python experiments/two_gpu_check.py --backend cpu

With `--backend cpu` and no `--profile`, a profile of this machine's CPU backend is
calibrated first at the run's size (`simgpu calibrate --backend cpu`).  The CPU backend's
"devices" are threads of one process sharing its interpreter lock, so its two-device
throughput says nothing about two GPUs; that run checks that the pipeline runs and that
the per-device memory story matches.  Each command runs in a process of its own (a CuPy
memory pool is per process).  Writes `--out` (JSON: every document, the comparison) and
prints the table as Markdown; `--check` exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

THROUGHPUT_TARGET = 0.10
PEAK_VRAM_TARGET = 0.02


def simgpu(args: list[str]) -> dict[str, Any]:
    """`simgpu ARGS --json` in a process of its own; its JSON document."""
    cmd = [sys.executable, "-m", "simgpu.cli", *args, "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args[:1])} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


def relative(predicted: float | None, measured: float | None) -> float | None:
    if predicted is None or not measured:
        return None
    return abs(predicted - measured) / measured


def calibrate_cpu(where: Path, constraints: str, keys: str) -> str:
    """A profile of this machine's CPU backend at the run's size; its path."""
    out = where / "cpu-backend.toml"
    cmd = [sys.executable, "-m", "simgpu.cli", "calibrate", "--backend", "cpu", "--out", str(out)]
    cmd += ["--sizes", constraints, "--repeats", "2", "--b-g2-threads", "1", "--keys-dir", keys]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"calibrate exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return str(out)


def check(args: argparse.Namespace, profile: str, design: str, devices: int) -> dict[str, Any]:
    """Predict and run one configuration; the two documents and their differences."""
    common = ["--design", design, "--devices", str(devices), "--placement", args.placement]
    common += ["--constraints", args.constraints, "--partitions", str(args.partitions)]
    common += ["--proofs", str(args.proofs), "-j", str(args.concurrency)]
    common += ["--gpu-workers", str(args.gpu_workers), "--partition-workers", str(args.partition_workers)]
    if args.vram:
        common += ["--vram", args.vram]
    predicted = simgpu(["predict", "--profile", profile, "--runs", str(args.runs), *common])
    real = [
        "run",
        "--backend",
        args.backend,
        "--keys-dir",
        args.keys_dir,
        "--b-g2-threads",
        str(args.b_g2_threads),
    ]
    measured = simgpu([*real, *common])
    peaks = [
        (p["peak_vram_bytes"], m["peak_vram_bytes"])
        for p, m in zip(predicted["devices"], measured["devices"], strict=True)
    ]
    thr = relative(predicted["throughput_s_per_proof"], measured["throughput_s_per_proof"])
    peak_err = [relative(p, m) for p, m in peaks]
    ok = (
        thr is not None
        and thr <= THROUGHPUT_TARGET
        and all(e is not None and e <= PEAK_VRAM_TARGET for e in peak_err)
        and measured["verification"]["proofs_verified"] == measured["proofs"]["submitted"]
    )
    return {
        "design": design,
        "devices": devices,
        "throughput_s_per_proof": {
            "predicted": predicted["throughput_s_per_proof"],
            "measured": measured["throughput_s_per_proof"],
            "error": thr,
        },
        "peak_vram_bytes": [
            {"device": d, "predicted": p, "measured": m, "error": e}
            for d, ((p, m), e) in enumerate(zip(peaks, peak_err, strict=True))
        ],
        "busy_frac": [
            [p["busy_frac"], m["busy_frac"]]
            for p, m in zip(predicted["devices"], measured["devices"], strict=True)
        ],
        "oom": [len(predicted["oom_events"]), len(measured["oom_events"])],
        "proofs_verified": measured["verification"]["proofs_verified"],
        "within_targets": ok,
        "predicted": predicted,
        "measured": measured,
    }


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def seconds(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| design | GPUs | s/proof predicted | s/proof measured | error "
        "| peak VRAM per GPU, MiB: predicted / measured (error) | verified | targets |"
    )
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t = r["throughput_s_per_proof"]
        peaks = "; ".join(
            f"gpu{p['device']} {p['predicted'] / 2**20:.2f} / {p['measured'] / 2**20:.2f} ({pct(p['error'])})"
            for p in r["peak_vram_bytes"]
        )
        lines.append(
            f"| {r['design']} | {r['devices']} | {seconds(t['predicted'])} | {seconds(t['measured'])} "
            f"| {pct(t['error'])} | {peaks} | {r['proofs_verified']} "
            f"| {'met' if r['within_targets'] else 'missed'} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="cupy", choices=["cupy", "cpu"])
    ap.add_argument("--profile", help="the profile predicted with (default: h200-cupy; cpu: calibrated here)")
    ap.add_argument("--designs", default="single-lock,two-lock")
    ap.add_argument("--devices", default="1,2", help="device counts, comma-separated")
    ap.add_argument("--placement", default="shared-queue")
    ap.add_argument("--constraints", help="per partition (default: 2^22 on cupy, 2^8 on cpu)")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--proofs", type=int, default=4)
    ap.add_argument("--concurrency", "-j", type=int, default=2)
    ap.add_argument("--gpu-workers", type=int, default=2)
    ap.add_argument("--partition-workers", type=int, default=4)
    ap.add_argument("--b-g2-threads", type=int, default=None, help="default: the cores, or 1 on cpu")
    ap.add_argument("--vram", help="VRAM cap of every GPU, or one per GPU (16G,24G)")
    ap.add_argument("--runs", type=int, default=5, help="Monte Carlo runs per prediction")
    ap.add_argument("--keys-dir", default="out/keys")
    ap.add_argument("--out", type=Path, default=Path("out/two_gpu_check.json"))
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args()
    cpu = args.backend == "cpu"
    args.constraints = args.constraints or ("2^8" if cpu else "2^22")
    if args.b_g2_threads is None:
        import os

        args.b_g2_threads = 1 if cpu else (os.cpu_count() or 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        profile = args.profile or (
            calibrate_cpu(Path(tmp), args.constraints, args.keys_dir) if cpu else "h200-cupy"
        )
        rows = []
        for design in args.designs.split(","):
            for devices in (int(d) for d in args.devices.split(",")):
                print(f"{design} on {devices} device(s) ...", file=sys.stderr, flush=True)
                rows.append(check(args, profile, design, devices))
        if cpu and not args.profile:
            profile = "CPU backend, calibrated here"
    doc = {
        "schema": "simgpu.two_gpu_check/1",
        "backend": args.backend,
        "profile": profile,
        "targets": {"throughput": THROUGHPUT_TARGET, "peak_vram_per_device": PEAK_VRAM_TARGET},
        "rows": rows,
    }
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(table(rows))
    print(f"\nwrote {args.out}", file=sys.stderr)
    return 1 if args.check and not all(r["within_targets"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
