"""When a stage asks for the buffer a capped run ran out on, read from traced runs
(issue #19, item 5).

A capped run that runs out of memory fails at one request; whether it does turns on what
the other workers hold at that instant, which the order of the allocations decides, not
the pool (experiments/pool_replay.py replays the card's order through the model's pool
exactly).  This reads every run kept with ``--alloc-trace`` and, for one stage, prints per
run how long each of its calls took from its first allocation to that request, and how
many bytes were in arrays, the other workers' included, just before it:

    python experiments/alloc_order.py docs/data/h100-2026-12-05f/call6/k-traced-*.json.gz \\
        docs/data/h100-2026-12-05f/call4/capped-5.json.gz --stage b_g2_msm

The request timed is the one the card refused most often (`--bytes` names another).  A
call of the stage is the rows of one thread from the stage's opening allocation (the size
its first call on that thread opened with) to that request; a finalizer thread runs
nothing but the stage, so the opening size is what tells its calls apart.

``--cycles`` reads the other side of the race: when each GPU worker's cycle, from its
prestage's first allocation, reached each kernels phase (the phase asks for its buffers
when the worker's host side gets there, which on one in-order stream is after its
prestage's copy, and whatever was queued before it, has run).

``--first-cycle`` reads, run by run, the three allocations whose order decided the
capped group's outcome on the forty-eighth lease: from the first b_g2_msm's first array,
its second (the gathered points, asked once the first array's copy had left, until the
prover booked them together before the copy: groth16._G2Gather), the next worker's
prestage, and that worker's H MSM staging; then, under each cap, how many runs had the
second array between the other two, how many after, and how many of each ran out of
memory.

``--model PROFILE`` puts the model beside the card: each configuration of the records
run ``--runs`` times in the model, and the same two readings taken from the model's
allocations (simgpu.ledger.Ledger.watch; a buffer's arrays are asked together there).
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MiB = 1 << 20


@dataclass(frozen=True)
class Call:
    """One call of the stage on one thread: from its opening allocation to the request."""

    thread: str
    delay_s: float  # from the opening allocation to the request
    in_arrays_before: int  # bytes in arrays on the device just before the request
    refused: bool  # the pool could not serve it (the run's out-of-memory)


def calls(rows: list, stage: str, target: int) -> list[Call]:
    """The stage's calls in a run's allocation trace (rows as AllocTrace writes them:
    seconds, thread, stage[.phase], op, bytes, address, bytes in arrays after, bytes in
    the pool after), each up to its request of `target` bytes."""
    mallocs = [r for r in rows if r[3] == "malloc" and r[2].split(".")[0] == stage]
    opening: dict[str, int] = {}  # thread -> the size its first call opened with
    open_at: dict[str, float] = {}
    out = []
    for t, thread, _, _, nbytes, address, in_arrays, _ in mallocs:
        if nbytes == opening.setdefault(thread, nbytes) and nbytes != target:
            open_at[thread] = t
        if nbytes == target and thread in open_at:
            # a refused request (no address) added nothing to the arrays
            before = in_arrays - nbytes if address else in_arrays
            out.append(Call(thread, t - open_at.pop(thread), before, not address))
    return out


@dataclass(frozen=True)
class Cycle:
    """One partition's turn on a GPU worker thread: from its prestage's first allocation
    to the next one on that thread (or the trace's end), with when each kernels phase
    first allocated, in seconds from the cycle's start."""

    thread: str
    start: float
    phases: dict[str, float]


def cycles(rows: list) -> list[Cycle]:
    """Every GPU worker's cycles in a run's allocation trace: where a thread's host side
    reached each kernels phase, which is when that phase's buffers were asked for.  A
    worker whose host side runs ahead of the device reaches its phases sooner than their
    device time says, and asks for their buffers beside whatever another thread still
    holds (the finalizer's b_g2_msm, in split-finalizer)."""
    out: list[Cycle] = []
    open_: dict[str, Cycle] = {}
    for t, thread, stage, op, *_ in rows:
        if op != "malloc":
            continue
        if stage == "prestage":
            c = open_.get(thread)
            # a prestage allocation after a kernels phase opens the thread's next cycle
            if c is None or c.phases:
                if c is not None:
                    out.append(c)
                open_[thread] = Cycle(thread, t, {})
        elif stage.startswith("kernels.") and thread in open_:
            open_[thread].phases.setdefault(stage.split(".", 1)[1], t - open_[thread].start)
    out.extend(open_.values())
    return [c for c in out if c.phases]


def refused_size(runs: list[dict], stage: str) -> int | None:
    """The size the stage's refused requests asked for most often in `runs` (None if
    none was refused)."""
    sizes = Counter(
        r[4]
        for run in runs
        for r in run.get("alloc_trace") or []
        if r[3] == "malloc" and not r[5] and r[2].split(".")[0] == stage
    )
    return sizes.most_common(1)[0][0] if sizes else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("records", nargs="+", help="validation records (.json or .json.gz) with alloc_trace")
    ap.add_argument("--stage", default="b_g2_msm")
    ap.add_argument("--bytes", type=int, help="the request to time (default: the size refused most often)")
    ap.add_argument("--model", help="a profile: the same readings from the model's runs of each one")
    ap.add_argument("--runs", type=int, default=40, help="with --model: runs of each configuration")
    ap.add_argument(
        "--first-cycle",
        action="store_true",
        help="instead: the first b_g2_msm call's second array beside the next worker's prestage and H MSM",
    )
    ap.add_argument(
        "--cycles",
        action="store_true",
        help="instead: when each GPU worker's cycle reached each kernels phase, by configuration and outcome",
    )
    args = ap.parse_args()
    from gpu_validation import read_runs  # beside this script

    runs = [(path, r) for path in map(Path, args.records) for r in read_runs(path) if r.get("alloc_trace")]
    if args.model:
        print_model(args.model, [r for _, r in runs], args.stage, args.runs)
        return
    if args.first_cycle:
        print_first_cycles(runs)
        return
    if args.cycles:
        print_cycles([r for _, r in runs])
        return
    target = args.bytes or refused_size([r for _, r in runs], args.stage)
    if not target:
        raise SystemExit(f"error: no {args.stage} request was refused in these runs; name one with --bytes")
    print(f"{args.stage}: from each call's first allocation to its request of {target / MiB:.2f} MiB\n")

    print(
        f"| run | out of memory | {args.stage} calls | to the request, ms: median / p90 / max "
        "| in arrays before it, MiB: median / max | refused |"
    )
    print("|---|---|---:|---|---|---:|")
    for path, r in runs:
        cs = calls(r["alloc_trace"], args.stage, target)
        if not cs:
            continue
        d = sorted(1e3 * c.delay_s for c in cs)
        b = [c.in_arrays_before / MiB for c in cs]
        oom = "yes" if r["measured"]["oom_events"] else "no"
        print(
            f"| {r['label']}{r['repeat']} ({path.name}) | {oom} | {len(cs)} | "
            f"{statistics.median(d):.0f} / {d[int(0.9 * (len(d) - 1))]:.0f} / {d[-1]:.0f} | "
            f"{statistics.median(b):.0f} / {max(b):.0f} | {sum(c.refused for c in cs)} |"
        )


@dataclass(frozen=True)
class FirstCycle:
    """The first b_g2_msm call of a run beside the next worker's cycle, in seconds from
    the call's first allocation: when its second array was asked (None: never), when
    another thread's prestage first allocated, when that thread's H MSM first did."""

    second_array: float | None
    prestage: float | None
    h_msm: float | None


def first_cycle(rows: list, stage: str = "b_g2_msm", min_bytes: int = 20 * MiB) -> FirstCycle | None:
    """The first call of `stage` in a run's trace and the other worker's cycle beside
    it (arrays under `min_bytes`, an index or counts, are passed over); None where the
    stage never allocated."""
    mallocs = [r for r in rows if r[3] == "malloc" and r[5]]
    first = next((r for r in mallocs if r[2].split(".")[0] == stage), None)
    if first is None:
        return None
    t0, thread = first[0], first[1]
    later = [r for r in mallocs if r[0] > t0]
    second = next((r for r in later if r[1] == thread and r[2] == stage and r[4] >= min_bytes), None)
    pre = next((r for r in later if r[1] != thread and r[2] == "prestage"), None)
    h = next((r for r in later if pre is not None and r[1] == pre[1] and r[2] == "kernels.h_msm"), None)

    def since(r: tuple | None) -> float | None:
        return None if r is None else r[0] - t0

    return FirstCycle(since(second), since(pre), since(h))


def print_first_cycles(runs: list[tuple[Path, dict]]) -> None:
    """Per run: the first cycle's order, and whether the run ran out of memory; then the
    two orders' counts under each cap (a run's outcome means nothing beside another cap's)."""
    print(
        "From the first b_g2_msm's first allocation, ms: its second array, the next worker's "
        "prestage, that worker's H MSM staging\n"
    )
    print(
        "| run | cap MiB | out of memory | second array | prestage | H MSM | second array between the two |"
    )
    print("|---|---:|---|---:|---:|---:|---|")

    def ms(x: float | None) -> str:
        return "-" if x is None else f"{1e3 * x:.1f}"

    # cap -> between -> [runs, out of memory]
    tally: dict[str, dict[bool, list[int]]] = {}
    for path, r in runs:
        c = first_cycle(r["alloc_trace"])
        if c is None:
            continue
        oom = bool(r["measured"]["oom_events"])
        cap = "card" if r.get("vram_cap") is None else f"{r['vram_cap'] / MiB:.0f}"
        counts = tally.setdefault(cap, {True: [0, 0], False: [0, 0]})
        counts[between(c)][0] += 1
        counts[between(c)][1] += oom
        print(
            f"| {r['label']}{r['repeat']} ({path.name}) | {cap} | {'yes' if oom else 'no'} | "
            f"{ms(c.second_array)} | {ms(c.prestage)} | {ms(c.h_msm)} | {'yes' if between(c) else 'no'} |"
        )
    print()
    for cap, counts in sorted(tally.items()):
        where = "On the whole card" if cap == "card" else f"At {cap} MiB"
        (nb, ob), (na, oa) = counts[True], counts[False]
        print(
            f"{where}, second array between the two: {nb} runs, {ob} out of memory; "
            f"after: {na} runs, {oa} out of memory."
        )


def print_cycles(runs: list[dict]) -> None:
    """Per configuration and outcome, the median ms from a cycle's prestage to each
    kernels phase's first allocation."""
    groups: dict[tuple[str, bool], list[Cycle]] = {}
    for r in runs:
        oom = bool(r["measured"]["oom_events"])
        groups.setdefault((r["label"], oom), []).extend(cycles(r["alloc_trace"]))
    names = list(dict.fromkeys(p for cs in groups.values() for c in cs for p in c.phases))
    print(
        "From each cycle's first prestage allocation to each kernels phase's first allocation, median ms:\n"
    )
    print("| configuration | out of memory | cycles | " + " | ".join(names) + " |")
    print("|---|---|---:|" + "---:|" * len(names))
    for (label, oom), cs in sorted(groups.items()):
        cells = []
        for p in names:
            xs = [1e3 * c.phases[p] for c in cs if p in c.phases]
            cells.append(f"{statistics.median(xs):.1f}" if xs else "-")
        print(f"| {label} | {'yes' if oom else 'no'} | {len(cs)} | " + " | ".join(cells) + " |")


@dataclass
class ModelReading:
    """A configuration's runs in the model: how many ran out of VRAM, each call of the
    stage from its first allocation to its temporaries, each cycle's phases."""

    runs: int = 0
    out_of_memory: int = 0
    delays: list[float] = field(default_factory=list)
    cycles: list[dict[str, float]] = field(default_factory=list)
    first_cycles: list[FirstCycle] = field(default_factory=list)


def model_reading(profile: Any, run: dict, stage: str, runs: int) -> ModelReading:
    """The model's runs of the record `run`'s configuration, read as the card's trace is:
    `stage`'s calls (from its first allocation to its temporaries, the buffer named after
    it) and every GPU worker's cycle (from its prestage's first allocation to each kernels
    phase's first)."""
    from gpu_validation import config_of

    from simgpu.config import Workload
    from simgpu.model.sim import SimRuntime
    from simgpu.report.metrics import summarize
    from simgpu.sched.registry import resolve_design

    base = profile.workload(profile.default_workload)
    wl = Workload(base.name, base.partitions, int(run["constraints"]))
    ns = argparse.Namespace(
        proofs=int(run.get("proofs", 6)), partition_workers=int(run.get("partition_workers", 8))
    )
    cfg = config_of(ns, int(run["gpu_workers"]), int(run["concurrency"]), run["vram_cap"])
    resolved = profile.resolve(wl.constraints)
    phase_of = {
        b: ph.name for ph in resolved.stages["kernels"].phases for b, _ in (*ph.staging, *ph.transient)
    }
    out = ModelReading()
    design = resolve_design(run["design"]).fn
    for seed in range(runs):
        rt = SimRuntime(profile, cfg, wl, seed=seed)
        seen: list[Any] = []
        for ledger in rt.vram:
            ledger.watch = seen.append
        out.runs += 1
        out.out_of_memory += bool(summarize(rt.run(design)).oom_events)
        opened: dict[str, float] = {}
        cycle: dict[str, tuple[float, dict[str, float]]] = {}
        out.first_cycles.append(model_first_cycle(seen, stage, phase_of))
        for a in seen:
            if a.stage == stage:
                if a.tag == stage and a.worker in opened:
                    out.delays.append(a.t - opened.pop(a.worker))
                elif a.tag != stage:
                    opened.setdefault(a.worker, a.t)
            elif a.stage == "prestage":
                c = cycle.get(a.worker)
                if c is None or c[1]:
                    if c is not None:
                        out.cycles.append(c[1])
                    cycle[a.worker] = (a.t, {})
            elif a.stage == "kernels" and a.worker in cycle and a.tag in phase_of:
                start, phases = cycle[a.worker]
                phases.setdefault(phase_of[a.tag], a.t - start)
        out.cycles.extend(c for _, c in cycle.values() if c)
    return out


def model_first_cycle(
    seen: list[Any], stage: str, phase_of: dict[str, str], min_bytes: int = 20 * MiB
) -> FirstCycle:
    """The first cycle of a model run as `first_cycle` reads the card's.  Where the model
    books the stage's staging whole, its second array is asked with its first (0 s)."""
    i0 = next((i for i, a in enumerate(seen) if a.stage == stage), None)
    if i0 is None:
        return FirstCycle(None, None, None)
    first, rest = seen[i0], seen[i0 + 1 :]
    second = next(
        (a for a in rest if a.worker == first.worker and a.stage == stage and a.nbytes >= min_bytes), None
    )
    own = 0.0 if second is None or second.tag == stage else second.t - first.t
    pre = next((a for a in rest if a.stage == "prestage" and a.worker != first.worker), None)
    h = next(
        (a for a in rest if pre is not None and a.worker == pre.worker and phase_of.get(a.tag) == "h_msm"),
        None,
    )
    return FirstCycle(own, None if pre is None else pre.t - first.t, None if h is None else h.t - first.t)


def between(c: FirstCycle) -> bool:
    """Whether the second array came after the next worker's prestage and before its H MSM
    (the order that split the block on the forty-eighth lease); a tie counts as before."""
    if None in (c.second_array, c.prestage, c.h_msm):
        return False
    return c.prestage < c.second_array < c.h_msm  # type: ignore[operator]


def print_model(path: str, runs: list[dict], stage: str, n: int) -> None:
    """The card's readings (pooled by configuration) beside the model's, configuration by
    configuration."""
    from simgpu.profile.schema import load_profile

    profile = load_profile(path)
    by_label: dict[str, list[dict]] = {}
    for r in runs:
        by_label.setdefault(r["label"], []).append(r)
    firsts: list[tuple[str, list[FirstCycle], list[FirstCycle]]] = []
    print(f"The card's runs beside {n} of the model's (`{profile.name}`), each configuration:\n")
    print(
        f"| cfg | runs out of memory: card / model | {stage}, first allocation to temporaries, ms: "
        "card / model (median, p90) | prestage to each kernels phase, median ms: card / model |"
    )
    print("|---|---|---|---|")
    for label, rs in sorted(by_label.items()):
        target = refused_size(rs, stage)
        card_delays = [c.delay_s for r in rs for c in calls(r["alloc_trace"], stage, target or -1)]
        card_cycles = [c.phases for r in rs for c in cycles(r["alloc_trace"])]
        m = model_reading(profile, rs[0], stage, n)
        card_oom = sum(bool(r["measured"]["oom_events"]) for r in rs)

        def spread(xs: list[float]) -> str:
            if not xs:
                return "-"
            xs = sorted(1e3 * x for x in xs)
            return f"{statistics.median(xs):.1f}, {xs[int(0.9 * (len(xs) - 1))]:.1f}"

        names = list(dict.fromkeys(p for c in m.cycles for p in c))
        phases = []
        for p in names:
            card = [c[p] for c in card_cycles if p in c]
            model = [c[p] for c in m.cycles if p in c]
            phases.append(f"{p} {spread(card).split(',')[0]} / {spread(model).split(',')[0]}")
        print(
            f"| {label} | {card_oom} of {len(rs)} / {m.out_of_memory} of {m.runs} | "
            f"{spread(card_delays)} / {spread(m.delays)} | {'; '.join(phases)} |"
        )
        card_first = [c for r in rs if (c := first_cycle(r["alloc_trace"], stage)) is not None]
        firsts.append((label, card_first, m.first_cycles))
    print(
        f"\nThe first cycle (`--first-cycle`), medians in ms from the first {stage}'s first allocation: "
        "its second array / the next worker's prestage / its H MSM staging, and the runs whose second "
        "array came between the two:\n"
    )
    print("| cfg | card | model |")
    print("|---|---|---|")
    for label, card_first, model_first in firsts:
        print(f"| {label} | {first_summary(card_first)} | {first_summary(model_first)} |")


def first_summary(cs: list[FirstCycle]) -> str:
    """Medians of a configuration's first cycles, and how many had the splitting order."""

    def med(xs: list[float | None]) -> str:
        got = [1e3 * x for x in xs if x is not None]
        return f"{statistics.median(got):.1f}" if got else "-"

    times = " / ".join(med([getattr(c, k) for c in cs]) for k in ("second_array", "prestage", "h_msm"))
    return f"{times}; between in {sum(between(c) for c in cs)} of {len(cs)}"


if __name__ == "__main__":
    main()
