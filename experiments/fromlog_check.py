"""Does a profile fitted from one run's daemon log predict real runs?  (issue #15)

End to end, as an operator would do it, with the `simgpu` command:

1. `simgpu run --timeline fit.log` at concurrency --fit-j: a real run (GPU prover with
   --backend cupy, or the CPU backend), written as a cuzk daemon log;
2. `simgpu calibrate --from-log fit.log --out fromlog.toml`: the profile fitted from it;
3. `simgpu run` again at each concurrency of --other-j (the fit run's own measurement
   is the first row), and `simgpu predict --profile fromlog.toml` for each run's
   configuration;
4. the table: measured and predicted throughput, the error, and the issue's tolerance
   (5% on the fitted run, 10% at another concurrency), plus the mean mutex wait.

    python experiments/fromlog_check.py --backend cupy --constraints 2^20 --partitions 4
    python experiments/fromlog_check.py --backend cpu  --constraints 2^10   # no GPU

Files (the logs, the profile, each run's JSON) go to --out (default out/fromlog-check).
Exit status 1 if a row misses its tolerance.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

FIT_TOLERANCE = 0.05
OTHER_TOLERANCE = 0.10


def simgpu(*args: str) -> str:
    """Run the simgpu command; its stdout (stderr passes through)."""
    cmd = [sys.executable, "-m", "simgpu.cli", *args]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(args)}\n{r.stdout[-2000:]}")
    return r.stdout


def mean_wait(doc: dict) -> float | None:
    total = acq = 0.0
    for name, lk in doc.get("locks", {}).items():
        if name.rsplit("/", 1)[-1] in ("gpu", "compute"):
            total += lk["wait_s_total"]
            acq += lk["acquisitions"]
    return total / acq if acq else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="cupy", help="cupy (the GPU) or cpu")
    ap.add_argument("--constraints", default="2^20")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--proofs", type=int, default=6)
    ap.add_argument("--fit-j", type=int, default=2, help="concurrency of the run the profile is fitted on")
    ap.add_argument("--other-j", default="1,3", help="concurrencies to predict and run, comma-separated")
    ap.add_argument("--gpu-workers", type=int, default=2)
    ap.add_argument("--partition-workers", type=int, default=2)
    ap.add_argument("--design", default="single-lock")
    ap.add_argument("--base", default=None, help="base profile of --from-log (default: the seed)")
    ap.add_argument("--runs", type=int, default=10, help="Monte Carlo runs per prediction")
    ap.add_argument("--keys-dir", default="out/keys")
    ap.add_argument("--out", default="out/fromlog-check")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    common = [
        "--backend",
        a.backend,
        "--constraints",
        a.constraints,
        "--partitions",
        str(a.partitions),
        "--proofs",
        str(a.proofs),
        "--gpu-workers",
        str(a.gpu_workers),
        "--partition-workers",
        str(a.partition_workers),
        "--design",
        a.design,
        "--keys-dir",
        a.keys_dir,
        "--json",
    ]
    t0 = time.perf_counter()
    log = out / "fit.log"
    runs = {a.fit_j: json.loads(simgpu("run", *common, "-j", str(a.fit_j), "--timeline", str(log)))}
    (out / f"run-j{a.fit_j}.json").write_text(json.dumps(runs[a.fit_j], indent=1))
    profile = out / "fromlog.toml"
    fit_args = ["calibrate", "--from-log", str(log), "--out", str(profile)]
    report = simgpu(*fit_args, *(["--base", a.base] if a.base else []))
    (out / "fromlog-report.txt").write_text(report)
    print(report)
    others = [int(j) for j in a.other_j.split(",") if j.strip() and int(j) != a.fit_j]
    for j in others:
        runs[j] = json.loads(simgpu("run", *common, "-j", str(j)))
        (out / f"run-j{j}.json").write_text(json.dumps(runs[j], indent=1))
    rows = []
    failed = False
    for j, measured in runs.items():
        pred = json.loads(
            simgpu(
                "predict",
                "--profile",
                str(profile),
                "--design",
                a.design,
                "--proofs",
                str(a.proofs),
                "--concurrency",
                str(j),
                "--gpu-workers",
                str(a.gpu_workers),
                "--partition-workers",
                str(a.partition_workers),
                "--runs",
                str(a.runs),
                "--json",
            )
        )
        m, p = measured["throughput_s_per_proof"], pred["throughput_s_per_proof"]
        err = (p - m) / m
        tol = FIT_TOLERANCE if j == a.fit_j else OTHER_TOLERANCE
        ok = abs(err) <= tol
        failed |= not ok
        mw, pw = mean_wait(measured), mean_wait(pred)
        rows.append(
            f"| {'fitted run' if j == a.fit_j else 'other run'} | {j} | {m:.4f} | {p:.4f} "
            f"| {100 * err:+.1f}% | {100 * tol:.0f}% | {'pass' if ok else 'FAIL'} | "
            f"{'-' if mw is None else f'{mw * 1e3:.1f}'} | {'-' if pw is None else f'{pw * 1e3:.1f}'} |"
        )
    device = runs[a.fit_j]["profile"]
    print(
        f"\n{device}; {a.design}, {a.partitions} x {a.constraints} constraints, {a.proofs} proofs, "
        f"{a.gpu_workers} GPU workers, {a.partition_workers} partition workers; profile fitted from the "
        f"j={a.fit_j} run's log ({time.perf_counter() - t0:.0f} s in all)\n"
    )
    print("| run | -j | s/proof measured | predicted | error | tolerance | | mutex wait ms | predicted |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
