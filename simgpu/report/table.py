"""The terminal table: the document's numbers as a user reads them first."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from simgpu.errors import fmt_bytes
from simgpu.report.bottleneck import label, ranked

#: Holders listed per OOM in the table (the JSON has them all).
HOLDERS_SHOWN = 5


def _secs(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f} s"


def print_table(doc: dict[str, Any], console: Console | None = None) -> None:
    """Print a run document as the terminal table (throughput, latency, devices, locks,
    memory, what bounded progress), then its OOMs, failures, deadlock and leaks."""
    console = console or Console()
    p = doc["proofs"]
    title = (
        f"simgpu {doc['mode']}: design [bold]{doc['design']}[/bold] on {doc['profile']} - "
        f"{doc['workload']['name']} ({doc['workload']['partitions']} x "
        f"{doc['workload']['constraints']:,} constraints)"
    )
    t = Table(title=title, show_header=True, header_style="bold")
    t.add_column("metric")
    t.add_column("value", justify="right")
    cfg = doc["config"]
    t.add_row(
        "proofs x concurrency",
        f"{cfg['proofs']} x {cfg['concurrency'] if not cfg.get('arrival_rate') else 'open loop'}",
    )
    t.add_row(
        "GPU workers / device, partition workers",
        f"{cfg['gpu_workers_per_device']}, {cfg['partition_workers']}",
    )
    thr = doc["throughput_s_per_proof"]
    runs = doc["oom_risk"]["runs"]
    spread = ""
    if runs > 1 and doc.get("throughput_s_per_proof_min") is not None:
        spread = f" ({doc['throughput_s_per_proof_min']:.2f}-{doc['throughput_s_per_proof_max']:.2f})"
    t.add_row("throughput", ("-" if thr is None else f"{thr:.2f} s/proof") + spread)
    if "price_per_hour" in doc:
        rate, each = doc["proofs_per_hour"], doc["price_per_proof"]
        t.add_row("proofs per hour", "-" if rate is None else f"{rate:.1f}")
        t.add_row(f"$ per proof (at ${doc['price_per_hour']:g}/h)", "-" if each is None else f"${each:.4f}")
    style = "red" if p["failed"] else "green"
    t.add_row("proofs completed / failed", f"[{style}]{p['completed']} / {p['failed']}[/{style}]")
    if p.get("not_started"):
        t.add_row("proofs not started", str(p["not_started"]))
    t.add_row("latency p50 / p95", f"{_secs(doc['latency_s']['p50'])} / {_secs(doc['latency_s']['p95'])}")
    for d in doc["devices"]:
        t.add_row(f"gpu{d['device']} busy", f"{100 * d['busy_frac']:.1f} %")
        t.add_row(
            f"gpu{d['device']} peak VRAM",
            f"{fmt_bytes(d['peak_vram_bytes'])} of {fmt_bytes(d['vram_bytes'])}",
        )
    for name, st in doc["locks"].items():
        t.add_row(f"lock {name} wait", f"{st['wait_s_total']:.2f} s total, {st['wait_s_mean']:.3f} s mean")
    h = doc["host"]
    t.add_row("peak host RSS", f"{fmt_bytes(h['peak_rss_bytes'])} of {fmt_bytes(h['ram_bytes'])}")
    risk = doc["oom_risk"]
    lo, hi = risk["ci95"]
    t.add_row(
        "OOM risk",
        f"{100 * risk['p']:.0f} % of {runs} run(s) (95% CI {100 * lo:.0f}-{100 * hi:.0f} %)",
    )
    for key, value in doc.get("verification", {}).items():
        t.add_row(f"verified {key}", str(value))
    shares = doc.get("bottleneck") or {}
    # every lock, even at 0 % (is it the lock? is the first question), and what else shows
    shown = [(k, v) for k, v in shares.items() if k.startswith("lock ") and v is not None]
    shown += [(k, v) for k, v in ranked(shares) if not k.startswith("lock ") and v >= 0.0005]
    for key, share in sorted(shown, key=lambda kv: -kv[1]):
        t.add_row(f"bounded by {label(key)}", f"{100 * share:.1f} % of the makespan")
    if "host_membw" in shares and shares["host_membw"] is None:
        t.add_row("bounded by host memory bandwidth", "not measured (real run)")
    console.print(t)
    ooms = doc["oom_events"]
    if ooms:
        # in run order: each run's clock starts at 0, so times of different runs do not sort
        console.print(f"[red]{len(ooms)} OOM event(s)[/red]; the first, run by run:")
        for o in ooms[:3]:
            where = f"proof {o.get('proof')} partition {o.get('partition')}"
            run = f"run {o['run_seed']}, " if o.get("run_seed") is not None else ""
            console.print(
                f"  {run}t={o['t']:.3f}s {o['kind']} on {o['pool']}: stage {o['stage']}, worker "
                f"{o.get('worker') or '?'}, {where}: requested {fmt_bytes(o['requested_bytes'])} "
                f"for {o.get('buffer') or '?'}, free {fmt_bytes(o['free_bytes'])}"
            )
            print_holders(o, console)
    for f in doc["failures"][:5]:
        console.print(f"  proof {f['proof']} failed: {f['reason']}")
    if doc["deadlock"]:
        dl = doc["deadlock"]
        kind = dl.get("kind", "deadlock").upper()
        cause = f" ({dl['cause']})" if dl.get("cause") else ""
        console.print(f"[red bold]{kind}[/red bold] at t={dl['at']:.3f}s{cause}")
        waiting = dl["waiting"]
        if dl.get("cycle"):
            console.print("  cycle: each waits for the next")
            for who in dl["cycle"]:
                console.print(f"    {who} waits for {waiting.get(who, '?')}")
        else:
            for who in dl.get("roots", [])[:5]:
                console.print(f"  {who} waits for {waiting.get(who, '?')}")
        shown = len(dl.get("cycle") or dl.get("roots", [])[:5])
        if len(waiting) > shown:
            console.print(f"  ({len(waiting) - shown} more tasks wait behind; --json lists them all)")
    for leak in doc["leaks"][:3]:
        console.print(f"[yellow]leak:[/yellow] {leak}")


def holder_name(h: dict[str, Any]) -> str:
    """Who a holder is: its worker, proof and partition (set-up memory is nobody's)."""
    if h.get("proof") is None:
        return "set-up (no partition)"
    who = f"{h['worker']} " if h.get("worker") else ""
    return f"{who}proof {h['proof']} partition {h['partition']}"


def print_holders(o: dict[str, Any], console: Console) -> None:
    """What was live when `o` ran out, the largest first, and what each holder did."""
    holders = o.get("holders") or []
    for h in holders[:HOLDERS_SHOWN]:
        when = f"{h['stage']} at t={h['t']:.3f}s" if h.get("t") is not None else "set-up"
        doing = f": {h['doing']}" if h.get("doing") else ""
        console.print(
            f"    live {fmt_bytes(h['bytes']):>10} {h['buffer']} of {holder_name(h)}, {when}{doing}"
        )
    if len(holders) > HOLDERS_SHOWN:
        rest = sum(h["bytes"] for h in holders[HOLDERS_SHOWN:])
        more = len(holders) - HOLDERS_SHOWN
        console.print(f"    live {fmt_bytes(rest):>10} in {more} more allocation(s) (--json lists them)")
    cached = o.get("cached_bytes") or 0
    other = o["capacity_bytes"] - o["free_bytes"] - sum(h["bytes"] for h in holders) - cached
    if cached > 0:
        console.print(
            f"    free {fmt_bytes(cached):>10} cached in split blocks (free, beside arrays still live)"
        )
    if other > 0:
        console.print(f"    live {fmt_bytes(other):>10} resident or not a named buffer (context, caches)")
