"""Profiles: what one machine + prover costs, as laws in the partition size.

A profile (TOML under calibration/) says, for one machine and one prover:

* ``[hardware]``: GPU, VRAM and what is resident on it, cores, host RAM and what is
  resident there (pinned SRS...), host memory bandwidth, host-to-device bandwidth;
* ``[workloads.NAME]``: named circuits (partitions x constraints), one of them default;
* ``[buffers]``: every named buffer's bytes as a law of n (constraints per partition)
  and N (the NTT domain, 2^ceil(log2 n)); ``host_*`` buffers live in host RAM, the rest
  on the device;
* ``[stages.NAME]``: per stage of DESIGN.md, a time law (or a list of phases, each with
  its own), its noise, which shared resources it leans on and how hard (``uses``), and
  its footprints: buffers it leaves behind (``host_out``, ``vram_out``), consumes
  (``vram_in``), releases (``host_release``, a phase's ``release``) and holds only while
  it runs (``transient``).

Laws are small arithmetic expressions over n, N, log2(.), sqrt(.), min/max, GiB/MiB/KiB,
and named coefficients given beside them, e.g. ``time = {law = "a + b*N*log2(N)", a =
0.01, b = 1.1e-9}``.  One place owns each fact: a buffer's size lives in ``[buffers]``
and stages refer to it by name.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from simgpu.config import Workload, load_toml, parse_size
from simgpu.errors import UserError

STAGES = ("synthesis", "prep", "prestage", "kernels", "b_g2_msm", "epilogue")
#: Host resources: memory bandwidth (GB/s), cores, the driver process's interpreter lock
#: (`gil`, capacity 1: a prover driven from Python runs its stages' Python parts one at a
#: time, whichever thread they are on), and the driver's channel for results coming back
#: from worker processes (`driver_rx`, capacity 1: one thread reads them all, in turn).
HOST_RESOURCES = ("membw", "cores", "gil", "driver_rx")
DEVICE_RESOURCES = ("gpu", "h2d")

# --------------------------------------------------------------------------- laws

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.FloorDiv: operator.floordiv,
}
_FUNCS = {
    "log2": math.log2,
    "log": math.log,
    "sqrt": math.sqrt,
    "ceil": math.ceil,
    "floor": math.floor,
    "min": min,
    "max": max,
}
_CONSTS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def _check_ast(node: ast.AST, names: set[str], text: str) -> None:
    for sub in ast.walk(node):
        ok = isinstance(
            sub,
            ast.Expression
            | ast.BinOp
            | ast.UnaryOp
            | ast.Constant
            | ast.Name
            | ast.Call
            | ast.Load
            | ast.operator
            | ast.unaryop,
        )
        if not ok:
            raise UserError(f"law {text!r}: {type(sub).__name__} is not allowed")
        if isinstance(sub, ast.BinOp) and type(sub.op) not in _BINOPS:
            raise UserError(f"law {text!r}: operator not allowed")
        if isinstance(sub, ast.Call):
            if not isinstance(sub.func, ast.Name) or sub.func.id not in _FUNCS or sub.keywords:
                raise UserError(f"law {text!r}: only {', '.join(_FUNCS)} may be called")
        if isinstance(sub, ast.Name) and sub.id not in names and sub.id not in _FUNCS:
            raise UserError(f"law {text!r}: unknown name {sub.id!r}")
        if isinstance(sub, ast.Constant) and not isinstance(sub.value, int | float):
            raise UserError(f"law {text!r}: only numbers are allowed")


@dataclass(frozen=True)
class Law:
    """A quantity as a function of the partition size: expression + coefficients."""

    expr: str
    coeffs: Mapping[str, float] = field(default_factory=dict)

    @cached_property
    def _code(self) -> Any:
        try:
            # '^' reads as a power in a profile (2^27), as it does in parse_size.
            tree = ast.parse(self.expr.replace("^", "**"), mode="eval")
        except SyntaxError:
            raise UserError(f"law {self.expr!r} is not a valid expression") from None
        _check_ast(tree, {"n", "N", *_CONSTS, *self.coeffs}, self.expr)
        return compile(tree, "<law>", "eval")

    def __call__(self, n: int) -> float:
        N = 1 << max(0, (int(n) - 1).bit_length())
        env = {"n": float(n), "N": float(N), **_CONSTS, **self.coeffs, **_FUNCS}
        try:
            value = eval(self._code, {"__builtins__": {}}, env)  # noqa: S307 - AST checked above
        except (ZeroDivisionError, ValueError, OverflowError) as e:
            raise UserError(f"law {self.expr!r} fails at n={n}: {e}") from None
        return float(value)

    def validate(self) -> Law:
        _ = self._code
        return self

    @staticmethod
    def parse(value: Any, where: str) -> Law | PointsLaw:
        """A law from TOML: a number, a size string ('4GiB'), an expression, a table
        {law = ..., coefficients...}, or measured points {points = [[n, value], ...]}, with
        an optional law for sizes outside them (beyond = {law = ..., ...})."""
        if isinstance(value, dict) and "points" in value:
            if set(value) - {"points", "beyond"}:
                extra = ", ".join(sorted(set(value) - {"points", "beyond"}))
                raise UserError(f"{where}: a points table takes points and beyond, not {extra}")
            return PointsLaw.parse(value["points"], where, value.get("beyond"))
        if isinstance(value, bool):
            raise UserError(f"{where}: expected a number or a law, got {value!r}")
        if isinstance(value, int | float):
            return Law(repr(float(value)))
        if isinstance(value, str):
            try:
                return Law(str(parse_size(value, where)))
            except UserError:
                return Law(value).validate()
        if isinstance(value, dict):
            if "law" not in value:
                raise UserError(f"{where}: a law table needs a 'law' key")
            coeffs = {}
            for k, v in value.items():
                if k == "law":
                    continue
                if isinstance(v, bool) or not isinstance(v, int | float):
                    raise UserError(f"{where}: coefficient {k} must be a number")
                coeffs[k] = float(v)
            return Law(str(value["law"]), coeffs).validate()
        raise UserError(f"{where}: expected a number or a law, got {value!r}")


@dataclass(frozen=True)
class PointsLaw:
    """A quantity measured at a few sizes: linear between neighbouring points and, beyond
    them, along the nearest segment if it rises (else flat: a noisy falling segment says
    nothing about larger sizes).  Exact where it was measured, which matters for
    footprints that step with the MSM window and fit no smooth law."""

    points: tuple[tuple[float, float], ...]
    #: Outside the measured sizes, if given: the law fitted over all of them.  A law fitted
    #: to every point carries less of one size's noise into a larger size than the last
    #: segment does, and follows the curvature (n log n, a window step) a segment lacks.
    beyond: Law | None = None

    def __call__(self, n: int) -> float:
        pts = self.points
        if self.beyond is not None and not pts[0][0] <= n <= pts[-1][0]:
            return max(0.0, self.beyond(n))
        if len(pts) == 1:
            return pts[0][1] * n / pts[0][0]
        i = 1
        while i < len(pts) - 1 and n > pts[i][0]:
            i += 1
        (x0, y0), (x1, y1) = pts[i - 1], pts[i]
        if (n > x1 or n < x0) and y1 <= y0:
            return y1 if n > x1 else y0
        return max(0.0, y0 + (y1 - y0) * (n - x0) / (x1 - x0))

    @staticmethod
    def parse(value: Any, where: str, beyond: Any = None) -> PointsLaw:
        law = None
        if beyond is not None:
            law = Law.parse(beyond, f"{where}.beyond")
            if not isinstance(law, Law):
                raise UserError(f"{where}.beyond: expected a law, not points")
        try:
            pts = tuple(sorted((float(a), float(b)) for a, b in value))
        except (TypeError, ValueError):
            raise UserError(f"{where}: points must be [[n, value], ...]") from None
        if not pts or len({p[0] for p in pts}) != len(pts) or pts[0][0] <= 0:
            raise UserError(f"{where}: points need distinct positive sizes")
        return PointsLaw(pts, law)


# --------------------------------------------------------------------- stage specs


@dataclass(frozen=True)
class Use:
    """How a stage leans on one shared resource: `demand` while it runs at full speed
    (GB/s of memory bandwidth, cores, a fraction of the GPU...) and `bound`, the fraction
    of its unloaded time that this resource limits.  When the resource is oversubscribed
    by a factor f, that fraction of the stage stretches by f (see model.contention)."""

    demand: float
    bound: float


@dataclass(frozen=True)
class UseLaw:
    """A Use as a function of the partition size: `demand` and `bound` are each a number
    or a law (a stage's share of the interpreter falls as its kernels grow longer)."""

    demand: Law | PointsLaw
    bound: Law | PointsLaw

    def at(self, n: int) -> Use:
        return Use(self.demand(n), self.bound(n))


@dataclass(frozen=True)
class Phase:
    """A step inside a stage with its own time and transient buffers.  `release` names
    input buffers the stage is done with at the end of this phase."""

    name: str
    time: Law
    transient: tuple[str, ...] = ()
    release: tuple[str, ...] = ()
    uses: Mapping[str, UseLaw] | None = None  # None: the stage's


@dataclass(frozen=True)
class StageSpec:
    name: str
    on: str  # "cpu" or "gpu"
    phases: tuple[Phase, ...]
    noise_cv: float = 0.0
    uses: Mapping[str, UseLaw] = field(default_factory=dict)
    host_out: tuple[str, ...] = ()
    vram_out: tuple[str, ...] = ()
    vram_in: tuple[str, ...] = ()
    host_release: tuple[str, ...] = ()
    host_transient: tuple[str, ...] = ()


@dataclass(frozen=True)
class Hardware:
    gpu: str
    vram: int
    vram_resident: Law  # bytes held on the device before any partition (may grow with n)
    cpu_cores: int
    host_ram: int
    host_resident: int
    membw_gbps: float
    h2d_gbps: float


# --------------------------------------------------------------------- resolution


@dataclass(frozen=True)
class ResolvedPhase:
    name: str
    seconds: float
    transient: tuple[tuple[str, int], ...]
    release: tuple[str, ...]
    uses: Mapping[str, Use]


@dataclass(frozen=True)
class ResolvedStage:
    """A stage at one partition size: seconds and bytes instead of laws."""

    name: str
    on: str
    phases: tuple[ResolvedPhase, ...]
    noise_cv: float
    host_out: tuple[tuple[str, int], ...]
    vram_out: tuple[tuple[str, int], ...]
    vram_in: tuple[tuple[str, int], ...]
    host_release: tuple[str, ...]
    host_transient: tuple[tuple[str, int], ...]

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.phases)


@dataclass(frozen=True)
class Resolved:
    """A profile evaluated at one partition size n."""

    n: int
    buffers: Mapping[str, int]
    stages: Mapping[str, ResolvedStage]
    partition_estimate: int
    vram_resident: int = 0

    def producer_of(self, buffer: str) -> str | None:
        for st in self.stages.values():
            if any(name == buffer for name, _ in st.vram_out):
                return st.name
        return None

    def vram_peak(self, stages: tuple[str, ...]) -> int:
        """Peak device bytes one partition holds running `stages` in order, when the
        buffers a stage leaves behind stay until the end of the sequence (the design
        frees its handle afterwards)."""
        live: dict[str, int] = {}
        peak = 0
        for name in stages:
            st = self.stages[name]
            for buf, size in st.vram_in:
                if buf not in live:
                    live[buf] = size  # allocated by the stage itself (nothing pre-staged)
            peak = max(peak, sum(live.values()))
            for ph in st.phases:
                cur = sum(live.values()) + sum(b for _, b in ph.transient)
                peak = max(peak, cur)
                for buf in ph.release:
                    live.pop(buf, None)
            for buf, size in st.vram_out:
                live[buf] = size
                peak = max(peak, sum(live.values()))
        return peak


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    hardware: Hardware
    workloads: Mapping[str, Workload]
    default_workload: str
    buffers: Mapping[str, Law]
    stages: Mapping[str, StageSpec]
    partition_estimate: Law
    source: str = ""
    path: str = ""
    #: For a profile written by `simgpu calibrate`: the prover's settings its stage times
    #: hold for (how many cores one b_g2_msm was split over, b_g2_threads).
    calibrated_b_g2_threads: int | None = None

    def workload(self, name: str | None = None) -> Workload:
        key = name or self.default_workload
        if key not in self.workloads:
            known = ", ".join(sorted(self.workloads))
            raise UserError(f"unknown workload {key!r} in profile {self.name} (known: {known})")
        return self.workloads[key]

    def resolve(self, n: int) -> Resolved:
        sizes = {name: max(0, int(round(law(n)))) for name, law in self.buffers.items()}

        def sized(names: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
            return tuple((b, sizes[b]) for b in names)

        stages = {}
        for st in self.stages.values():
            phases = tuple(
                ResolvedPhase(
                    ph.name,
                    max(0.0, ph.time(n)),
                    sized(ph.transient),
                    ph.release,
                    _uses_at(ph.uses if ph.uses is not None else st.uses, n, f"[stages.{st.name}] {ph.name}"),
                )
                for ph in st.phases
            )
            stages[st.name] = ResolvedStage(
                st.name,
                st.on,
                phases,
                st.noise_cv,
                sized(st.host_out),
                sized(st.vram_out),
                sized(st.vram_in),
                st.host_release,
                sized(st.host_transient),
            )
        estimate = int(round(self.partition_estimate(n)))
        return Resolved(n, sizes, stages, estimate, int(round(self.hardware.vram_resident(n))))


# --------------------------------------------------------------------- loading


def _names(value: Any, where: str, buffers: Mapping[str, Law]) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UserError(f"{where}: expected a list of buffer names")
    for v in value:
        if v not in buffers:
            raise UserError(f"{where}: unknown buffer {v!r} (declare it under [buffers])")
    return tuple(value)


def _uses(value: Any, where: str) -> dict[str, UseLaw]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UserError(f"{where}: expected a table of resources")
    out = {}
    for res, spec in value.items():
        if res not in HOST_RESOURCES + DEVICE_RESOURCES:
            known = ", ".join(HOST_RESOURCES + DEVICE_RESOURCES)
            raise UserError(f"{where}: unknown resource {res!r} (known: {known})")
        if not isinstance(spec, dict) or set(spec) - {"demand", "bound"}:
            raise UserError(f"{where}.{res}: expected {{demand = ..., bound = ...}}")
        out[res] = UseLaw(
            Law.parse(spec.get("demand", 1.0), f"{where}.{res}.demand"),
            Law.parse(spec.get("bound", 1.0), f"{where}.{res}.bound"),
        )
    if all(_is_number(u.demand) and _is_number(u.bound) for u in out.values()):
        _uses_at(out, 1, where, strict=True)  # numbers only: check them as the profile loads
    return out


def _is_number(law: Law | PointsLaw) -> bool:
    if not isinstance(law, Law):
        return False
    try:
        float(law.expr)
    except ValueError:
        return False
    return True


def _uses_at(uses: Mapping[str, UseLaw], n: int, where: str, strict: bool = False) -> dict[str, Use]:
    """The uses at size n.  A law's bound is a fraction, so it is kept within [0, 1]; where
    laws (extrapolated beyond the sizes they were measured at) add up to more than 1, the
    interpreter share stands and the other bounds are scaled into what it leaves.  With
    `strict` (plain numbers, checked as the profile loads) any such slip is an error."""
    out = {}
    for res, law in uses.items():
        use = law.at(n)
        if strict and (use.demand < 0 or not 0 <= use.bound <= 1):
            raise UserError(f"{where}.{res}: demand >= 0 and 0 <= bound <= 1 required")
        out[res] = Use(max(0.0, use.demand), min(1.0, max(0.0, use.bound)))
    total = sum(u.bound for u in out.values())
    if total > 1.0 + 1e-9:
        if strict:
            raise UserError(f"{where}: the bound fractions add up to more than 1")
        gil = out["gil"].bound if "gil" in out else 0.0
        rest = total - gil
        scale = (1.0 - gil) / rest if rest > 0 else 0.0
        out = {r: u if r == "gil" else Use(u.demand, u.bound * scale) for r, u in out.items()}
    return out


_STAGE_KEYS = {
    "on",
    "time",
    "phases",
    "noise_cv",
    "uses",
    "host_out",
    "vram_out",
    "vram_in",
    "host_release",
    "host_transient",
    "transient",
    "note",
}
_PHASE_KEYS = {"name", "time", "transient", "release", "uses", "note"}


def _stage(name: str, t: dict[str, Any], buffers: Mapping[str, Law]) -> StageSpec:
    where = f"[stages.{name}]"
    unknown = set(t) - _STAGE_KEYS
    if unknown:
        raise UserError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    on = t.get("on")
    if on not in ("cpu", "gpu"):
        raise UserError(f"{where}: on must be 'cpu' or 'gpu'")
    uses = _uses(t.get("uses"), f"{where}.uses")
    if "phases" in t:
        if "time" in t or "transient" in t:
            raise UserError(f"{where}: give either phases or time/transient, not both")
        raw_phases = t["phases"]
        if not isinstance(raw_phases, list) or not raw_phases:
            raise UserError(f"{where}: phases must be a non-empty array of tables")
        phases = []
        for i, ph in enumerate(raw_phases):
            pw = f"{where}.phases[{i}]"
            if not isinstance(ph, dict) or "name" not in ph or "time" not in ph:
                raise UserError(f"{pw}: a phase needs name and time")
            if set(ph) - _PHASE_KEYS:
                raise UserError(f"{pw}: unknown key(s) {', '.join(sorted(set(ph) - _PHASE_KEYS))}")
            phases.append(
                Phase(
                    str(ph["name"]),
                    Law.parse(ph["time"], f"{pw}.time"),
                    _names(ph.get("transient"), f"{pw}.transient", buffers),
                    _names(ph.get("release"), f"{pw}.release", buffers),
                    _uses(ph["uses"], f"{pw}.uses") if "uses" in ph else None,
                )
            )
    else:
        if "time" not in t:
            raise UserError(f"{where}: needs time (or phases)")
        phases = [
            Phase(
                name,
                Law.parse(t["time"], f"{where}.time"),
                _names(t.get("transient"), f"{where}.transient", buffers),
            )
        ]
    cv = t.get("noise_cv", 0.0)
    if isinstance(cv, bool) or not isinstance(cv, int | float) or not 0 <= cv < 2:
        raise UserError(f"{where}: noise_cv must be a number in [0, 2)")
    spec = StageSpec(
        name=name,
        on=on,
        phases=tuple(phases),
        noise_cv=float(cv),
        uses=uses,
        host_out=_names(t.get("host_out"), f"{where}.host_out", buffers),
        vram_out=_names(t.get("vram_out"), f"{where}.vram_out", buffers),
        vram_in=_names(t.get("vram_in"), f"{where}.vram_in", buffers),
        host_release=_names(t.get("host_release"), f"{where}.host_release", buffers),
        host_transient=_names(t.get("host_transient"), f"{where}.host_transient", buffers),
    )
    for b in spec.host_out + spec.host_release + spec.host_transient:
        if not b.startswith("host_"):
            raise UserError(f"{where}: {b!r} is a device buffer; host buffers start with host_")
    for b in spec.vram_out + spec.vram_in + tuple(x for p in spec.phases for x in p.transient):
        if b.startswith("host_"):
            raise UserError(f"{where}: {b!r} is a host buffer used as device memory")
    return spec


def _hardware(t: Any) -> Hardware:
    if not isinstance(t, dict):
        raise UserError("profile: missing [hardware]")
    try:
        hw = Hardware(
            gpu=str(t.get("gpu", "unknown GPU")),
            vram=parse_size(t["vram"], "[hardware] vram"),
            vram_resident=Law.parse(t.get("vram_resident", 0), "[hardware] vram_resident"),
            cpu_cores=int(t["cpu_cores"]),
            host_ram=parse_size(t["host_ram"], "[hardware] host_ram"),
            host_resident=parse_size(t.get("host_resident", 0), "[hardware] host_resident"),
            membw_gbps=float(t["membw_gbps"]),
            h2d_gbps=float(t["h2d_gbps"]),
        )
    except KeyError as e:
        raise UserError(f"profile: [hardware] needs {e.args[0]}") from None
    except (TypeError, ValueError) as e:
        raise UserError(f"profile: [hardware] has a bad value: {e}") from None
    if hw.cpu_cores < 1 or hw.membw_gbps <= 0 or hw.h2d_gbps <= 0:
        raise UserError("profile: [hardware] cores and bandwidths must be positive")
    return hw


def _calibrated_b_g2_threads(cal: Any, where: str) -> int | None:
    if not isinstance(cal, dict) or "b_g2_threads" not in cal:
        return None
    v = cal["b_g2_threads"]
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise UserError(f"{where}: [calibration] b_g2_threads must be a positive integer")
    return v


def profile_from_dict(data: Mapping[str, Any], path: str = "") -> Profile:
    where = path or "profile"
    meta = data.get("profile", {})
    if not isinstance(meta, dict):
        raise UserError(f"{where}: [profile] must be a table")
    buffers_raw = data.get("buffers", {})
    if not isinstance(buffers_raw, dict):
        raise UserError(f"{where}: [buffers] must be a table")
    buffers = {k: Law.parse(v, f"[buffers] {k}") for k, v in buffers_raw.items()}
    stages_raw = data.get("stages")
    if not isinstance(stages_raw, dict):
        raise UserError(f"{where}: missing [stages]")
    missing = [s for s in STAGES if s not in stages_raw]
    if missing:
        raise UserError(f"{where}: missing stage(s) {', '.join(missing)}")
    stages = {name: _stage(name, t, buffers) for name, t in stages_raw.items()}
    wl_raw = data.get("workloads", {})
    if not isinstance(wl_raw, dict) or not wl_raw:
        raise UserError(f"{where}: needs at least one [workloads.NAME]")
    workloads = {}
    for name, t in wl_raw.items():
        try:
            workloads[name] = Workload(
                name,
                int(t["partitions"]),
                parse_size(t["constraints"], f"[workloads.{name}] constraints"),
                {k: float(v) for k, v in t.items() if k not in ("partitions", "constraints")},
            )
        except (KeyError, TypeError, ValueError):
            msg = f"{where}: [workloads.{name}] needs partitions and constraints"
            raise UserError(msg) from None
    default = str(meta.get("default_workload", next(iter(workloads))))
    if default not in workloads:
        raise UserError(f"{where}: default_workload {default!r} is not defined")
    mem = data.get("memory", {})
    estimate = Law.parse(mem.get("partition_estimate", 0), "[memory] partition_estimate")
    prof = Profile(
        name=str(meta.get("name", Path(path).stem if path else "profile")),
        description=str(meta.get("description", "")),
        hardware=_hardware(data.get("hardware")),
        workloads=workloads,
        default_workload=default,
        buffers=buffers,
        stages=stages,
        partition_estimate=estimate,
        source=str(meta.get("source", "")),
        path=path,
        calibrated_b_g2_threads=_calibrated_b_g2_threads(data.get("calibration"), where),
    )
    # Evaluate every law once at the default size so a broken law fails at load time.
    at_default = prof.resolve(prof.workload().constraints)
    if prof.hardware.vram <= at_default.vram_resident:
        raise UserError(f"{where}: [hardware] vram must exceed vram_resident")
    return prof


def load_profile(path: str | Path) -> Profile:
    return profile_from_dict(load_toml(path, "profile"), str(path))


CALIBRATION_DIR = Path(__file__).resolve().parent.parent / "calibration"
DEFAULT_PROFILE = "seed-rtx5070ti"


def find_profile(name_or_path: str | None) -> Path:
    """A profile by path, or by name under calibration/ (the shipped profiles)."""
    if not name_or_path:
        name_or_path = DEFAULT_PROFILE
    p = Path(name_or_path)
    if p.suffix == ".toml" or p.exists():
        return p
    for base in (CALIBRATION_DIR, Path.cwd() / "calibration"):
        cand = base / f"{name_or_path}.toml"
        if cand.exists():
            return cand
    raise UserError(f"profile {name_or_path!r} not found (a path, or a name under calibration/)")
