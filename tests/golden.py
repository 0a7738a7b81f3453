"""A fixed set of predictions whose JSON is kept under tests/data/golden/.

The layout may move code around; it must not move answers.  `test_golden` compares each
case's JSON with the stored one byte for byte.  When a change is *meant* to move answers
(a model mechanism, a rebuilt profile), re-make them and say why in the commit:

    python tests/golden.py --update
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "data" / "golden"

#: name -> argv of `simgpu predict` (always --json)
CASES: dict[str, list[str]] = {
    "seed-single-lock": ["-d", "single-lock", "--runs", "2"],
    "seed-single-lock-c3j1": ["-d", "single-lock", "-n", "3", "-j", "1", "--gpu-workers", "1"],
    "seed-two-lock-16g": ["-d", "two-lock", "--vram", "16G", "--gpu-workers", "3"],
    "seed-two-lock-reserve-80g": ["-d", "two-lock-reserve", "--vram", "80G", "--gpu-workers", "3"],
    "seed-split-finalizer": ["-d", "split-finalizer", "-n", "4", "-j", "2"],
    "seed-serial-open-loop": ["-d", "serial", "--arrival-rate", "0.02", "--proofs", "4"],
    "seed-retries": ["-d", "two-lock", "--retries", "1", "--seed", "3"],
    "h200-single-lock": ["-p", "h200-cupy", "-d", "single-lock", "--runs", "2"],
    "h200-two-lock-2g": ["-p", "h200-cupy", "-d", "two-lock", "--vram", "2G", "--gpu-workers", "3"],
    "h200-split-finalizer": ["-p", "h200-cupy", "-d", "split-finalizer", "--constraints", "2^20"],
}


def predict_json(argv: list[str]) -> str:
    from simgpu.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["predict", *argv, "--json"])
    if code != 0:
        raise RuntimeError(f"simgpu predict {' '.join(argv)} exited {code}")
    return out.getvalue()


def main() -> None:
    if "--update" not in sys.argv[1:]:
        raise SystemExit("usage: python tests/golden.py --update")
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name, argv in CASES.items():
        (GOLDEN / f"{name}.json").write_text(predict_json(argv))
        print(f"wrote {name}.json")


if __name__ == "__main__":
    main()
