"""Profiles: what one machine + prover costs, as laws in the partition size.

A profile (a TOML file: shipped under simgpu/profile/profiles/, or written by `simgpu
calibrate`) says, for one machine and one prover:

* ``[hardware]``: GPU, VRAM and what is resident on it, cores, host RAM and what is
  resident there (pinned SRS...), host memory bandwidth, host-to-device bandwidth (from
  pinned memory, and optionally from pageable memory: ``h2d_pageable_gbps``), and the
  device allocator a VRAM cap meets (``vram_pool``: "exact", or CuPy's "caching" pool);
* ``[contention.RESOURCE]``: optionally, how a shared resource is shared: its law
  (``law = "conserved"``, or the default ``"proportional"``) and its efficiency loss past a
  knee (``knee``, ``loss``): model.contention's laws;
* ``[memory]``: what the daemon reserves from its host budget per partition
  (``partition_estimate``) and how much of that it gives back when the partition's GPU
  work starts (``release_at_gpu_start``; the rest when the partition ends);
* ``[workloads.NAME]``: named circuits (partitions x constraints), one of them default;
* ``[buffers]``: every named buffer's bytes as a law of n (constraints per partition)
  and N (the NTT domain, 2^ceil(log2 n)); ``host_*`` buffers live in host RAM, the rest
  on the device;
* ``[stages.NAME]``: per stage (synthesis, prep, prestage, kernels, b_g2_msm, epilogue),
  a time law (or a list of phases, each with its own), its noise, which shared resources
  it leans on and how hard (``uses``), and its footprints: buffers it leaves behind
  (``host_out``, ``vram_out``), consumes (``vram_in``), releases (``host_release``, a
  phase's ``release``) and holds only while it runs (``transient``).  A phase may also
  name its ``staging``: buffers it fills from the host before its work, allocated and
  uploaded first (over the link, from pinned memory) and held with the transients until
  the phase ends; the transients are allocated only once the staging is on the device;
* ``[buffer_arrays]``: optionally, how the prover cuts a device buffer into arrays: a list
  of fractions of its bytes, in the order they are allocated, or such lists measured at
  sizes (``{points = [[n, [...]], ...]}``, the nearest size used), read from the prover's
  pool trace.  Only a caching ``vram_pool`` reads it: each array is a chunk of its own,
  which is what decides how the pool's blocks split;
* ``[pins]``: optionally, what page-locking the host buffers a partition uploads costs,
  where the prover locks them where they land and unlocks them once their copies have
  left (simgpu's `--abc-upload pinned`, cuzk's cudaHostRegister): seconds a GiB to lock
  and to unlock (``lock_s_per_gib``, ``unlock_s_per_gib``), and the share of each that
  the device's other work stands still (``lock_stall``, ``unlock_stall``; an unlock waits
  for the device and holds it: 1); optionally how a lock slows with busy cores
  (``lock_pressure``, a `pressure` sensitivity as a stage's: pinning pages is host work).
  A profile calibrated on a prover that staged them has none.

Laws are small arithmetic expressions over n, N, log2(.), sqrt(.), min/max, GiB/MiB/KiB,
and named coefficients given beside them, e.g. ``time = {law = "a + b*N*log2(N)", a =
0.01, b = 1.1e-9}``.  One place owns each fact: a buffer's size lives in ``[buffers]``
and stages refer to it by name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simgpu.config import Workload, load_toml
from simgpu.devicepool import POOLS
from simgpu.errors import UserError
from simgpu.profile.laws import Law, PointsLaw
from simgpu.profile.resolve import PinCosts, Resolved, ResolvedPhase, ResolvedStage, Use
from simgpu.units import parse_size

#: [buffer_arrays] of one buffer: (size, fractions) per measured size, by size.
ArrayPoints = tuple[tuple[int, tuple[float, ...]], ...]

STAGES = ("synthesis", "prep", "prestage", "kernels", "b_g2_msm", "epilogue")
#: Fr of BLS12-381 has 2-adicity 32: no radix-2 NTT domain is larger than 2^32.
MAX_CONSTRAINTS = 1 << 32
#: Host resources: memory bandwidth (GB/s), cores, the driver process's interpreter lock
#: (`gil`, capacity 1 ms: a stage's demand is the wait (ms) a request for the lock meets
#: while it runs, its bound the requests it makes a millisecond of its time, so beside
#: others it takes 1 + bound x their waits times as long; simgpu.model.contention, "The
#: interpreter lock"), the driver's channel for results coming back from worker
#: processes (`driver_rx`, capacity 1: one thread reads them all, in turn), the pressure
#: busy cores put on each other below saturation (`pressure`, capacity the cores: a
#: stage's demand is the cores it keeps busy, its bound how much the others' busy cores
#: slow it; simgpu.model.contention, "Pressure"), and the results coming back into the
#: driver's process (`handoff`, capacity 1: a result on its way back draws 1, a driver
#: stage's bound is how much each one slows it; the same law as `pressure`).
HOST_RESOURCES = ("membw", "cores", "gil", "driver_rx", "pressure", "handoff")
#: The host resources shared burst by burst (the fluid share's `bursty`): the others'
#: load slows a job whether or not it adds up to the capacity.  The result channel is
#: one: a result holds the driver's reader for its receive only (its demand and bound
#: are that share of its trip), and meets the others' receives at random.
BURSTY_RESOURCES = ("gil", "driver_rx", "pressure", "handoff")
#: The resources whose bound is a sensitivity that scales a stage's whole time (the fluid
#: share's `scaling`), not a share of it: left out of the bounds that add up to 1, and
#: not held below 1 (the interpreter lock's is a rate: requests a millisecond).
SCALING_RESOURCES = ("gil", "pressure", "handoff")
DEVICE_RESOURCES = ("gpu", "h2d")

# --------------------------------------------------------------------- stage specs


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
    input buffers the stage is done with at the end of this phase; `staging`, buffers
    the phase uploads before its work (see the module docstring)."""

    name: str
    time: Law
    transient: tuple[str, ...] = ()
    release: tuple[str, ...] = ()
    uses: Mapping[str, UseLaw] | None = None  # None: the stage's
    staging: tuple[str, ...] = ()


def phase_key(stage: str, phase: str) -> str:
    """Under which key a stage's phase is measured and traced: `stage.phase` for a phase
    timed apart (the kernels' ntt, synthesis's transfer), the stage itself for its one
    phase of its own name (b_g2_msm on the device)."""
    return stage if phase == stage else f"{stage}.{phase}"


@dataclass(frozen=True)
class StageSpec:
    """One [stages.NAME] of a profile: where the stage runs, its phases with their time laws,
    its noise, the shared resources it leans on, and its footprints (names of [buffers])."""

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
    """A profile's [hardware]: the GPU and its VRAM, cores, host RAM, the bytes resident on
    each, and the host's memory and host-to-device bandwidths."""

    gpu: str
    vram: int
    vram_resident: Law  # bytes held on the device before any partition (may grow with n)
    cpu_cores: int
    host_ram: int
    host_resident: int
    membw_gbps: float
    h2d_gbps: float
    #: Copies from pageable (unpinned) host memory, as a stage that allocates and fills
    #: its own device inputs makes them; None: as fast as pinned ones (h2d_gbps).
    h2d_pageable_gbps: float | None = None
    #: The device allocator under a VRAM cap: "exact" (a buffer's bytes and nothing
    #: more) or "caching" (CuPy's pool: blocks cut to size, their free rests counted
    #: against the cap; simgpu.devicepool).
    vram_pool: str = "exact"


@dataclass(frozen=True)
class Thrashing:
    """How one shared resource is shared (model.contention): by the proportional, the
    conserved or (the gpu only) the in-order law, and with an efficiency loss past a knee:
    effective capacity C / (1 + loss * max(0, load / C - knee)), load being what the
    running jobs ask at full speed (the in-order law has no capacity to pass: no knee)."""

    knee: float = 1.0
    loss: float = 0.0
    law: str = "proportional"


@dataclass(frozen=True)
class Profile:
    """One machine + prover's costs as laws in the partition size, loaded and checked (see
    the module docstring); `resolve(n)` gives them at one size."""

    name: str
    description: str
    hardware: Hardware
    workloads: Mapping[str, Workload]
    default_workload: str
    buffers: Mapping[str, Law]
    stages: Mapping[str, StageSpec]
    partition_estimate: Law
    release_at_gpu_start: Law = field(default_factory=lambda: Law("0"))
    contention: Mapping[str, Thrashing] = field(default_factory=dict)
    source: str = ""
    path: str = ""
    #: For a profile written by `simgpu calibrate`: the prover's settings its stage times
    #: hold for (how many cores one b_g2_msm was split over, b_g2_threads).
    calibrated_b_g2_threads: int | None = None
    #: ... where its b_g2_msm ran ("cpu" or "gpu") and which circuit family it proved.
    calibrated_b_g2_on: str | None = None
    calibrated_circuit: str | None = None
    #: ... and how its G2 MSM on a device sized its arrays (by the "witness" or the "key").
    calibrated_msm_capacity: str | None = None
    #: ... and how its a, b, c reached the device: "pinned" where they landed, "staged"
    #: (so too a calibration from before they could be pinned), or "mixed".
    calibrated_abc_upload: str | None = None
    #: [pins]: what locking and unlocking the uploaded host buffers costs; None where the
    #: prover does not pin them (or nobody measured it).
    pins: PinCosts | None = None
    #: [buffer_arrays]: device buffer -> (size, the fractions of its bytes the prover
    #: allocates as separate arrays, in order) per measured size (size 0: every size); a
    #: caching pool's grain (see simgpu.devicepool).
    buffer_arrays: Mapping[str, ArrayPoints] = field(default_factory=dict)

    def workload(self, name: str | None = None) -> Workload:
        key = name or self.default_workload
        if key not in self.workloads:
            known = ", ".join(sorted(self.workloads))
            raise UserError(f"unknown workload {key!r} in profile {self.name} (known: {known})")
        return self.workloads[key]

    def workload_for(self, name: str | None, partitions: int | None, constraints: int | None) -> Workload:
        """The named workload (or the default) with a run's overrides of its size."""
        base = self.workload(name)
        wl = Workload(
            base.name if constraints is None else f"{base.name} (n={constraints:,})",
            base.partitions if partitions is None else partitions,
            base.constraints if constraints is None else constraints,
            dict(base.params),
        )
        if wl.constraints > MAX_CONSTRAINTS:
            raise UserError(
                f"{wl.constraints:,} constraints per partition: BLS12-381's scalar field has no NTT "
                f"domain beyond 2^32"
            )
        return wl

    def resolve(self, n: int) -> Resolved:
        sizes = {name: int(round(law(n))) for name, law in self.buffers.items()}

        def sized(names: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
            return tuple((b, sizes[b]) for b in names)

        stages = {}
        for st in self.stages.values():
            phases = tuple(
                ResolvedPhase(
                    ph.name,
                    ph.time(n),
                    sized(ph.transient),
                    ph.release,
                    uses_at(ph.uses if ph.uses is not None else st.uses, n, f"[stages.{st.name}] {ph.name}"),
                    sized(ph.staging),
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
        early = int(round(self.release_at_gpu_start(n)))
        if early > estimate:
            raise UserError(
                f"[memory] release_at_gpu_start ({early:,} bytes at n={n:,}) is more than the "
                f"partition_estimate it releases part of ({estimate:,})"
            )
        return Resolved(
            n,
            sizes,
            stages,
            estimate,
            int(round(self.hardware.vram_resident(n))),
            early,
            self.hardware.h2d_pageable_gbps,
            self.hardware.h2d_gbps,
            {b: arrays_at(pts, n) for b, pts in self.buffer_arrays.items()},
            # a prover that stages its uploads locks nothing, whatever [pins] says
            None if self.calibrated_abc_upload == "staged" else self.pins,
        )


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
        uses_at(out, 1, where, strict=True)  # numbers only: check them as the profile loads
    return out


def _is_number(law: Law | PointsLaw) -> bool:
    if not isinstance(law, Law):
        return False
    try:
        float(law.expr)
    except ValueError:
        return False
    return True


def uses_at(uses: Mapping[str, UseLaw], n: int, where: str, strict: bool = False) -> dict[str, Use]:
    """The uses at size n.  A law's bound is a fraction, so it is kept within [0, 1]; where
    laws (extrapolated beyond the sizes they were measured at) add up to more than 1,
    they are scaled down to 1 together.  A bound on a scaling resource (the interpreter
    lock, pressure, results coming back) is a sensitivity, not a share: not added in, and
    only kept above 0.  With `strict` (plain numbers, checked as the profile loads) any
    such slip is an error."""
    out = {}
    for res, law in uses.items():
        use = law.at(n)
        scaling = res in SCALING_RESOURCES
        if strict and (use.demand < 0 or use.bound < 0 or (not scaling and use.bound > 1)):
            need = "bound >= 0" if scaling else "0 <= bound <= 1"
            raise UserError(f"{where}.{res}: demand >= 0 and {need} required")
        # (a law fitted or extrapolated can land a rounding below 0)
        out[res] = Use(use.demand, max(0.0, use.bound if scaling else min(1.0, use.bound)))
    total = sum(u.bound for r, u in out.items() if r not in SCALING_RESOURCES)
    if total > 1.0 + 1e-9:
        if strict:
            raise UserError(f"{where}: the bound fractions add up to more than 1")
        out = {r: u if r in SCALING_RESOURCES else Use(u.demand, u.bound / total) for r, u in out.items()}
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
_PHASE_KEYS = {"name", "time", "transient", "release", "uses", "staging", "note"}


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
                    _names(ph.get("staging"), f"{pw}.staging", buffers),
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
    if on == "cpu" and any(p.staging for p in spec.phases):
        raise UserError(f"{where}: a phase's staging is uploaded to the device; this stage runs on the cpu")
    for b in spec.vram_out + spec.vram_in + tuple(x for p in spec.phases for x in p.transient + p.staging):
        if b.startswith("host_"):
            raise UserError(f"{where}: {b!r} is a host buffer used as device memory")
    return spec


def _rate(t: dict[str, Any], key: str) -> float:
    """A bandwidth in GB/s: a finite number > 0."""
    v = t[key]
    if isinstance(v, bool) or not isinstance(v, int | float) or not (0 < v < math.inf):
        raise UserError(f"profile: [hardware] {key} must be a finite number of GB/s > 0, got {v!r}")
    return float(v)


PIN_KEYS = ("lock_s_per_gib", "unlock_s_per_gib", "lock_stall", "unlock_stall")
#: [pins] keys a profile may leave out (0 where it does): calibrated after the others were
PIN_OPTIONAL = ("lock_pressure",)


def _pins(t: Any, where: str) -> PinCosts | None:
    if t is None:
        return None
    if not isinstance(t, dict) or not set(PIN_KEYS) <= set(t) <= set(PIN_KEYS + PIN_OPTIONAL):
        raise UserError(
            f"{where}: [pins] takes {', '.join(PIN_KEYS)}, and optionally {', '.join(PIN_OPTIONAL)}"
        )
    for k, v in t.items():
        top = 1.0 if k.endswith(("stall", "pressure")) else math.inf
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= top or v == math.inf:
            what = "a share from 0 to 1" if top == 1.0 else "finite seconds >= 0"
            raise UserError(f"{where}: [pins] {k} must be {what}, got {v!r}")
    return PinCosts(**{k: float(v) for k, v in t.items()})


def _vram_pool(v: Any) -> str:
    if not isinstance(v, str) or (v != "exact" and v not in POOLS):
        known = ", ".join(["exact", *POOLS])
        raise UserError(f"profile: [hardware] vram_pool must be one of {known}, got {v!r}")
    return str(v)


def _hardware(t: Any) -> Hardware:
    if not isinstance(t, dict):
        raise UserError("profile: missing [hardware]")
    try:
        cores = t["cpu_cores"]
        if isinstance(cores, bool) or not isinstance(cores, int) or not 1 <= cores <= 1 << 20:
            raise UserError(f"profile: [hardware] cpu_cores must be a whole number >= 1, got {cores!r}")
        hw = Hardware(
            gpu=str(t.get("gpu", "unknown GPU")),
            vram=parse_size(t["vram"], "[hardware] vram"),
            vram_resident=Law.parse(t.get("vram_resident", 0), "[hardware] vram_resident"),
            cpu_cores=cores,
            host_ram=parse_size(t["host_ram"], "[hardware] host_ram"),
            host_resident=parse_size(t.get("host_resident", 0), "[hardware] host_resident"),
            membw_gbps=_rate(t, "membw_gbps"),
            h2d_gbps=_rate(t, "h2d_gbps"),
            h2d_pageable_gbps=_rate(t, "h2d_pageable_gbps")
            if t.get("h2d_pageable_gbps") is not None
            else None,
            vram_pool=_vram_pool(t.get("vram_pool", "exact")),
        )
    except KeyError as e:
        raise UserError(f"profile: [hardware] needs {e.args[0]}") from None
    except (TypeError, ValueError, OverflowError) as e:
        raise UserError(f"profile: [hardware] has a bad value: {e}") from None
    if hw.vram <= 0 or hw.host_ram <= 0:
        raise UserError("profile: [hardware] vram and host_ram must be positive")
    return hw


#: Resources a [contention] table may describe: the shared-by-load ones (not the lock-like
#: gil and driver_rx, handed over request by request or shared in turn, nor the scaling
#: sensitivities).
THRASHING_RESOURCES = ("membw", "cores", "gpu", "h2d")
SHARING_LAWS = ("proportional", "conserved", "in-order")


def _contention(t: Any, where: str) -> dict[str, Thrashing]:
    if t is None:
        return {}
    if not isinstance(t, dict):
        raise UserError(f"{where}: [contention] must be a table of resources")
    out = {}
    for res, spec in t.items():
        w = f"{where}: [contention.{res}]"
        if res not in THRASHING_RESOURCES:
            raise UserError(f"{w}: only {', '.join(THRASHING_RESOURCES)} can thrash")
        if not isinstance(spec, dict) or set(spec) - {"law", "knee", "loss", "note"}:
            raise UserError(f"{w}: expected {{law = ..., knee = ..., loss = ...}}")
        law = spec.get("law", "proportional")
        if law not in SHARING_LAWS:
            raise UserError(f"{w}: law must be one of {', '.join(SHARING_LAWS)}")
        if law == "in-order" and res != "gpu":
            raise UserError(f"{w}: only the gpu is shared in order (one stream its workers queue on)")
        try:
            knee, loss = float(spec.get("knee", 1.0)), float(spec.get("loss", 0.0))
        except (TypeError, ValueError):
            raise UserError(f"{w}: knee and loss must be numbers") from None
        if not (knee >= 1.0 and loss >= 0.0):
            raise UserError(f"{w}: knee >= 1 (a load of at least the capacity) and loss >= 0 required")
        out[res] = Thrashing(knee, loss, law)
    return out


def _calibrated_name(cal: Any, key: str, where: str) -> str | None:
    if not isinstance(cal, dict) or key not in cal:
        return None
    if not isinstance(cal[key], str):
        raise UserError(f"{where}: [calibration] {key} must be a name, got {cal[key]!r}")
    return cal[key]


def _calibrated_upload(cal: Any, where: str) -> str | None:
    """[calibration] abc_upload; a calibration that predates it (2026-12-06) staged them."""
    if not isinstance(cal, dict):
        return None
    return _calibrated_name(cal, "abc_upload", where) or "staged"


def _calibrated_b_g2_threads(cal: Any, where: str) -> int | None:
    if not isinstance(cal, dict) or "b_g2_threads" not in cal:
        return None
    v = cal["b_g2_threads"]
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise UserError(f"{where}: [calibration] b_g2_threads must be a positive integer")
    return v


def _fractions(parts: Any, where: str) -> tuple[float, ...]:
    ok = (
        isinstance(parts, list)
        and parts
        and all(isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 for x in parts)
    )
    if not ok:
        raise UserError(f"{where} must be a list of positive fractions")
    total = float(sum(parts))
    return tuple(float(x) / total for x in parts)


def _buffer_arrays(raw: Any, buffers: Mapping[str, Law], where: str) -> dict[str, ArrayPoints]:
    """[buffer_arrays]: NAME = [fractions...] at every size, or NAME = {points = [[n,
    [fractions...]], ...]} measured at sizes (the nearest is used); normalised to sum 1."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise UserError(f"{where}: [buffer_arrays] must be a table")
    out = {}
    for name, value in raw.items():
        at = f"{where}: [buffer_arrays] {name}"
        if name not in buffers or name.startswith("host_"):
            raise UserError(f"{at} is not a device buffer of [buffers]")
        if isinstance(value, dict):
            pts = value.get("points")
            if set(value) != {"points"} or not isinstance(pts, list) or not pts:
                raise UserError(f"{at} takes points = [[n, [fractions...]], ...]")
            try:
                out[name] = tuple(sorted((int(n), _fractions(fr, f"{at} at n={n}")) for n, fr in pts))
            except (TypeError, ValueError):
                raise UserError(f"{at} takes points = [[n, [fractions...]], ...]") from None
        else:
            out[name] = ((0, _fractions(value, at)),)
    return out


def arrays_at(points: ArrayPoints, n: int) -> tuple[float, ...]:
    """The fractions measured at the size nearest n (on a log scale)."""
    return min(points, key=lambda p: abs(math.log2(max(p[0], 1)) - math.log2(max(n, 1))))[1]


def profile_from_dict(data: Mapping[str, Any], path: str = "") -> Profile:
    """The Profile of a parsed profile TOML (`path` names it in errors), checked: a bad table
    or law is a UserError, and every law is evaluated once at the default workload's size."""
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
    if not isinstance(mem, dict) or set(mem) - {"partition_estimate", "release_at_gpu_start"}:
        raise UserError(f"{where}: [memory] takes partition_estimate and release_at_gpu_start")
    estimate = Law.parse(mem.get("partition_estimate", 0), "[memory] partition_estimate")
    early = Law.parse(mem.get("release_at_gpu_start", 0), "[memory] release_at_gpu_start")
    prof = Profile(
        name=str(meta.get("name", Path(path).stem if path else "profile")),
        description=str(meta.get("description", "")),
        hardware=_hardware(data.get("hardware")),
        workloads=workloads,
        default_workload=default,
        buffers=buffers,
        stages=stages,
        partition_estimate=estimate,
        release_at_gpu_start=early,
        contention=_contention(data.get("contention"), where),
        source=str(meta.get("source", "")),
        path=path,
        calibrated_b_g2_threads=_calibrated_b_g2_threads(data.get("calibration"), where),
        calibrated_b_g2_on=_calibrated_name(data.get("calibration"), "b_g2_on", where),
        calibrated_circuit=_calibrated_name(data.get("calibration"), "circuit", where),
        calibrated_msm_capacity=_calibrated_name(data.get("calibration"), "msm_capacity", where),
        calibrated_abc_upload=_calibrated_upload(data.get("calibration"), where),
        pins=_pins(data.get("pins"), where),
        buffer_arrays=_buffer_arrays(data.get("buffer_arrays"), buffers, where),
    )
    # Evaluate every law once at the default size so a broken law fails at load time.
    at_default = prof.resolve(prof.workload().constraints)
    if prof.hardware.vram <= at_default.vram_resident:
        raise UserError(f"{where}: [hardware] vram must exceed vram_resident")
    return prof


def load_profile(path: str | Path) -> Profile:
    """The profile in the TOML file at `path`, read and checked (profile_from_dict)."""
    return profile_from_dict(load_toml(path, "profile"), str(path))
