"""The pipeline configuration (cuzk-style keys) and the parsing of sizes.

The keys mirror cuzk's daemon TOML where cuzk has one, so a user can point simgpu at the
same file they give the daemon.  Every cuzk key is one of three kinds (README's
configuration section lists them all):

* modelled: it sets what the model runs (``[gpus] devices``, ``gpu_workers_per_device``;
  ``[synthesis] partition_workers`` and its later name ``[pipeline]
  max_parallel_synthesis``; ``[pipeline] max_gpu_queue_depth``; ``[memory]
  total_budget``, ``safety_margin``);
* accepted with no effect on the model, because it changes nothing simgpu models
  (addresses, logging, parameter paths, SRS eviction after idle minutes...);
* refused unless at cuzk's default, with a message saying why, because it changes
  something the profile's numbers do not cover (thread pools, cross-sector batching, the
  pre-Phase 7 pipelines).

plus simgpu's own: ``[gpus] placement`` (which device a partition goes to:
simgpu.sched.placement), [workload] (circuit size, partitions), [run] (proofs,
concurrency, arrival rate, seed, retries) and [hardware] overrides of the profile (vram,
one size for every device or a list of one per device; host_ram).  Command-line flags
override the file.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from simgpu.errors import UserError
from simgpu.units import parse_count, parse_size

#: Upper bounds of the counts a configuration may ask for: beyond them a run would not
#: fit in memory (its event records) long before it finished.
LIMITS = {"devices": 64, "workers": 4096, "proofs": 1_000_000, "partitions": 200_000, "retries": 1000}
#: The placement policies (`[gpus] placement`, `--placement`); simgpu.sched.placement says
#: what each does.  The first is the default: every worker takes from one queue.
PLACEMENTS = ("shared-queue", "round-robin", "best-fit", "most-free")


@dataclass(frozen=True)
class PipelineConfig:
    """Everything about one pipeline run that is not the profile's hardware facts."""

    # [gpus]
    devices: int = 1
    gpu_workers_per_device: int = 2
    placement: str = PLACEMENTS[0]  # which device a partition goes to (simgpu.sched.placement)
    # [synthesis] / [pipeline]
    partition_workers: int = 10
    max_gpu_queue_depth: int = 0  # 0 = unbounded, as in cuzk
    # [memory]
    total_budget: int | None = None  # bytes; None = auto (host RAM - safety margin)
    safety_margin: int = 5 << 30
    # [hardware] overrides of the profile
    #: bytes of VRAM: one size for every device, or one per device (a tuple, a machine of
    #: mixed cards); None = the profile's
    vram: int | tuple[int, ...] | None = None
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
        """This configuration, or one line saying which value is out of range."""
        checks = [
            ("devices", self.devices, 1, LIMITS["devices"]),
            ("gpu_workers_per_device", self.gpu_workers_per_device, 1, LIMITS["workers"]),
            ("partition_workers", self.partition_workers, 1, LIMITS["workers"]),
            ("proofs", self.proofs, 1, LIMITS["proofs"]),
            ("concurrency", self.concurrency, 1, LIMITS["proofs"]),
            ("max_gpu_queue_depth", self.max_gpu_queue_depth, 0, LIMITS["partitions"]),
            ("retries", self.retries, 0, LIMITS["retries"]),
            ("seed", self.seed, 0, 2**63 - 1),
        ]
        if self.partitions is not None:
            checks.append(("partitions", self.partitions, 1, LIMITS["partitions"]))
        if self.constraints is not None:
            checks.append(("constraints", self.constraints, 1, 1 << 40))
        for name, value, low, high in checks:
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise UserError(f"{name}: must be a whole number in {low}..{high:,}, got {value!r}")
        if self.arrival_rate is not None and not (
            isinstance(self.arrival_rate, int | float) and 0 < self.arrival_rate < math.inf
        ):
            raise UserError(f"arrival_rate: must be a positive finite rate, got {self.arrival_rate!r}")
        if not (isinstance(self.retry_backoff, int | float) and 0 <= self.retry_backoff < math.inf):
            raise UserError(f"retry_backoff: must be finite seconds >= 0, got {self.retry_backoff!r}")
        if self.placement not in PLACEMENTS:
            raise UserError(f"placement: unknown policy {self.placement!r} (known: {', '.join(PLACEMENTS)})")
        sizes = self.vram if isinstance(self.vram, tuple) else () if self.vram is None else (self.vram,)
        for size in sizes:
            if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
                raise UserError(f"vram: must be positive, got {size!r}")
        if isinstance(self.vram, tuple) and len(self.vram) != self.devices:
            raise UserError(
                f"vram: {len(self.vram)} sizes for {self.devices} device(s): give one size for every "
                "device, or one per device (--devices sets how many)"
            )
        if self.host_ram is not None and self.host_ram <= 0:
            raise UserError(f"host_ram: must be positive, got {self.host_ram}")
        return self

    def vram_of(self, device: int) -> int | None:
        """Device `device`'s VRAM override in bytes (None: the profile's, or the card's)."""
        return self.vram[device] if isinstance(self.vram, tuple) else self.vram

    def with_overrides(self, **overrides: Any) -> PipelineConfig:
        """A copy with every non-None override applied (how CLI flags beat the file)."""
        known = {f.name for f in fields(self)}
        clean = {k: v for k, v in overrides.items() if v is not None}
        unknown = set(clean) - known
        if unknown:
            raise UserError(f"unknown configuration key(s): {', '.join(sorted(unknown))}")
        return replace(self, **clean).validate()


# (section, key) in the TOML -> (field, parser): the keys the model carries.
_TOML_KEYS: dict[tuple[str, str], tuple[str, Any]] = {
    ("gpus", "devices"): ("devices", "devices"),
    ("gpus", "gpu_workers_per_device"): ("gpu_workers_per_device", int),
    ("gpus", "placement"): ("placement", str),
    ("synthesis", "partition_workers"): ("partition_workers", int),
    # cuzk's later name for the same cap on partition syntheses running at once (0 = 18)
    ("pipeline", "max_parallel_synthesis"): ("partition_workers", "parallel_synthesis"),
    ("pipeline", "max_gpu_queue_depth"): ("max_gpu_queue_depth", int),
    ("memory", "total_budget"): ("total_budget", "budget"),
    ("memory", "safety_margin"): ("safety_margin", "size"),
    ("hardware", "vram"): ("vram", "sizes"),
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
# cuzk keys that change nothing simgpu models: accepted, no effect (the reason each).
NO_EFFECT: dict[tuple[str, str], str] = {
    ("daemon", "listen"): "an address",
    ("daemon", "status_listen"): "an address",
    ("logging", "level"): "logging",
    ("logging", "format"): "logging",
    ("srs", "param_cache"): "a path; the SRS is the profile's resident host memory",
    ("srs", "preload"): "deprecated in cuzk (the SRS loads on demand); resident in the profile",
    ("memory", "eviction_min_idle"): "SRS and PCE stay resident through a run (never idle that long)",
    ("memory", "pinned_budget"): "deprecated in cuzk, ignored there too",
    ("memory", "working_memory_budget"): "deprecated in cuzk, ignored there too",
    ("scheduler", "sort_by_type"): "one proof type per run",
    ("scheduler", "max_batch_wait_ms"): "matters only with cross-sector batching (max_batch_size > 1)",
    ("pipeline", "synthesis_lookahead"): "cuzk sizes that channel from the budget (>= its partition count)",
}
# cuzk keys simgpu accepts only at cuzk's default: (default, why other values are refused).
AT_DEFAULT_ONLY: dict[tuple[str, str], tuple[Any, str]] = {
    ("gpus", "gpu_threads"): (
        0,
        "the profile's b_g2_msm and prep times hold for cuzk's default pool (all cores); "
        "other pool sizes are not modelled",
    ),
    ("synthesis", "threads"): (
        0,
        "the profile's synthesis times hold for cuzk's default rayon pool; other sizes are not modelled",
    ),
    ("scheduler", "max_batch_size"): (1, "cross-sector batching (proofs sharing a GPU pass) is not modelled"),
    ("pipeline", "enabled"): (True, "the unpipelined (monolithic) prover is not modelled"),
    ("pipeline", "slot_size"): (0, "the Phase 6 slotted pipeline is not modelled (simgpu models Phase 7+)"),
    ("pipeline", "synthesis_concurrency"): (
        1,
        "several whole-proof syntheses at once (cuzk's per-proof path) is not modelled; "
        "partition_workers sets the per-partition pipeline's parallelism",
    ),
}
#: cuzk's default for max_parallel_synthesis = 0.
_PARALLEL_SYNTHESIS_DEFAULT = 18


def _convert(section: str, key: str, value: Any, how: Any) -> Any:
    where = f"[{section}] {key}"
    if how == "size":
        return parse_size(value, where)
    if how == "sizes":
        return vram_sizes(value, where)
    if how == "count":
        return parse_count(value, where, 1)
    if how == "budget":
        return None if value == "auto" else parse_size(value, where)
    if how == "parallel_synthesis":
        n = _convert(section, key, value, int)
        return _PARALLEL_SYNTHESIS_DEFAULT if n == 0 else n
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
        if how is str and not isinstance(value, str):
            raise TypeError
        return how(value)
    except (TypeError, ValueError):
        raise UserError(f"{where}: expected {how.__name__}, got {value!r}") from None


def vram_sizes(value: Any, where: str) -> int | tuple[int, ...]:
    """VRAM as given: one size (every device), or a list of one size per device (a
    comma-separated string on the command line, a TOML array in a file).  A list of one
    is that one size."""
    if isinstance(value, str) and "," in value:
        value = value.split(",")
    if not isinstance(value, list):
        return parse_size(value, where)
    if not value:
        raise UserError(f"{where}: give at least one size")
    sizes = tuple(
        parse_size(v.strip() if isinstance(v, str) else v, f"{where} (device {d})")
        for d, v in enumerate(value)
    )
    return sizes[0] if len(sizes) == 1 else sizes


def read_config_table(data: dict[str, Any], source: str = "config") -> dict[str, Any]:
    """Flatten a cuzk-style TOML table into PipelineConfig field overrides."""
    out: dict[str, Any] = {}
    for section, table in data.items():
        if not isinstance(table, dict):
            raise UserError(f"{source}: top-level key {section!r} must be a [section]")
        for key, value in table.items():
            where = (section, key)
            if where in NO_EFFECT:
                continue
            if where in AT_DEFAULT_ONLY:
                default, why = AT_DEFAULT_ONLY[where]
                if value != default or type(value) is not type(default):
                    raise UserError(
                        f"{source}: [{section}] {key} = {value!r}: {why} (remove it or use {default!r})"
                    )
                continue
            if where not in _TOML_KEYS:
                raise UserError(f"{source}: unknown key [{section}] {key}")
            name, how = _TOML_KEYS[where]
            converted = _convert(section, key, value, how)
            if name in out and out[name] != converted:
                raise UserError(
                    f"{source}: [{section}] {key} = {value!r} contradicts another key setting {name} "
                    f"to {out[name]!r} (they set the same thing: give one)"
                )
            out[name] = converted
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
    except UnicodeDecodeError as e:
        raise UserError(f"{what} {p} is not UTF-8 text (byte {e.start}): TOML must be UTF-8") from None
    except IsADirectoryError:
        raise UserError(f"{what} {p} is a directory, not a file") from None
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
