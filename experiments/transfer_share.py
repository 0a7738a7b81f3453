"""Measure how much of a synthesis result's trip the driver serializes, into a profile.

A synthesis result comes back to the driver in two halves: the worker pickles it (each
worker its own, all at once), then the driver's one result thread reads it off the pipe
and unpickles it (one result at a time).  `simgpu calibrate` now times the worker's
pickling with every synthesis and gives the transfer phase's `driver_rx` use the
serialized share as its bound.  A profile calibrated before that charges the whole trip
to the result thread (bound 1).

This script times the same trip, the way calibrate does (`time_synthesis_trip`, in a
process pool like the prover's), at the sizes the profile was calibrated at. It stores
the timings in the profile's [calibration.measurements] and sets that bound. Synthesis
runs on the host only, so no GPU is needed. Run it on the machine the profile describes.

    python experiments/transfer_share.py [--profile calibration/h200-cupy.toml] [--repeats 3]
"""

from __future__ import annotations

import argparse
import multiprocessing
import platform
import statistics
import time
import tomllib
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from simgpu.calibrate import _inline_laws, profile_header, serialized_share, time_synthesis_trip
from simgpu.profile import profile_from_dict
from simgpu.real.circuits import CircuitSpec
from simgpu.real.synthesis import synthesize
from simgpu.tomlwrite import dumps

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default=str(ROOT / "calibration" / "h200-cupy.toml"))
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    path = Path(args.profile)
    text = path.read_text()
    doc = tomllib.loads(text)
    rows = sorted(doc["calibration"]["measurements"].values(), key=lambda r: r["constraints"])
    points = []
    print("| size | trip (s) | worker pickling (s) | serialized share |")
    print("|---:|---:|---:|---:|")
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        pool.submit(synthesize, CircuitSpec(constraints=64), 0).result()  # start the worker
        for row in rows:
            n = row["constraints"]
            trips, pickles = [], []
            for rep in range(args.repeats):
                _, wall, compute, pickling = time_synthesis_trip(pool, CircuitSpec(constraints=n), 2000 + rep)
                trips.append(round(max(0.0, wall - compute), 6))
                pickles.append(round(pickling, 6))
            row["synthesis_trip"] = trips
            row["synthesis_pickle"] = pickles
            trip, pickled = statistics.mean(trips), statistics.mean(pickles)
            share = round(serialized_share(trip, pickled), 3)
            points.append([n, share])
            print(f"| 2^{n.bit_length() - 1} | {trip:.4f} | {pickled:.4f} | {share:.3f} |")
    transfer = next(ph for ph in doc["stages"]["synthesis"]["phases"] if ph["name"] == "transfer")
    transfer["uses"] = {"driver_rx": {"demand": 1.0, "bound": {"points": points}}}
    doc["calibration"]["driver_rx_share"] = (
        f"experiments/transfer_share.py, {time.strftime('%Y-%m-%d')}, {platform.node()}: "
        "synthesis_trip and synthesis_pickle in the measurements"
    )
    profile_from_dict(doc)  # still a valid profile
    path.write_text(dumps(_inline_laws(doc), profile_header(text)))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
