"""What the log ran: the daemon's configuration and design.

From its startup lines, else from a cuzk TOML (--config), else inferred from the
log itself (and said so): each value a `Setting` that knows where it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from simgpu.cuzklog import CuzkLog
from simgpu.errors import UserError
from simgpu.profile import Profile

#: Where a setting came from, in the order the header lists them.
KINDS = ("log", "config", "inferred", "default", "base")


@dataclass
class Setting:
    """One value of the daemon's configuration, with where it came from."""

    value: Any
    source: str  # in words: which line, which file, or what was inferred or assumed
    kind: str  # one of KINDS


@dataclass
class Settings:
    """The configuration the daemon ran with, each item with where it came from."""

    items: dict[str, Setting] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def set(self, name: str, value: Any, source: str, kind: str) -> None:
        self.items[name] = Setting(value, source, kind)

    def value(self, name: str) -> Any:
        return self.items[name].value

    def by_kind(self, kind: str) -> list[str]:
        return [k for k, v in self.items.items() if v.kind == kind]


def infer_settings(log: CuzkLog, config: dict[str, Any], config_path: str | None, base: Profile) -> Settings:
    """Each setting from the log's startup lines, else --config, else inferred from the
    log's events (or a default, or the base profile), with its source.  Where the log
    and --config disagree, the log's stands (it is what ran) and a note says so."""
    st = Settings()
    cfg_src = f"--config {config_path}"
    lives = list(log.partitions.values())

    def disagree(name: str, value: Any) -> None:
        if name in config and config[name] != value:
            st.notes.append(f"{name}: the log says {value}, {cfg_src} says {config[name]}; the log's is used")

    def pick(name: str, message: str, key: str, fallback: tuple[Any, str, str], scale: int = 1) -> None:
        fact = log.fact(message, key)
        if fact is not None:
            value = int(fact[0]) * scale
            st.set(name, value, f"log line {fact[1]} ({message!r} {key}={fact[0]})", "log")
            disagree(name, value)
        elif name in config:
            st.set(name, config[name], cfg_src, "config")
        else:
            st.set(name, *fallback)

    pick("devices", "initializing GPU workers", "num_gpus", (1, "default: the log does not say", "default"))
    workers = {life.worker for life in lives}
    per = max(1, len(workers) // max(1, st.value("devices")))
    why = f"inferred: {len(workers)} worker id(s) in GPU_START lines"
    pick(
        "gpu_workers_per_device", "initializing GPU workers", "gpu_workers_per_device", (per, why, "inferred")
    )
    most = _most_at_once([(p.at("SYNTH_START"), p.at("SYNTH_END")) for p in lives])
    pick(
        "partition_workers",
        "starting pipeline: synthesis task + GPU workers (budget-gated)",
        "synth_worker_count",
        (most, f"inferred: at most {most} syntheses ran at once (a lower bound)", "inferred"),
    )
    pick(
        "max_gpu_queue_depth",
        "GPU queue target dispatch pacer enabled",
        "gpu_queue_target",
        (0, "default: unbounded (no pacer target in the log)", "default"),
    )
    pick(
        "total_budget",
        "memory budget initialized",
        "total_budget_gib",
        (None, "default: auto (host RAM less the safety margin)", "default"),
        scale=1 << 30,
    )
    pick("gpu_threads", "set CUZK_GPU_THREADS for C++ groth16_pool", "gpu_threads", (0, "default", "default"))
    jobs = log.jobs()
    st.set("proofs", len(jobs), f"the log: {len(jobs)} job id(s)", "log")
    disagree("proofs", len(jobs))
    spans: dict[str, tuple[int, int]] = {}
    for p in lives:
        a, b = spans.get(p.job, (1 << 62, 0))
        spans[p.job] = (min(a, p.at("SYNTH_START")), max(b, p.at("GPU_END")))
    inflight = _most_at_once(list(spans.values()))
    if "concurrency" in config:
        st.set("concurrency", config["concurrency"], cfg_src, "config")
    else:
        why = f"inferred: at most {inflight} job(s) in flight at once (closed loop)"
        st.set("concurrency", inflight, why, "inferred")
    if config.get("arrival_rate"):
        st.set("arrival_rate", config["arrival_rate"], cfg_src, "config")
    counts: dict[str, int] = {}
    for p in lives:
        counts[p.job] = counts.get(p.job, 0) + 1
    if len(set(counts.values())) > 1:
        shown = ", ".join(f"job {j}: {n}" for j, n in list(counts.items())[:3])
        raise UserError(f"{log.path}: jobs have different partition counts ({shown}): one workload per log")
    parts = next(iter(counts.values()))
    st.set("partitions", parts, f"the log: {parts} partition(s) per job", "log")
    disagree("partitions", parts)
    sizes = sorted(
        {(int(f.fields["num_constraints"]), f.line) for f in log.startup if "num_constraints" in f.fields}
    )
    if len({n for n, _ in sizes}) > 1:
        raise UserError(
            f"{log.path}: partitions of different sizes in one log ({sorted({n for n, _ in sizes})})"
        )
    if sizes:
        n, line = min(sizes, key=lambda x: x[1])
        st.set("constraints", n, f"log line {line} (num_constraints={n})", "log")
        disagree("constraints", n)
    elif "constraints" in config:
        st.set("constraints", config["constraints"], cfg_src, "config")
    else:
        wl = base.workload()
        why = (
            f"the base profile's workload {wl.name}: the log does not say (pass --config with [workload] "
            "constraints)"
        )
        st.set("constraints", wl.constraints, why, "base")
    cores = log.fact("rayon global thread pool configured", "rayon_threads")
    if cores is not None:
        why = f"log line {cores[1]} (rayon_threads={cores[0]}: the synthesis pool)"
        st.set("cpu_cores", int(cores[0]), why, "log")
    else:
        st.set("cpu_cores", base.hardware.cpu_cores, f"the base profile {base.name}", "base")
    return st


def _most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most intervals open at one instant (an end at the instant of a start does not
    overlap it)."""
    events = sorted([(a, 1) for a, _ in spans] + [(b, 0) for _, b in spans])
    most = cur = 0
    for _, kind in events:
        cur += 1 if kind else -1
        most = max(most, cur)
    return max(1, most)


def infer_design(log: CuzkLog) -> tuple[str, str]:
    """single-lock or split-finalizer, and why: a worker that takes its next partition
    before its previous one's GPU_END hands the tail to a finalizer (cuzk's Phase 12
    split API).  A log cannot tell single-lock from serial or two-lock."""
    by_worker: dict[int, list[Any]] = {}
    for p in log.partitions.values():
        by_worker.setdefault(p.worker, []).append(p)
    for w, ps in sorted(by_worker.items()):
        ps.sort(key=lambda p: p.at("GPU_PICKUP"))
        for prev, nxt in zip(ps, ps[1:], strict=False):
            if nxt.at("GPU_PICKUP") < prev.at("GPU_END"):
                return (
                    "split-finalizer",
                    f"worker {w} took job {nxt.job} partition {nxt.index} (line "
                    f"{nxt.events['GPU_PICKUP'].line}) before its previous GPU_END (line "
                    f"{prev.events['GPU_END'].line})",
                )
    return "single-lock", "every worker finished a partition (GPU_END) before taking its next"
