"""A run's records as a cuzk daemon log: the lines `simgpu run --timeline FILE` writes.

The same TIMELINE and CUZK_TIMING lines cuzk prints (formats and the stage mapping in
simgpu.cuzklog, docs/log-format.md), plus the startup lines that say how the
daemon was configured, so that `simgpu calibrate --from-log` reads simgpu's own runs
exactly as it reads cuzk's.  Only what the records hold is written:

* TIMELINE per partition: SYNTH_START/SYNTH_END (the synthesis stage), GPU_QUEUE (the
  partition put on the GPU queue), GPU_PICKUP and GPU_START (a worker took it), GPU_END
  (its epilogue ended); offsets in whole milliseconds, truncated as cuzk's are;
* CUZK_TIMING prep_msm_ms (prep), b_g2_msm_ms (b_g2_msm), pre_lock_cpu_ms/mutex_wait_ms
  (the lock around the kernels acquired), mutex_held_ms/total_start_fn_ms (released);
  and the GPU thread's lines (ntt_msm_h_ms, barrier_wait_ms, batch_add_ms, tail_msm_ms
  with gpu_total_ms) only where the records time the kernels' phases (a model's run
  does; the real runtime times the kernels stage as a whole);
* the startup lines: the rayon pool (the machine's cores), the GPU workers, the
  synthesis workers, and per partition "partition synthesis complete" with its
  num_constraints (a field cuzk's older partition path logs).

Only partitions that completed are written, each with its last attempt (a retried
partition was synthesised again); a line at the top says what was left out.
"""

from __future__ import annotations

import datetime as _dt
import re
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from simgpu.config import PipelineConfig
from simgpu.cuzklog import (
    MUTEX_LOCKS,
    PHASE_FIELDS,
    SOURCE_COMMIT,
    timeline_line,
    timing_line,
    tracing_line,
)
from simgpu.events import Record, RunResult

ENGINE = "cuzk_core::engine"
PIPELINE = "cuzk_core::pipeline"
DAEMON = "cuzk_daemon"


def _ms(seconds: float) -> int:
    # Rust's as_millis and C++'s duration_cast<milliseconds> both truncate
    return max(0, int(seconds * 1000))


def job_id(proof: int) -> str:
    """A job id of the form cuzk gives one (a UUID), fixed by the proof number."""
    return str(uuid.UUID(int=proof + 1))


def worker_ids(records: list[Record]) -> dict[str, int]:
    """simgpu worker names (gpu0.w1) -> cuzk's worker ids: numbered across devices,
    device by device, as cuzk numbers them."""
    names = {r.worker for r in records if r.event == "partition_picked" and r.worker}

    def order(name: str) -> tuple[int, int, str]:
        m = re.fullmatch(r"gpu(\d+)\.w(\d+)", name)
        return (int(m[1]), int(m[2]), name) if m else (1 << 30, 0, name)

    return {name: i for i, name in enumerate(sorted(names, key=order))}


def _last_attempt(recs: list[Record]) -> list[Record]:
    starts = [
        i for i, r in enumerate(recs) if r.event == "stage_start" and r.fields.get("stage") == "synthesis"
    ]
    return recs[starts[-1] :] if starts else []


def _is_mutex(lock: str) -> bool:
    return lock.rsplit("/", 1)[-1] in MUTEX_LOCKS


def timeline_lines(
    result: RunResult,
    config: PipelineConfig,
    constraints: int,
    cores: int,
    started: _dt.datetime | None = None,
) -> list[str]:
    """The log of one run, line by line (see the module docstring)."""
    started = started or _dt.datetime.now(_dt.UTC)
    records = result.records
    workers = worker_ids(records)
    by_part: dict[tuple[int, int], list[Record]] = defaultdict(list)
    completed: set[tuple[int, int]] = set()
    for r in records:
        if r.proof is None or r.partition is None:
            continue
        by_part[(r.proof, r.partition)].append(r)
        if r.event == "partition_completed":
            completed.add((r.proof, r.partition))
    out: list[tuple[float, int, int, str]] = []  # (time, rank, sequence, line)

    def stamp(t: float) -> str:
        return (started + _dt.timedelta(seconds=t)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    def add(t: float, line: str, rank: int = 1) -> None:
        out.append((t, rank, len(out), line))

    total = config.devices * config.gpu_workers_per_device
    add(0.0, tracing_line(stamp(0), DAEMON, "rayon global thread pool configured", rayon_threads=cores))
    add(
        0.0,
        tracing_line(
            stamp(0),
            ENGINE,
            "initializing GPU workers",
            num_gpus=config.devices,
            gpu_workers_per_device=config.gpu_workers_per_device,
            total_workers=total,
            gpus=f"[{', '.join(str(d) for d in range(config.devices))}]",
        ),
    )
    if config.max_gpu_queue_depth:
        add(
            0.0,
            tracing_line(
                stamp(0),
                ENGINE,
                "GPU queue target dispatch pacer enabled",
                gpu_queue_target=config.max_gpu_queue_depth,
            ),
        )
    add(
        0.0,
        tracing_line(
            stamp(0),
            ENGINE,
            "starting pipeline: synthesis task + GPU workers (budget-gated)",
            synth_worker_count=config.partition_workers,
            num_gpus=total,
        ),
    )
    for key in sorted(completed):
        _partition_lines(key, _last_attempt(by_part[key]), workers, constraints, add, stamp)
    out.sort(key=lambda x: (x[0], x[1], x[2]))
    left_out = sorted(set(by_part) - completed)
    head = [
        f"simgpu run --timeline: cuzk's TIMELINE and CUZK_TIMING lines (as curio {SOURCE_COMMIT[:12]} prints "
        "them; docs/log-format.md), written from simgpu's records"
    ]
    if left_out:
        head.append(
            f"simgpu: {len(left_out)} partition(s) that did not complete are left out: "
            + ", ".join(f"proof {p} partition {i}" for p, i in left_out)
        )
    return head + [line for _, _, _, line in out]


Add = Callable[..., None]


def _partition_lines(
    key: tuple[int, int],
    recs: list[Record],
    workers: dict[str, int],
    constraints: int,
    add: Add,
    stamp: Callable[[float], str],
) -> None:
    proof, index = key
    job = job_id(proof)
    picked: Record | None = None
    acquired: Record | None = None
    phases: dict[str, float] = defaultdict(float)
    phase_open: dict[str, float] = {}
    timed_phases = False
    for r in recs:
        f = r.fields
        ev = r.event
        stage = f.get("stage")
        if ev == "stage_start" and stage == "synthesis":
            add(r.t, timeline_line(_ms(r.t), "SYNTH_START", job, f"partition={index}"))
        elif ev == "stage_end" and "error" not in f and stage == "synthesis":
            synth_ms = _ms(f["seconds"])
            add(r.t, timeline_line(_ms(r.t), "SYNTH_END", job, f"partition={index},synth_ms={synth_ms}"))
            add(
                r.t,
                tracing_line(
                    stamp(r.t),
                    PIPELINE,
                    "partition synthesis complete",
                    partition=index,
                    synth_ms=synth_ms,
                    num_constraints=constraints,
                ),
            )
        elif ev == "stage_end" and "error" not in f and stage == "prep":
            add(r.t, timing_line("prep", prep_msm_ms=_ms(f["seconds"])))
        elif ev == "partition_queued":
            add(r.t, timeline_line(_ms(r.t), "GPU_QUEUE", job, f"partition={index}"))
        elif ev == "partition_picked":
            picked = r
            w = workers.get(r.worker or "", 0)
            add(r.t, timeline_line(_ms(r.t), "GPU_PICKUP", job, f"worker={w},partition={index}"))
            add(r.t, timeline_line(_ms(r.t), "GPU_START", job, f"worker={w},partition={index}"))
        elif ev == "lock_acquired" and _is_mutex(f["lock"]) and picked is not None:
            acquired = r
            wait = float(f.get("waited", 0.0))
            pre = r.t - wait - picked.t
            # after whatever else happened at this instant (the holder's release above all)
            add(r.t, timing_line("lock", pre_lock_cpu_ms=_ms(pre), mutex_wait_ms=_ms(wait)), rank=2)
        elif ev == "lock_released" and _is_mutex(f["lock"]) and acquired is not None and picked is not None:
            add(
                r.t,
                timing_line(
                    "held", mutex_held_ms=_ms(r.t - acquired.t), total_start_fn_ms=_ms(r.t - picked.t)
                ),
            )
        elif ev == "phase_start" and stage == "kernels":
            phase_open[f["phase"]] = r.t
        elif ev == "phase_end" and stage == "kernels" and f["phase"] in phase_open:
            phases[f["phase"]] += r.t - phase_open.pop(f["phase"])
            timed_phases = True
        elif ev == "stage_end" and "error" not in f and stage == "kernels" and timed_phases:
            _gpu_thread_lines(r.t, float(f["seconds"]), phases, add)
        elif ev == "stage_end" and "error" not in f and stage == "b_g2_msm":
            add(r.t, timing_line("b_g2", b_g2_msm_ms=_ms(f["seconds"]), num_circuits=1))
        elif ev == "stage_end" and "error" not in f and stage == "epilogue" and picked is not None:
            w = workers.get(picked.worker or "", 0)
            gpu_ms = _ms(r.t - picked.t)
            add(r.t, timeline_line(_ms(r.t), "GPU_END", job, f"worker={w},partition={index},gpu_ms={gpu_ms}"))


def _gpu_thread_lines(t: float, seconds: float, phases: dict[str, float], add: Add) -> None:
    """The GPU thread's lines of one kernels stage whose phases were timed; a phase that
    no cuzk field covers (the seed's "sync") counts in gpu_total_ms only.  The kernels
    never wait for prep (simgpu preps before the queue): barrier_wait_ms is 0."""
    sums = {fld: sum(phases.get(p, 0.0) for p in ours) for fld, ours in PHASE_FIELDS.items()}
    add(t, timing_line("ntt_msm_h", gpu_tid=0, ntt_msm_h_ms=_ms(sums["ntt_msm_h"])))
    add(t, timing_line("barrier", gpu_tid=0, barrier_wait_ms=0))
    add(t, timing_line("batch_add", gpu_tid=0, batch_add_ms=_ms(sums["batch_add"])))
    add(t, timing_line("tail", gpu_tid=0, tail_msm_ms=_ms(sums["tail_msm"]), gpu_total_ms=_ms(seconds)))


def write_timeline(
    path: Path, result: RunResult, config: PipelineConfig, constraints: int, cores: int
) -> int:
    """Write the run's log to `path`; returns how many lines."""
    lines = timeline_lines(result, config, constraints, cores)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return len(lines)
