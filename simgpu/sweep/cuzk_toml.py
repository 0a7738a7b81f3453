"""A PipelineConfig written back as a cuzk-style TOML: the inverse of config.read_config_table.

What tune hands over: a file a user can read, give to `simgpu predict --config`, and
(for the keys cuzk has) to the daemon.  Sizes are written as a person writes them
(`24GiB`) when they are whole GiB or MiB, so the file reads back to the same bytes.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from simgpu.config import PipelineConfig
from simgpu.profile.tomlwrite import dumps

#: PipelineConfig field -> (section, key) of the TOML, in the order they are written.
KEYS: dict[str, tuple[str, str]] = {
    "devices": ("gpus", "devices"),
    "gpu_workers_per_device": ("gpus", "gpu_workers_per_device"),
    "placement": ("gpus", "placement"),
    "partition_workers": ("synthesis", "partition_workers"),
    "max_gpu_queue_depth": ("pipeline", "max_gpu_queue_depth"),
    "total_budget": ("memory", "total_budget"),
    "safety_margin": ("memory", "safety_margin"),
    "vram": ("hardware", "vram"),
    "host_ram": ("hardware", "host_ram"),
    "workload": ("workload", "name"),
    "partitions": ("workload", "partitions"),
    "constraints": ("workload", "constraints"),
    "proofs": ("run", "proofs"),
    "concurrency": ("run", "concurrency"),
    "arrival_rate": ("run", "arrival_rate"),
    "seed": ("run", "seed"),
    "retries": ("run", "retries"),
    "retry_backoff": ("run", "retry_backoff"),
}
_SIZES = frozenset({"total_budget", "safety_margin", "vram", "host_ram"})


def _size(n: int) -> str | int:
    for unit, shift in (("GiB", 30), ("MiB", 20)):
        if n and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return n


def config_table(cfg: PipelineConfig) -> dict[str, dict[str, Any]]:
    """The TOML tables of `cfg`: every field that is set (an unset one keeps its default)."""
    doc: dict[str, dict[str, Any]] = {}
    for f in fields(cfg):
        if f.name not in KEYS:
            # A new PipelineConfig field must get its TOML key here, or tune's file would
            # silently lose it.
            raise ValueError(f"no cuzk TOML key for PipelineConfig.{f.name}")
        value = getattr(cfg, f.name)
        if f.name == "total_budget" and value is None:
            value = "auto"
        if value is None or (f.name == "workload" and not value):
            continue
        if f.name == "devices":
            value = list(range(value))  # cuzk lists GPU ordinals; simgpu reads how many
        elif f.name in _SIZES and isinstance(value, int):
            value = _size(value)
        elif f.name in _SIZES and isinstance(value, tuple):  # one VRAM size per device
            value = [_size(v) for v in value]
        section, key = KEYS[f.name]
        doc.setdefault(section, {})[key] = value
    return doc


def config_toml(cfg: PipelineConfig, header: str = "") -> str:
    """`cfg` as cuzk-style TOML text, `header` as comment lines on top."""
    return dumps(config_table(cfg), header=header)
