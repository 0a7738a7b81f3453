"""A cuzk daemon log made from cuzk's own format strings: tests/data/cuzk-phase12.log.

The strings below are the ones the curio sources print (extern/cuzk/cuzk-core/src/engine.rs
and pipeline.rs, extern/supraseal-c2/cuda/groth16_cuda.cu at the commit named in
docs/log-format.md), rendered the way Rust's format! and C's fprintf render them, not
through simgpu's templates: so a reader that parses this file reads cuzk's format.

The schedule is a small Phase 12 run (the split API): two jobs of three partitions, four
synthesis workers, two GPU workers on one GPU sharing its mutex; a worker takes its next
partition as soon as it releases the mutex, while a finalizer joins b_g2_msm and ends
the GPU call.  Startup lines come in tracing's format, one of them with colours.

    python tests/cuzk_fixture.py      # rewrite tests/data/cuzk-phase12.log
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

FIXTURE = Path(__file__).resolve().parent / "data" / "cuzk-phase12.log"

# engine.rs: timeline_event and the detail strings passed to it
TIMELINE = "TIMELINE,{},{},{},{}"
SYNTH_START = "partition={}"
SYNTH_END = "partition={},synth_ms={}"
GPU_QUEUE = "partition={}"
GPU_PICKUP = "worker={}{}"  # the second {} is ",partition={}" for a partitioned job
GPU_PICKUP_PART = ",partition={}"
GPU_START = "worker={},partition={}"
GPU_END = "worker={},partition={},gpu_ms={}"
# groth16_cuda.cu: the fprintf(stderr, ...) strings, newline dropped
SPLIT = "CUZK_TIMING: split_vectors_ms=%ld setup_to_split_ms=%ld"
PREP = "CUZK_TIMING: prep_msm_ms=%ld"
B_G2 = "CUZK_TIMING: b_g2_msm_ms=%ld num_circuits=%zu"
LOCK = "CUZK_TIMING: pre_lock_cpu_ms=%ld mutex_wait_ms=%ld"
NTT = "CUZK_TIMING: gpu_tid=%zu ntt_msm_h_ms=%ld"
BARRIER = "CUZK_TIMING: gpu_tid=%zu barrier_wait_ms=%ld"
BATCH = "CUZK_TIMING: gpu_tid=%zu batch_add_ms=%ld"
TAIL = "CUZK_TIMING: gpu_tid=%zu tail_msm_ms=%ld gpu_total_ms=%ld"
HELD = "CUZK_TIMING: mutex_held_ms=%ld total_start_fn_ms=%ld"
POOL = "CUZK_TIMING: set pool release threshold to MAX on gpu %d\n"
D_A = "CUZK_TIMING: d_a_cache allocated %zu MiB on gpu %d\n"

JOBS = ("3f2c1d8e-5b7a-4c1e-9d2f-0a1b2c3d4e5f", "9a8b7c6d-1e2f-4a3b-8c5d-6e7f8a9b0c1d")
# ms: synthesis (start, end) per (job, partition), four synthesis workers
SYNTH = {
    (0, 0): (0, 400),
    (0, 1): (0, 405),
    (0, 2): (0, 410),
    (1, 0): (0, 415),
    (1, 1): (400, 800),
    (1, 2): (405, 805),
}
PRE_LOCK, PREP_MS, B_G2_MS, NTT_MS, BATCH_MS, TAIL_MS, HELD_MS, FINISH_MS = 3, 30, 50, 60, 30, 20, 120, 10


def printf(fmt: str, *args: int) -> str:
    """C's printf for the %ld / %zu / %d conversions these strings use."""
    return re.sub(r"%(?:ld|zu|d)", "{}", fmt).format(*args).rstrip("\n")


def tracing(ts: str, target: str, message: str, fields: str, colour: bool = False) -> str:
    """tracing-subscriber's default line: timestamp, padded level, target, message, fields."""
    if not colour:
        return f"{ts}  INFO {target}: {message} {fields}".rstrip()
    dim, reset, italic = "\x1b[2m", "\x1b[0m", "\x1b[3m"
    kv = " ".join(f"{italic}{k}{reset}{dim}={reset}{v}" for k, v in (f.split("=", 1) for f in fields.split()))
    return f"{dim}{ts}{reset} \x1b[32m INFO{reset} {dim}{target}{reset}{dim}:{reset} {message} {kv}"


def schedule() -> list[dict[str, int]]:
    """The times (ms) of every partition's events, cuzk's Phase 12 protocol."""
    free = [0, 0]  # when each GPU worker is back for its next partition
    mutex_free = 0
    out = []
    for (job, idx), (s, e) in sorted(SYNTH.items(), key=lambda kv: kv[1][1]):
        queued = e + 1
        w = min(range(2), key=lambda i: (max(queued, free[i]), i))
        pickup = max(queued, free[w])
        start = pickup + 1
        request = start + PRE_LOCK
        acquire = max(request, mutex_free)
        release = acquire + HELD_MS
        mutex_free = release
        prep_end = request + PREP_MS
        ntt_end = acquire + NTT_MS
        barrier = max(0, prep_end - ntt_end)
        batch_end = ntt_end + barrier + BATCH_MS
        tail_end = batch_end + TAIL_MS
        b_g2_end = prep_end + B_G2_MS
        free[w] = release + 1
        out.append(
            dict(
                job=job, idx=idx, synth_start=s, synth_end=e, queued=queued, worker=w, pickup=pickup,
                start=start, request=request, acquire=acquire, release=release, prep_end=prep_end,
                ntt_end=ntt_end, barrier=barrier, batch_end=batch_end, tail_end=tail_end,
                b_g2_end=b_g2_end, end=max(release, b_g2_end) + FINISH_MS,
            )
        )  # fmt: skip
    return out


def lines() -> list[str]:
    ts = "2026-08-20T11:51:28.{:06d}Z"
    head = [
        tracing(ts.format(1), "cuzk_daemon", "cuzk-daemon starting", ""),
        tracing(ts.format(2), "cuzk_daemon", "rayon global thread pool configured", "rayon_threads=96"),
        tracing(ts.format(3), "cuzk_core::engine", "memory budget initialized", "total_budget_gib=750"),
        tracing(
            ts.format(4),
            "cuzk_core::engine",
            "initializing GPU workers",
            "num_gpus=1 gpu_workers_per_device=2 total_workers=2 gpus=[0]",
            colour=True,
        ),
        tracing(
            ts.format(5),
            "cuzk_core::engine",
            "starting pipeline: synthesis task + GPU workers (budget-gated)",
            "configured_lookahead=1 max_partitions_in_budget=53 effective_lookahead=32 synth_worker_count=4 "
            "num_gpus=2",
        ),
    ]
    timed: list[tuple[int, int, str]] = []

    def at(t: int, line: str) -> None:
        timed.append((t, len(timed), line))

    at(0, printf(POOL, 0))
    for p in schedule():
        job, idx, w = JOBS[p["job"]], p["idx"], p["worker"]
        at(p["synth_start"], TIMELINE.format(p["synth_start"], "SYNTH_START", job, SYNTH_START.format(idx)))
        synth_ms = p["synth_end"] - p["synth_start"] - 1  # the engine's span is a little longer
        at(
            p["synth_end"],
            tracing(
                ts.format(900000 + p["synth_end"]),
                "cuzk_core::pipeline",
                "partition synthesis complete",
                f"partition={idx} synth_ms={synth_ms} is_pinned=true",
            ),
        )
        at(p["synth_end"], TIMELINE.format(p["synth_end"], "SYNTH_END", job, SYNTH_END.format(idx, synth_ms)))
        at(p["queued"], TIMELINE.format(p["queued"], "GPU_QUEUE", job, GPU_QUEUE.format(idx)))
        detail = GPU_PICKUP.format(w, GPU_PICKUP_PART.format(idx))
        at(p["pickup"], TIMELINE.format(p["pickup"], "GPU_PICKUP", job, detail))
        at(p["start"], TIMELINE.format(p["start"], "GPU_START", job, GPU_START.format(w, idx)))
        at(p["request"] - 1, printf(SPLIT, 1, PRE_LOCK - 1))
        at(p["acquire"], printf(LOCK, PRE_LOCK, p["acquire"] - p["request"]))
        at(p["prep_end"], printf(PREP, PREP_MS))
        at(p["b_g2_end"], printf(B_G2, B_G2_MS, 1))
        at(p["ntt_end"], printf(NTT, 0, NTT_MS))
        if idx == 0 and p["job"] == 0:
            at(p["ntt_end"], printf(D_A, 4096, 0))
        at(p["ntt_end"] + p["barrier"], printf(BARRIER, 0, p["barrier"]))
        at(p["batch_end"], printf(BATCH, 0, BATCH_MS))
        at(p["tail_end"], printf(TAIL, 0, TAIL_MS, p["tail_end"] - p["acquire"]))
        at(p["release"], printf(HELD, HELD_MS, p["release"] - p["start"]))
        gpu_ms = p["end"] - p["start"]
        at(p["end"], TIMELINE.format(p["end"], "GPU_END", job, GPU_END.format(w, idx, gpu_ms)))
    timed.sort()
    return head + [line for _, _, line in timed]


if __name__ == "__main__":
    FIXTURE.write_text("\n".join(lines()) + "\n")
    sys.exit(0)
