"""A prediction beside a measurement: the metrics of two documents and their errors.

`compare` lines up a predicted and a measured JSON document metric by metric with the
relative error of the prediction; `machine_differences` says where the machine of a run
is not the one the profile was measured on.
"""

from __future__ import annotations

from typing import Any

from simgpu.profile import Hardware


def machine_differences(hw: Hardware, device_name: str, cpu_cores: int) -> list[str]:
    """How the machine of a real run differs from the one a profile was measured on, in
    what calibrate records and a run can see (the GPU's model, the host's cores).  Hosts
    that match here can still differ: two "H200" machines ran b_g2_msm 1.5x apart
    (docs/validation-log.md)."""
    out = []
    if device_name != hw.gpu:
        out.append(f"the GPU is {device_name}, not {hw.gpu}")
    if cpu_cores != hw.cpu_cores:
        out.append(f"the host has {cpu_cores} cores, not {hw.cpu_cores}")
    return out


METRICS = (
    ("throughput (s/proof)", lambda d: d["throughput_s_per_proof"]),
    ("latency p50 (s)", lambda d: d["latency_s"]["p50"]),
    ("latency p95 (s)", lambda d: d["latency_s"]["p95"]),
    ("GPU busy", lambda d: d["devices"][0]["busy_frac"]),
    ("peak VRAM (MiB)", lambda d: d["devices"][0]["peak_vram_bytes"] / 2**20),
    ("proofs failed", lambda d: d["proofs"]["failed"]),
    ("OOM", lambda d: bool(d["oom_events"])),
)


def compare(predicted: dict[str, Any], measured: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows of (metric, predicted, measured, relative error of the prediction): the
    pipeline metrics, then each stage's mean duration where both runs have it."""
    rows = []
    metrics = list(METRICS)
    pst, mst = predicted.get("stages", {}), measured.get("stages", {})
    for stage in [s for s in mst if s in pst]:
        metrics.append((f"{stage} mean (s)", lambda d, s=stage: d["stages"][s]["mean_s"]))
    for name, get in metrics:
        p, m = get(predicted), get(measured)
        if isinstance(p, bool) or isinstance(m, bool):
            err = None if p == m else 1.0
        elif p is None or m is None or m == 0:
            err = None
        else:
            err = (p - m) / m
        rows.append({"metric": name, "predicted": p, "measured": m, "rel_error": err})
    return rows


def print_comparison(rows: list[dict[str, Any]], title: str, console: Any) -> None:
    """The rows of `compare` as a table: metric, predicted, measured, error."""
    from rich.table import Table

    def fmt(v: Any) -> str:
        return "-" if v is None else (str(v) if isinstance(v, bool | int) else f"{v:.3f}")

    t = Table(title=title)
    for col in ("metric", "predicted", "measured", "error"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for r in rows:
        err = "-" if r["rel_error"] is None else f"{100 * r['rel_error']:+.1f} %"
        t.add_row(r["metric"], fmt(r["predicted"]), fmt(r["measured"]), err)
    console.print(t)
