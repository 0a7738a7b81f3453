"""Fit a calibrated profile's resource uses again, from the contention runs it stores,
with the fits of today (simgpu.calibrate.refit.refit_uses).

A profile written before calibrate kept [calibration.contention] (the k-at-once
synthesis times, the cores and the host bandwidth) gets it from the calibrate log of
the same lease, where calibrate printed those lines:

    python experiments/refit_uses.py --profile docs/data/h200-2026-12-01d/h200-cupy.toml \\
        --log docs/data/h200-2026-12-01d/calibrate.log --out /tmp/h200-refit.toml
"""

from __future__ import annotations

import argparse
import json
import re
import tomllib
from pathlib import Path

from simgpu.calibrate.fit import DEVICE_LAWS
from simgpu.calibrate.refit import refit_profile
from simgpu.profile.tomlwrite import dumps


def contention_from_log(text: str) -> dict:
    """[calibration.contention] as calibrate's log printed it."""
    n = re.search(r"contention at n = ([\d,]+)", text)
    bw = re.search(r"host memory bandwidth, (\d+) processes: ([\d.]+) GB/s", text)
    ks = re.findall(r"(\d+) syntheses at once: ([\d.]+) s each", text)
    if not (n and bw and ks):
        raise SystemExit("the log has no contention runs (contention at n = ..., k syntheses at once)")
    return {
        "constraints": int(n.group(1).replace(",", "")),
        "cores": int(bw.group(1)),
        "membw_gbps": float(bw.group(2)),
        "synthesis_at_once": {k: float(v) for k, v in ks},
    }


def _with_record(src: Path, out: Path, fastest: bool, queue: str | None, gil: str | None = None) -> Path:
    """`src` with its calibration record changed as asked, written beside `out` (the
    refit then reads it as it reads any profile)."""
    doc = tomllib.loads(src.read_text())
    cal = doc["calibration"]
    if gil:
        records = [cal["contention"], *cal.get("contention_at", {}).values()]
        for n, got in json.loads(Path(gil).read_text()).items():
            rec = next((r for r in records if int(r["constraints"]) == int(n)), None)
            if rec is None:
                raise SystemExit(f"{src} has no contention record at {n} constraints for --gil-readings")
            rec["gil"] = got["gil"]
            rec["gil_loop_wait"], rec["gil_burst_wait"] = got["waits"]
    if fastest:
        cal.get("contention", {}).pop("pressure_pairs", None)
    if queue:
        pairs = json.loads(Path(queue).read_text())["device_queue"]
        cal["device_queue"] = {k.replace(" ", "_"): [float(a), float(b)] for k, (a, b) in pairs.items()}
    changed = out.with_name(out.stem + ".record.toml")
    changed.parent.mkdir(parents=True, exist_ok=True)
    changed.write_text(dumps(doc, f"{src.name} with its calibration record changed (refit_uses.py)"))
    return changed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", required=True)
    ap.add_argument("--log", help="calibrate's log, for a profile without [calibration.contention]")
    ap.add_argument("--out", required=True)
    ap.add_argument("--gil", action="store_true", help="fit the interpreter lock's uses too")
    ap.add_argument(
        "--device-law",
        choices=DEVICE_LAWS,
        help="the law to fit the device for (default: the profile's)",
    )
    ap.add_argument(
        "--replan-buffers",
        action="store_true",
        help="give the buffers the memory plan's bytes between the measured sizes too",
    )
    ap.add_argument(
        "--pressure-fastest",
        action="store_true",
        help="read each stage's pressure from its fastest calls, as calibrate did before it kept "
        "the calls' pairs (the pairs are dropped from the record)",
    )
    ap.add_argument(
        "--gil-readings",
        help="the interpreter lock's readings of experiments/gil_handover.py --json in place of the "
        "profile's, size by size",
    )
    ap.add_argument(
        "--device-queue",
        help="the device pairings of experiments/device_queue_at.py --json (another size's) in place "
        "of the ones calibrate timed",
    )
    args = ap.parse_args()
    src = Path(args.profile)
    if args.pressure_fastest or args.device_queue or args.gil_readings:
        src = _with_record(src, Path(args.out), args.pressure_fastest, args.device_queue, args.gil_readings)
    has = "contention" in tomllib.loads(src.read_text())["calibration"]
    if not has and not args.log:
        raise SystemExit(f"{src} has no [calibration.contention]: give --log, the lease's calibrate log")
    record = None if has else contention_from_log(Path(args.log).read_text())
    refit_profile(
        src,
        Path(args.out),
        uses=True,
        contention=record,
        gil=args.gil,
        device_law=args.device_law,
        replan=args.replan_buffers,
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
