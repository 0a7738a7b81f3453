"""The pipeline configuration (cuzk-style keys) and the parsing of sizes.

The keys mirror cuzk's daemon TOML where cuzk has one, so a user can point simgpu at the
same file they give the daemon:

    [gpus]      devices, gpu_workers_per_device, gpu_threads
    [synthesis] partition_workers, threads
    [pipeline]  max_gpu_queue_depth, synthesis_concurrency
    [memory]    total_budget, safety_margin

plus simgpu's own: [workload] (circuit size, partitions), [run] (proofs, concurrency,
arrival rate, seed, retries) and [hardware] overrides of the profile (vram, host_ram).  Command-line flags
override the file.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from simgpu.errors import UserError
from simgpu.units import parse_count, parse_size


@dataclass(frozen=True)
class PipelineConfig:
    """Everything about one pipeline run that is not the profile's hardware facts."""

    # [gpus]
    devices: int = 1
    gpu_workers_per_device: int = 2
    gpu_threads: int = 0  # CPU threads of the b_g2_msm pool; 0 = the profile's default
    # [synthesis] / [pipeline]
    partition_workers: int = 10
    max_gpu_queue_depth: int = 0  # 0 = unbounded, as in cuzk
    # [memory]
    total_budget: int | None = None  # bytes; None = auto (host RAM - safety margin)
    safety_margin: int = 5 << 30
    # [hardware] overrides of the profile
    vram: int | None = None
    host_ram: int | None = None  # bytes of host RAM; None = the profile's
    # [workload]
    workload: str = ""
    partitions: int | None = None
    constraints: int | None = None
    # [run]
    proofs: int = 3
    concurrency: int = 3
    arrival_rate: float | None = None  # proofs per second, open loop (None = closed loop)
    seed: int = 0
    retries: int = 0  # re-queue a partition this many times after VramExhausted
    retry_backoff: float = 1.0  # seconds before a retried partition re-enters the GPU queue

    def validate(self) -> PipelineConfig:
        checks = [
            ("devices", self.devices, 1),
            ("gpu_workers_per_device", self.gpu_workers_per_device, 1),
            ("partition_workers", self.partition_workers, 1),
            ("proofs", self.proofs, 1),
            ("concurrency", self.concurrency, 1),
            ("max_gpu_queue_depth", self.max_gpu_queue_depth, 0),
            ("retries", self.retries, 0),
            ("gpu_threads", self.gpu_threads, 0),
        ]
        for name, value, low in checks:
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise UserError(f"{name}: must be a whole number >= {low}, got {value!r}")
        if self.partitions is not None and self.partitions < 1:
            raise UserError(f"partitions: must be at least 1, got {self.partitions}")
        if self.constraints is not None and self.constraints < 1:
            raise UserError(f"constraints: must be at least 1, got {self.constraints}")
        if self.arrival_rate is not None and not (self.arrival_rate > 0):
            raise UserError(f"arrival_rate: must be positive, got {self.arrival_rate}")
        if not (self.retry_backoff >= 0):
            raise UserError(f"retry_backoff: must be >= 0 seconds, got {self.retry_backoff}")
        if self.vram is not None and self.vram <= 0:
            raise UserError(f"vram: must be positive, got {self.vram}")
        if self.host_ram is not None and self.host_ram <= 0:
            raise UserError(f"host_ram: must be positive, got {self.host_ram}")
        return self

    def with_overrides(self, **overrides: Any) -> PipelineConfig:
        """A copy with every non-None override applied (how CLI flags beat the file)."""
        known = {f.name for f in fields(self)}
        clean = {k: v for k, v in overrides.items() if v is not None}
        unknown = set(clean) - known
        if unknown:
            raise UserError(f"unknown configuration key(s): {', '.join(sorted(unknown))}")
        return replace(self, **clean).validate()


# (section, key) in the TOML -> (field, parser)
_TOML_KEYS: dict[tuple[str, str], tuple[str, Any]] = {
    ("gpus", "devices"): ("devices", "devices"),
    ("gpus", "gpu_workers_per_device"): ("gpu_workers_per_device", int),
    ("gpus", "gpu_threads"): ("gpu_threads", int),
    ("synthesis", "partition_workers"): ("partition_workers", int),
    ("pipeline", "synthesis_concurrency"): ("partition_workers", int),
    ("pipeline", "max_gpu_queue_depth"): ("max_gpu_queue_depth", int),
    ("memory", "total_budget"): ("total_budget", "budget"),
    ("memory", "safety_margin"): ("safety_margin", "size"),
    ("hardware", "vram"): ("vram", "size"),
    ("hardware", "host_ram"): ("host_ram", "size"),
    ("workload", "name"): ("workload", str),
    ("workload", "partitions"): ("partitions", int),
    ("workload", "constraints"): ("constraints", "count"),
    ("run", "proofs"): ("proofs", int),
    ("run", "concurrency"): ("concurrency", int),
    ("run", "arrival_rate"): ("arrival_rate", float),
    ("run", "seed"): ("seed", int),
    ("run", "retries"): ("retries", int),
    ("run", "retry_backoff"): ("retry_backoff", float),
}
# cuzk keys that exist but do not change what simgpu models; accepted and ignored.
_IGNORED = {
    ("daemon", "listen"),
    ("daemon", "status_listen"),
    ("memory", "eviction_min_idle"),
    ("synthesis", "threads"),
    ("scheduler", "max_batch_size"),
    ("scheduler", "max_batch_wait_ms"),
    ("scheduler", "sort_by_type"),
    ("pipeline", "enabled"),
    ("pipeline", "synthesis_lookahead"),
    ("pipeline", "slot_size"),
    ("srs", "param_cache"),
    ("srs", "preload"),
    ("logging", "level"),
    ("logging", "format"),
}


def _convert(section: str, key: str, value: Any, how: Any) -> Any:
    where = f"[{section}] {key}"
    if how == "size":
        return parse_size(value, where)
    if how == "count":
        return parse_count(value, where, 1)
    if how == "budget":
        return None if value == "auto" else parse_size(value, where)
    if how == "devices":
        # cuzk lists GPU ordinals; simgpu only needs how many.
        if isinstance(value, list):
            if not value:
                return None
            return len(value)
        return _convert(section, key, value, int)
    try:
        if how is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError
        if how is float and isinstance(value, bool):
            raise TypeError
        return how(value)
    except (TypeError, ValueError):
        raise UserError(f"{where}: expected {how.__name__}, got {value!r}") from None


def read_config_table(data: dict[str, Any], source: str = "config") -> dict[str, Any]:
    """Flatten a cuzk-style TOML table into PipelineConfig field overrides."""
    out: dict[str, Any] = {}
    for section, table in data.items():
        if not isinstance(table, dict):
            raise UserError(f"{source}: top-level key {section!r} must be a [section]")
        for key, value in table.items():
            if (section, key) in _IGNORED:
                continue
            if (section, key) not in _TOML_KEYS:
                raise UserError(f"{source}: unknown key [{section}] {key}")
            name, how = _TOML_KEYS[(section, key)]
            out[name] = _convert(section, key, value, how)
    return out


def load_toml(path: str | Path, what: str = "TOML file") -> dict[str, Any]:
    """Read a TOML file; any problem becomes one UserError line."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise UserError(f"{what} not found: {p}") from None
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{what} {p} is not valid TOML: {e}") from None
    except OSError as e:
        raise UserError(f"cannot read {what} {p}: {e.strerror}") from None


def load_config(path: str | Path | None, base: PipelineConfig | None = None) -> PipelineConfig:
    """The defaults, then the file's keys (if any)."""
    cfg = base or PipelineConfig()
    if path is None:
        return cfg.validate()
    overrides = read_config_table(load_toml(path, "config file"), str(path))
    return replace(cfg, **overrides).validate()


@dataclass(frozen=True)
class Workload:
    """What is being proved: `partitions` circuits of `constraints` constraints each."""

    name: str
    partitions: int
    constraints: int
    params: dict[str, float] = field(default_factory=dict)

    @property
    def domain(self) -> int:
        """The NTT domain: the next power of two >= constraints."""
        return 1 << max(0, (self.constraints - 1).bit_length())
