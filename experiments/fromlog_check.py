"""Does a profile fitted from one run's daemon log predict real runs?  (issue #15)

End to end, as an operator would do it, with the `simgpu` command:

1. `simgpu run --timeline fit.log` at concurrency --fit-j: a real run (the GPU prover
   with --backend cupy, or the CPU backend), written as a cuzk daemon log;
2. `simgpu calibrate --from-log fit.log --out fromlog.toml`: the profile fitted from it;
3. `simgpu run` at each concurrency of --other-j, then the fitted configuration once
   more: that repeat says how far the host's own speed moved during the runs, which
   bounds how closely any prediction can match them;
4. `simgpu predict --profile fromlog.toml` for each run's configuration, and the table:
   measured and predicted throughput, the error against the issue's tolerance (5% on
   the fitted run, 10% at another concurrency), and the mean mutex wait both ways.

    python experiments/fromlog_check.py --backend cupy --base h200-cupy     # the H200
    python experiments/fromlog_check.py --backend cpu --constraints 2^10 --partitions 2

Everything (the log, the profile and its report, each run's JSON, the table as
fromlog-check.md) goes to --out.  Exit status 1 if a row misses its tolerance.
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
    """Run the simgpu command; its stdout (its stderr passes through)."""
    r = subprocess.run([sys.executable, "-m", "simgpu.cli", *args], stdout=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): simgpu {' '.join(args)}\n{r.stdout[-2000:]}")
    return r.stdout


def mean_wait(doc: dict) -> float | None:
    """Mean wait for the lock around the kernels (gpu, or two-lock's compute)."""
    total = acq = 0.0
    for name, lk in doc.get("locks", {}).items():
        if name.rsplit("/", 1)[-1] in ("gpu", "compute"):
            total += lk["wait_s_total"]
            acq += lk["acquisitions"]
    return total / acq if acq else None


def ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="cupy", help="cupy (the GPU) or cpu")
    ap.add_argument("--constraints", default="2^20")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--proofs", type=int, default=6)
    ap.add_argument("--fit-j", type=int, default=2, help="concurrency of the run the profile is fitted on")
    ap.add_argument(
        "--other-j", default="1,3", help="other concurrencies to run and predict, comma-separated"
    )
    ap.add_argument("--gpu-workers", type=int, default=2)
    ap.add_argument("--partition-workers", type=int, default=4)
    ap.add_argument("--design", default="single-lock")
    ap.add_argument("--base", default=None, help="base profile of --from-log (default: the seed)")
    ap.add_argument("--runs", type=int, default=10, help="Monte Carlo runs per prediction")
    ap.add_argument("--keys-dir", default="out/keys")
    ap.add_argument("--circuit", default="generic", help="circuit family the runs prove")
    ap.add_argument("--b-g2-threads", type=int, default=None, help="cores one b_g2_msm is split over")
    ap.add_argument("--b-g2-on", default=None, help="where b_g2_msm runs: cpu or gpu")
    ap.add_argument("--out", default="out/fromlog-check")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    common = ["--backend", a.backend, "--constraints", a.constraints, "--partitions", str(a.partitions)]
    common += ["--proofs", str(a.proofs), "--gpu-workers", str(a.gpu_workers)]
    common += ["--partition-workers", str(a.partition_workers), "--design", a.design]
    common += ["--keys-dir", a.keys_dir, "--circuit", a.circuit, "--json"]
    if a.b_g2_threads:
        common += ["--b-g2-threads", str(a.b_g2_threads)]
    if a.b_g2_on:
        common += ["--b-g2-on", a.b_g2_on]
    t0 = time.perf_counter()

    def run(j: int, name: str, *extra: str) -> dict:
        doc = json.loads(simgpu("run", *common, "-j", str(j), *extra))
        (out / f"{name}.json").write_text(json.dumps(doc, indent=1))
        print(f"{name}: -j {j}, {doc['throughput_s_per_proof']:.4f} s/proof", flush=True)
        return doc

    log = out / "fit.log"
    rows = [("fitted run", a.fit_j, run(a.fit_j, "fit-run", "--timeline", str(log)))]
    profile = out / "fromlog.toml"
    report = simgpu(
        "calibrate", "--from-log", str(log), "--out", str(profile), *(["--base", a.base] if a.base else [])
    )
    (out / "fromlog-report.txt").write_text(report)
    print(report, flush=True)
    for j in [int(x) for x in a.other_j.split(",") if x.strip() and int(x) != a.fit_j]:
        rows.append(("other run", j, run(j, f"run-j{j}")))
    rows.append(("fitted run again", a.fit_j, run(a.fit_j, "fit-run-again")))

    predictions: dict[int, dict] = {}
    lines = []
    failed = False
    for what, j, measured in rows:
        if j not in predictions:
            argv = ["predict", "--profile", str(profile), "--design", a.design, "--proofs", str(a.proofs)]
            argv += ["--concurrency", str(j), "--gpu-workers", str(a.gpu_workers)]
            argv += ["--partition-workers", str(a.partition_workers), "--runs", str(a.runs), "--json"]
            predictions[j] = json.loads(simgpu(*argv))
        pred = predictions[j]
        m, p = measured["throughput_s_per_proof"], pred["throughput_s_per_proof"]
        err = (p - m) / m
        tol = {"fitted run": FIT_TOLERANCE, "other run": OTHER_TOLERANCE}.get(what)
        verdict = "-" if tol is None else ("pass" if abs(err) <= tol else "FAIL")
        failed |= verdict == "FAIL"
        lines.append(
            f"| {what} | {j} | {m:.4f} | {p:.4f} | {100 * err:+.1f}% | "
            f"{'-' if tol is None else f'{100 * tol:.0f}%'} | {verdict} | "
            f"{ms(mean_wait(measured))} | {ms(mean_wait(pred))} |"
        )
    first, again = rows[0][2]["throughput_s_per_proof"], rows[-1][2]["throughput_s_per_proof"]
    drift = 100 * (again / first - 1)
    title = "; ".join(
        [
            f"{rows[0][2]['profile']}",
            f"{a.design}, {a.partitions} x {a.constraints} constraints, {a.proofs} proofs",
            f"{a.gpu_workers} GPU workers, {a.partition_workers} partition workers",
            f"profile fitted from the -j {a.fit_j} run's log on base {a.base or 'seed-rtx5070ti'}",
            f"the host's own drift over the runs (the fitted run repeated last): {drift:+.1f}%",
            f"{time.perf_counter() - t0:.0f} s",
        ]
    )
    table = [
        title,
        "",
        "| run | -j | s/proof measured | predicted | error | tolerance | | mutex wait ms | predicted |",
        "|---|---|---|---|---|---|---|---|---|",
        *lines,
    ]
    (out / "fromlog-check.md").write_text("\n".join(table) + "\n")
    print("\n" + "\n".join(table))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
