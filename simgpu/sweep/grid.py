"""The grid of a sweep: six axes, each a range or a list, and the points of their product.

Like a test matrix in CI: each axis lists the values to try (`--vram 8G..48G:4G`,
`--gpu-workers 1,2,4`, `--design single-lock,two-lock`), and every combination is one
point.  An axis that is not given holds the one value of the base configuration, so a
point always carries every value it was run with.  The same axes are tune's search space.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from simgpu.config import PipelineConfig
from simgpu.errors import UserError, fmt_bytes
from simgpu.sched.registry import BUILTIN, resolve_design
from simgpu.units import parse_size

#: The axes in grid order (the first varies slowest), with the flag that sets each.
AXES: dict[str, str] = {
    "design": "--design",
    "gpu_workers": "--gpu-workers",
    "partition_workers": "--partition-workers",
    "vram": "--vram",
    "host_ram": "--host-ram",
    "concurrency": "--concurrency",
}
SIZE_AXES = frozenset({"vram", "host_ram"})
COUNT_AXES = frozenset({"gpu_workers", "partition_workers", "concurrency"})
#: A grid larger than this is a typo (1..100000), not a sweep anyone means to run.
MAX_POINTS = 50_000


def _axis_field(axis: str) -> str:
    """The PipelineConfig field an axis sets."""
    return {"gpu_workers": "gpu_workers_per_device"}.get(axis, axis)


@dataclass(frozen=True)
class Axis:
    """One axis: its values in order, and, when it was written as a single stepped range,
    that range (tune searches it as an ordered integer space instead of unordered choices)."""

    name: str
    values: tuple[Any, ...]
    span: tuple[int, int, int] | None = None  # (low, high, step), high reached by the values

    @property
    def varies(self) -> bool:
        return len(self.values) > 1

    def label(self, value: Any) -> str:
        """A value as a person reads it: sizes in GiB, designs and counts as written."""
        return fmt_bytes(value) if self.name in SIZE_AXES else str(value)

    def short(self, value: Any) -> str:
        """A value for a narrow column or a tick: 16G for whole GiB (as the flags take it)."""
        if self.name in SIZE_AXES and value % (1 << 30) == 0:
            return f"{value >> 30}G"
        return self.label(value)


def _whole(text: str, what: str) -> int:
    """A count of workers or clients: a whole number as written (no units, no fractions)."""
    s = text.strip()
    if not s.isdigit():
        raise UserError(f"{what}: expected a whole number, got {s!r}")
    return int(s)


def _range(axis: str, item: str, parse: Any) -> tuple[list[int], tuple[int, int, int]]:
    flag = AXES[axis]
    low_s, _, rest = item.partition("..")
    high_s, colon, step_s = rest.partition(":")
    if not low_s.strip() or not high_s.strip() or (colon and not step_s.strip()):
        raise UserError(f"{flag} {item!r}: a range is low..high or low..high:step")
    low, high = parse(low_s, f"{flag} {item!r}"), parse(high_s, f"{flag} {item!r}")
    if step_s.strip():
        step = parse(step_s, f"{flag} {item!r} step")
    elif axis in SIZE_AXES:
        raise UserError(f"{flag} {item!r}: a size range needs a step, e.g. {low_s}..{high_s}:4G")
    else:
        step = 1
    if step <= 0:
        raise UserError(f"{flag} {item!r}: the step must be positive")
    if high < low:
        raise UserError(f"{flag} {item!r}: the range runs backwards (low > high)")
    count = (high - low) // step + 1
    if count > MAX_POINTS:
        raise UserError(f"{flag} {item!r}: {count:,} values on one axis; the grid limit is {MAX_POINTS:,}")
    values = [low + i * step for i in range(count)]
    return values, (low, values[-1], step)


def parse_axis(axis: str, text: str) -> Axis:
    """An axis from its flag's text: a comma-separated list of values and ranges.

    Sizes read as `parse_size` reads them (16G, 24GiB, 2^34); a size range needs a step
    (8G..48G:4G); a count range steps by 1 unless told (1..8:2).  Designs are names or
    path/to/file.py:name, or `all` for every shipped design.
    """
    if axis not in AXES:
        raise UserError(f"unknown axis {axis!r} (axes: {', '.join(AXES)})")
    flag = AXES[axis]
    items = [x.strip() for x in str(text).split(",")]
    if not any(items) or not all(items):
        raise UserError(f"{flag} {text!r}: an empty value in the list")
    if axis == "design":
        names = list(BUILTIN) if items == ["all"] else items
        for name in names:
            resolve_design(name)  # an unknown design is a bad grid: say so before any point runs
        return Axis(axis, tuple(dict.fromkeys(names)))
    parse = parse_size if axis in SIZE_AXES else _whole
    values: list[int] = []
    span = None
    for item in items:
        if ".." in item:
            got, span = _range(axis, item, parse)
            values.extend(got)
        else:
            values.append(parse(item, f"{flag} {item!r}"))
    bad = [v for v in values if v < 1]
    if bad:
        raise UserError(f"{flag} {text!r}: every value must be at least 1, got {bad[0]}")
    unique = tuple(dict.fromkeys(values))
    # A single stepped range is an ordered space for tune; anything else is a set of choices.
    return Axis(axis, unique, span if len(items) == 1 and span is not None else None)


@dataclass(frozen=True)
class Point:
    """One configuration of the grid: a value on every axis."""

    design: str
    gpu_workers: int
    partition_workers: int
    vram: int
    host_ram: int
    concurrency: int

    def axes(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in AXES}

    def overrides(self) -> dict[str, Any]:
        """The PipelineConfig fields this point sets (everything but the design)."""
        return {_axis_field(name): value for name, value in self.axes().items() if name != "design"}

    def config(self, base: PipelineConfig) -> PipelineConfig:
        return base.with_overrides(**self.overrides())

    def label(self) -> str:
        return (
            f"{self.design}, {self.gpu_workers} GPU workers, {self.partition_workers} partition workers, "
            f"{fmt_bytes(self.vram)} VRAM, {fmt_bytes(self.host_ram)} host RAM, j={self.concurrency}"
        )


@dataclass(frozen=True)
class Grid:
    """The axes of a sweep (every one present, in AXES order) and their product."""

    axes: tuple[Axis, ...]

    def axis(self, name: str) -> Axis:
        for a in self.axes:
            if a.name == name:
                return a
        raise UserError(f"unknown axis {name!r} (axes: {', '.join(AXES)})")

    @property
    def size(self) -> int:
        n = 1
        for a in self.axes:
            n *= len(a.values)
        return n

    def varying(self) -> list[str]:
        return [a.name for a in self.axes if a.varies]

    def points(self) -> Iterator[Point]:
        for combo in itertools.product(*(a.values for a in self.axes)):
            yield Point(**dict(zip(AXES, combo, strict=True)))


def build_grid(
    specs: dict[str, str | None], base: PipelineConfig, default_vram: int, default_host_ram: int, design: str
) -> Grid:
    """The grid of the given axis specs (axis -> flag text, None = not given).

    An axis not given holds the base configuration's value (its VRAM and host RAM, or the
    profile's `default_vram` / `default_host_ram`); the design axis defaults to `design`.
    Every point's configuration is validated here, so a bad grid fails before any point runs.
    """
    unknown = set(specs) - set(AXES)
    if unknown:
        raise UserError(f"unknown axis {sorted(unknown)[0]!r} (axes: {', '.join(AXES)})")
    defaults: dict[str, Any] = {
        "design": design,
        "gpu_workers": base.gpu_workers_per_device,
        "partition_workers": base.partition_workers,
        "vram": base.vram if base.vram is not None else default_vram,
        "host_ram": base.host_ram if base.host_ram is not None else default_host_ram,
        "concurrency": base.concurrency,
    }
    axes = []
    for name in AXES:
        text = specs.get(name)
        axes.append(Axis(name, (defaults[name],)) if text is None else parse_axis(name, text))
    grid = Grid(tuple(axes))
    if grid.size > MAX_POINTS:
        raise UserError(f"the grid has {grid.size:,} points; the limit is {MAX_POINTS:,} (narrow an axis)")
    if "design" not in specs or specs.get("design") is None:
        resolve_design(design)
    # Each axis value on its own is checked by PipelineConfig (e.g. concurrency >= 1).
    for a in grid.axes:
        if a.name != "design":
            for v in a.values:
                try:
                    base.with_overrides(**{_axis_field(a.name): v})
                except UserError as e:
                    raise UserError(f"{AXES[a.name]}: {e}") from None
    return grid
