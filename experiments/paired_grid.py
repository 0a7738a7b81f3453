"""Two ways of running the prover, paired configuration by configuration on one machine.

gpu_validation.py's `measure` writes one JSON document per part of a grid, each run with
the settings it ran under.  When a lease runs the same configurations two ways (say
`--map-in-one-call` and not, interleaved, on one machine), this groups the runs by a
field of theirs and prints, per configuration, the real s/proof of each way (mean,
lowest, highest, how many runs) and the second's over the first's.  Runs that lost a
proof are left out (their s/proof counts only the proofs that completed) and counted.

    D=docs/data/h100-2026-12-06q
    python experiments/paired_grid.py --by mapping --base "one call" $D/call*/grid-*.json.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any


def load(paths: list[str]) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    for p in paths:
        opener = gzip.open if p.endswith(".gz") else open
        with opener(p, "rt") as f:
            runs.extend(json.load(f))
    return runs


def pair(
    runs: list[dict[str, Any]], by: str
) -> tuple[list[str], dict[str, dict[str, list[float]]], dict[str, int]]:
    """(the ways in the order first met, {configuration: {way: s/proof of each complete run}},
    {way: runs left out for a lost proof})."""
    ways: list[str] = []
    got: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    lost: dict[str, int] = defaultdict(int)
    for r in runs:
        way = str(r.get(by, "?"))
        if way not in ways:
            ways.append(way)
        m = r["measured"]
        if m["proofs"]["failed"] or m["proofs"].get("not_started"):
            lost[way] += 1
            continue
        got[r["label"]][way].append(float(m["throughput_s_per_proof"]))
    return ways, got, lost


def table(
    ways: list[str], got: dict[str, dict[str, list[float]]], lost: dict[str, int], base: str | None = None
) -> str:
    """The paired table; `base` (default: the first way met) is the way the other is divided by."""
    if len(ways) != 2:
        raise SystemExit(f"two ways to pair, found {len(ways)}: {ways}")
    if base is not None and base not in ways:
        raise SystemExit(f"--base {base!r}: the runs' ways are {ways}")
    first, second = ways if base in (None, ways[0]) else ways[::-1]
    each = "s/proof (lowest-highest, runs)"
    lines = [f"| cfg | {first}: {each} | {second}: {each} | {second} / {first} |", "|---|---|---|---:|"]
    ratios = []
    for cfg in sorted(got):
        a, b = got[cfg].get(first, []), got[cfg].get(second, [])
        cells = [
            f"{statistics.mean(x):.3f} ({min(x):.3f}-{max(x):.3f}, {len(x)})" if x else "-" for x in (a, b)
        ]
        ratio = statistics.mean(b) / statistics.mean(a) if a and b else None
        if ratio is not None:
            ratios.append(ratio)
        lines.append(f"| {cfg} | {cells[0]} | {cells[1]} | {f'{ratio:.3f}' if ratio else '-'} |")
    if ratios:
        lines.append("")
        lines.append(
            f"{second} over {first}: median {statistics.median(ratios):.3f}, "
            f"{min(ratios):.3f}-{max(ratios):.3f} over {len(ratios)} configurations; "
            f"runs left out for a lost proof: {first} {lost.get(first, 0)}, {second} {lost.get(second, 0)}."
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json", nargs="+", help="gpu_validation.py measure documents (.json or .json.gz)")
    ap.add_argument("--by", default="mapping", help="the runs' field that names the way (default: mapping)")
    ap.add_argument("--base", help="the way the other is divided by (default: the first met)")
    args = ap.parse_args()
    missing = [p for p in args.json if not Path(p).is_file()]
    if missing:
        raise SystemExit(f"no such file: {missing[0]}")
    print(table(*pair(load(args.json), args.by), base=args.base))


if __name__ == "__main__":
    main()
