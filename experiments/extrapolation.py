"""Does a profile fitted on small sizes predict a larger one?  (issue: calibrate)

Refits the stage times of a calibrated profile from its stored measurements on sizes
<= --fit-max only, and compares what the refitted profile says at each larger measured
size with what was measured there: per stage (kernels also as a whole), both the best
law over the fitted sizes and the measured-points law the profile ships.

    python experiments/extrapolation.py [--profile simgpu/profile/profiles/h200-cupy.toml] [--fit-max 2^20]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tomllib
from pathlib import Path

from simgpu.calibrate.fit import HOST_SPEED_ADJUSTED, mean_reference, stage_means, time_laws
from simgpu.calibrate.refit import measured_means, refit_times
from simgpu.profile import profile_from_dict
from simgpu.profile.laws import fit_law
from simgpu.units import parse_count

ROOT = Path(__file__).resolve().parent.parent
KEYS = (
    "synthesis",
    "synthesis_compute",
    "synthesis_transfer",
    "prep",
    "prestage",
    "kernels_ntt",
    "kernels_h_msm",
    "kernels_l_msm",
    "kernels_a_msm",
    "kernels_b1_msm",
    "b_g2_msm",
    "epilogue",
)


def main() -> None:
    ap = argparse.ArgumentParser()
    # the ladder 2^14..2^22 of 2026-11-30 (the shipped profile measures 2^18..2^22 only)
    ap.add_argument("--profile", default=str(ROOT / "docs" / "data" / "h200-2026-11-30d" / "h200-cupy.toml"))
    ap.add_argument("--fit-max", default="2^20")
    args = ap.parse_args()
    doc = tomllib.loads(Path(args.profile).read_text())
    fit_max = parse_count(args.fit_max, "--fit-max", 16)
    small = copy.deepcopy(doc)
    refit_times(small, fit_max)
    prof = profile_from_dict(small)
    sizes = sorted(r["constraints"] for r in doc["calibration"]["measurements"].values())
    targets = [n for n in sizes if n > fit_max]
    rows = sorted(doc["calibration"]["measurements"].values(), key=lambda r: r["constraints"])
    fit_rows = [r for r in rows if r["constraints"] <= fit_max]
    lines = [
        f"Stage times of `{doc['profile']['name']}` refitted on sizes <= {fit_max:,} only, against "
        f"the times measured at larger sizes (means of the calibration's repeats; their range "
        f"shows the repeat-to-repeat noise).  Stages fitted at the calibration's mean host speed "
        f"({', '.join(HOST_SPEED_ADJUSTED)}) are also shown at the fitted sizes' mean host speed; "
        f"`err` is against that where it is given, `raw err` against the plain mean.",
        "",
        "| stage | size | measured (ms) | repeats (ms) | at mean host speed (ms) | law fitted on small sizes "
        "| predicted (ms) | err | raw err |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for n in targets:
        r = prof.resolve(n)
        row = next(x for x in rows if x["constraints"] == n)
        for key in (*KEYS, "kernels"):
            ns, ys = measured_means(doc, key, fit_max)
            reps = row[key]
            measured = statistics.mean(reps)
            at = mean_reference(fit_rows, key)
            adjusted = stage_means([row], key, at)[0] if at else measured
            phased = key.startswith(("kernels_", "synthesis_"))
            stage, _, phase = key.partition("_") if phased else (key, "", "")
            st = r.stages[stage]
            predicted = next(p.seconds for p in st.phases if p.name == phase) if phase else st.seconds
            law = fit_law(ns, ys, time_laws(stage)).law
            err = (predicted - adjusted) / adjusted
            lines.append(
                f"| {key} | 2^{n.bit_length() - 1} | {1e3 * measured:.1f} | "
                f"{1e3 * min(reps):.1f}-{1e3 * max(reps):.1f} | "
                f"{f'{1e3 * adjusted:.1f}' if at else '-'} | `{law}` | {1e3 * predicted:.1f} | "
                f"{100 * err:+.1f}% | {100 * (predicted - measured) / measured:+.1f}% |"
            )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
