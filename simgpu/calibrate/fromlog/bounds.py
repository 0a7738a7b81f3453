"""The contention fit: each stage's bounds on the resources it shares.

Each sample's life is cut where the jobs beside it start and end (`Timeline`); in each
piece its speed is what the model's own evaluator (simgpu.model.contention) gives for
those jobs, and the bounds fitted are those under which the work the samples imply is
most alike, for all stages at once (`fit_bounds`).  A bound the log cannot pin keeps the
base profile's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from simgpu.calibrate.fromlog.samples import QUANTUM, Job
from simgpu.model import hostmem
from simgpu.model.contention import Thrash, free_fraction, job_stretch, resource_factor
from simgpu.profile import Profile
from simgpu.profile.schema import SCALING_RESOURCES, uses_at

#: Fewest samples, and least spread of a resource's oversubscription across them, that a
#: contention bound is fitted from; below either the bound is not identifiable (the spread
#: under the proportional law only: see stage_data).
MIN_CONTENTION_SAMPLES = 8
MIN_SPREAD = 0.05
#: The host resources whose bounds a log can fit (the interpreter lock and the driver's
#: result channel are simgpu's own prover's: kept from the base).
FITTED_RESOURCES = ("membw", "cores")


#: The device resources.  A log cannot place a CUZK_TIMING sample on a device, so the others'
#: device demand counts at 1 / devices (their expected share on this job's device): on one
#: device all of it, as the model counts it.  The GPU mutex keeps one GPU part per device
#: at a time, but not what runs on the device outside it (b_g2_msm, where the prover runs
#: it there), and a loaded sample's unloaded time must come out of the law the model will
#: apply, or the model counts that load twice.  What a link carries loads host memory too
#: (Sharing.through).
DEVICE = ("gpu", "h2d")


@dataclass(frozen=True)
class Sharing:
    """How the base profile shares each resource, as the model's fluid share does:
    simgpu.model.sim builds its FluidShare from the profile with the same
    simgpu.model.hostmem functions (a device's resources named here by the resource)."""

    capacity: dict[str, float]
    conserved: frozenset[str]  # shared by the conserved law; the others by the proportional
    thrash: dict[str, Thrash]  # efficiency lost past a knee
    through: dict[str, str]  # a link -> the resource its bytes also cross (h2d -> membw)
    bursty: frozenset[str]  # lock-like, shared burst by burst
    devices: int = 1  # the others' device demand loads a job's device at 1 / devices

    def law(self, r: str) -> str:
        """The law a bound on `r` is fitted under, in words."""
        words = "conserved law" if r in self.conserved else "proportional law"
        t = self.thrash.get(r)
        if t is not None:
            words += f", thrashing past {t.knee:g} x capacity, loss {t.loss:g}"
        return words

    def describe(self) -> str:
        """Every fitted resource's law, and the links in series, in words."""
        laws = [f"{r} by the {self.law(r)}" for r in FITTED_RESOURCES]
        links = [f"each device's {a} draws on {b}" for a, b in self.through.items()]
        return "; ".join(laws + links)


def sharing(prof: Profile, cores: float, devices: int = 1) -> Sharing:
    """The base's sharing, with the log's cores (the synthesis pool it reports) and
    devices."""
    hw = prof.hardware

    def name(key: Any) -> str:
        return key if isinstance(key, str) else key[0]  # ("h2d", device) -> "h2d"

    capacity = {"membw": hw.membw_gbps, "cores": cores, "gil": 1.0, "driver_rx": 1.0, "pressure": cores}
    capacity |= {"handoff": 1.0}
    capacity |= {"gpu": 1.0, "h2d": hw.h2d_gbps}
    return Sharing(
        capacity,
        frozenset(name(k) for k in hostmem.shared_by(prof, 1, "conserved")),
        {name(k): t for k, t in hostmem.thrashing(prof, 1).items() if t.loss > 0},
        {name(k): v for k, v in hostmem.links(1).items()},
        frozenset(name(k) for k in hostmem.bursty(prof, 1)),  # as simgpu.model.sim declares them
        max(1, int(devices)),
    )


@dataclass
class Bound:
    """One stage's contention bound on one resource, as the fit leaves it: fitted from the
    log, or kept from the base profile (or left out), and why."""

    resource: str
    bound: float
    fitted: bool
    why: str
    demand: float | None = None  # set for a term the base lacks and the fit added
    law: str = ""  # for a fitted bound, the law it was fitted under (Sharing.law)


@dataclass
class StageFit:
    """One stage's fit: unloaded seconds at the log's size, noise, contention bounds."""

    stage: str
    samples: int
    mean: float
    t0: float
    cv: float
    spread: float  # the samples' coefficient of variation before the contention law
    bounds: list[Bound]


#: A stage bound: (stage, resource).  The model's jobs of one stage share their uses, so
#: one number stands for every sample of the stage, whichever sample it slows or loads.
Key = tuple[str, str]


def make_room(bounds: dict[str, float]) -> dict[str, float]:
    """A phase's bounds adding up to at most 1: where host terms push them over, the device
    terms (which a log cannot see: the mutex keeps one job on the GPU) give up the
    difference.  The fit evaluates what the written profile will hold (_Doc uses this)."""
    host = sum(b for r, b in bounds.items() if r not in DEVICE)
    device = sum(b for r, b in bounds.items() if r in DEVICE)
    if host + device <= 1.0 + 1e-9 or device <= 0:
        return bounds
    scale = max(0.0, 1.0 - host) / device
    return {r: b * scale if r in DEVICE else b for r, b in bounds.items()}


@dataclass(frozen=True, eq=False)
class PhaseUse:
    """How one phase of a stage leans on shared resources, as far as a log can place it."""

    seconds: float  # unloaded, the base's at the log's size (how a sample is cut)
    uses: dict[str, tuple[float, float]]  # resource -> (demand, the base's bound)
    keys: dict[str, Key]  # resource -> the stage bound it takes (what a fit writes); a
    # resource not here is the phase's own use, at the base's bound
    private: frozenset[str] = frozenset()  # candidate terms: they slow the phase, load no other

    def at(self, table: dict[Key, float]) -> tuple[tuple[str, float, float], ...]:
        """(resource, demand, bound) as the model submits the phase, with the stage bounds
        in `table`."""
        keys = self.keys
        bounds = make_room({r: table[keys[r]] if r in keys else b for r, (_, b) in self.uses.items()})
        return tuple((r, d, bounds[r]) for r, (d, _) in self.uses.items())


def phase_uses(
    prof: Profile, n: int, extra: dict[str, dict[str, tuple[float, float]]] | None = None
) -> dict[str, list[PhaseUse]]:
    """Per stage of the base, its phases' uses at size n, with `extra` (stage -> terms the
    base lacks, resource -> (demand, bound)) added to every phase of the stage.  A log
    times a stage, not its phases: each sample is cut into its phases, so that a phase
    with uses of its own (simgpu's synthesis hands its result back through the driver's
    one result thread at its end; a kernels phase streams its bases over the link) loads
    the others, and is slowed, where it runs."""
    out: dict[str, list[PhaseUse]] = {}
    for name, st in prof.stages.items():
        where = f"[stages.{name}]"
        added = (extra or {}).get(name, {})
        own = {r: (u.demand, u.bound) for r, u in uses_at(st.uses, n, where).items()} | added
        phases = []
        for ph in st.phases:
            if ph.uses is None:
                uses, keyed = own, own
            else:
                mine = uses_at(ph.uses, n, f"{where} {ph.name}")
                uses, keyed = {r: (u.demand, u.bound) for r, u in mine.items()} | added, added
            phases.append(PhaseUse(max(0.0, ph.time(n)), uses, {r: (name, r) for r in keyed}))
        out[name] = phases
    return out


#: The base stages whose phases, one after another, make up a sample of each job kind
#: (Job.stage): the GPU part under the mutex is the prestage, then the kernels.
JOB_STAGES = {"held": ("prestage", "kernels")}


def base_table(phases: dict[str, list[PhaseUse]]) -> dict[Key, float]:
    """Every stage bound the phases take, at the base's value (a bound two stages share, at
    the value of the stage it is named by)."""
    out: dict[Key, float] = {}
    for stage, ps in phases.items():
        for ph in ps:
            for r, k in ph.keys.items():
                if k not in out or k[0] == stage:
                    out[k] = ph.uses[r][1]
    return out


@dataclass
class Piece:
    """One phase of one sample, placed in its sample's interval."""

    job: int
    kind: int  # which phase of which stage: an index into Timeline.kinds
    start: float
    end: float


class Timeline:
    """The log's samples as the model's fluid share saw them.

    Each sample is cut into its stage's phases (pieces), and each piece's life at every
    start and end of the other samples' pieces beside it.  In each of those intervals what
    ran beside it is a count of pieces per kind (a phase of a stage): the model's speeds
    change only at those instants, and in between they are what its fluid share computes
    from the same jobs.  So an interval is a composition (the piece's own kind and those
    counts), and the piece's stretch there is the model's law at it
    (simgpu.model.contention: resource_factor, job_stretch), given the stage bounds."""

    def __init__(
        self, jobs: list[Job], phases: dict[str, list[PhaseUse]], sh: Sharing, table: dict[Key, float]
    ) -> None:
        self.sh, self.jobs = sh, jobs
        self.kinds: list[PhaseUse] = []
        self.layout: dict[str, list[int]] = {}  # job kind -> its phases' kinds, in order
        for name in dict.fromkeys(j.stage for j in jobs):
            kinds = []
            for stage in JOB_STAGES.get(name, (name,)):
                for ph in phases.get(stage) or [PhaseUse(0.0, {}, {})]:
                    kinds.append(len(self.kinds))
                    self.kinds.append(ph)
            self.layout[name] = kinds
        self._loads: dict[int, dict[str, float]] = {}
        self.place(table)

    def shares(self, name: str) -> list[float]:
        """A job kind's phases' shares of its unloaded time (the base's proportions)."""
        secs = [self.kinds[k].seconds for k in self.layout[name]]
        total = sum(secs)
        return [s / total if total > 0 else 1 / len(secs) for s in secs]

    def place(self, table: dict[Key, float]) -> None:
        """Cut the samples into pieces where the model would run them: a phase slowed by
        its own uses takes more of its sample's interval than its share of the work, so
        the cuts are moved until each phase's part is its share of the work times its mean
        stretch there (a few rounds settle it)."""
        splits: dict[int, list[float]] = {}
        multi = [i for i, j in enumerate(self.jobs) if len(self.layout[j.stage]) > 1]
        for rounds in range(4):
            self._cut(splits)
            if not multi or rounds == 3:
                break
            stretch = self.stretches(table)
            mean: dict[int, list[float]] = {}
            for p, (dt, comp) in zip(self.pieces, self.intervals, strict=True):
                if len(self.layout[self.jobs[p.job].stage]) > 1:
                    s = float(dt @ stretch[comp] / max(float(np.sum(dt)), 1e-12)) if len(dt) else 1.0
                    mean.setdefault(p.job, []).append(s)
            for i in multi:
                raw = [sh * x for sh, x in zip(self.shares(self.jobs[i].stage), mean[i], strict=True)]
                splits[i] = [x / sum(raw) for x in raw]

    def _cut(self, splits: dict[int, list[float]]) -> None:
        self.pieces: list[Piece] = []
        for i, j in enumerate(self.jobs):
            t, dur = j.start, max(j.end - j.start, QUANTUM / 2)
            kinds = self.layout[j.stage]
            for k, f in zip(kinds, splits.get(i) or self.shares(j.stage), strict=True):
                self.pieces.append(Piece(i, k, t, t + f * dur))
                t += f * dur
        ps = self.pieces
        s = np.array([p.start for p in ps])
        e = np.array([p.end for p in ps])
        job = np.array([p.job for p in ps])
        onehot = np.eye(len(self.kinds), dtype=np.int64)[[p.kind for p in ps]]
        rows, dts = [], []
        for i, p in enumerate(ps):
            beside = np.flatnonzero((e > s[i]) & (s < e[i]) & (job != p.job))
            cuts = np.unique(np.clip(np.concatenate(([s[i], e[i]], s[beside], e[beside])), s[i], e[i]))
            mid = (cuts[:-1] + cuts[1:]) / 2
            active = (s[beside][None, :] <= mid[:, None]) & (e[beside][None, :] > mid[:, None])
            counts = active.astype(np.int64) @ onehot[beside]
            rows.append(np.column_stack([np.full(len(mid), p.kind, dtype=np.int64), counts]))
            dts.append(np.diff(cuts))
        comps, inverse = np.unique(np.vstack(rows), axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        #: per composition: its piece's kind, and (kind, count) of what ran beside it
        self.comps = [(int(r[0]), [(k, int(c)) for k, c in enumerate(r[1:]) if c]) for r in comps]
        self.intervals: list[tuple[np.ndarray, np.ndarray]] = []
        at = 0
        for dt in dts:
            self.intervals.append((dt, inverse[at : at + len(dt)]))
            at += len(dt)
        self._loads = {}
        sh = self.sh
        reach = [
            any(r in sh.conserved or sh.through.get(r) in sh.conserved for r in ph.uses) for ph in self.kinds
        ]
        self._deps = [
            sorted(
                set(self.kinds[own].keys.values()).union(
                    *(self.kinds[k].keys.values() for k, _ in beside if reach[k])
                )
            )
            for own, beside in self.comps
        ]
        self._memo: dict[tuple, float] = {}

    def load(self, c: int) -> dict[str, float]:
        """The nominal load (what the running jobs ask at full speed) on each resource in
        composition c: its own piece's demands and, on host resources, the others' (a
        link's bytes on the resource behind it too)."""
        got = self._loads.get(c)
        if got is None:
            sh = self.sh
            got = dict.fromkeys(sh.capacity, 0.0)
            own, beside = self.comps[c]
            for kind, count, mine in [(own, 1, True)] + [(k, n, False) for k, n in beside]:
                ph = self.kinds[kind]
                for r, (d, _) in ph.uses.items():
                    if not mine and r in ph.private:
                        continue
                    got[r] += count * d if mine or r not in DEVICE else count * d / sh.devices
                    if r in sh.through:
                        got[sh.through[r]] += count * d
            self._loads[c] = got
        return got

    def stretch(self, c: int, table: dict[Key, float], resolved: list[tuple] | None = None) -> float:
        """The model's stretch of composition c's piece (unloaded time x this is its time);
        `resolved`: every kind's uses at `table` (PhaseUse.at), where the caller has them."""
        sh = self.sh
        own, beside = self.comps[c]
        if resolved is None:
            resolved = [ph.at(table) for ph in self.kinds]
        mine = resolved[own]
        # the conserved law's draws, bound -> demand, as the fluid share groups them
        draws: dict[str, dict[float, float]] = {r: {} for r in sh.conserved}

        def draw(r: str | None, d: float, b: float) -> None:
            g = draws.get(r) if r is not None else None
            if g is not None:
                g[b] = g.get(b, 0.0) + d

        for r, d, b in mine:
            draw(r, d, b)
            draw(sh.through.get(r), d, b)
        for k, count in beside:
            private = self.kinds[k].private
            for r, d, b in resolved[k]:
                if r not in private:
                    draw(None if r in DEVICE else r, count * d, b)
                    draw(sh.through.get(r), count * d, b)
        load = self.load(c)
        factor = {
            r: resource_factor(cap, load[r], draws.get(r), sh.thrash.get(r))
            for r, cap in sh.capacity.items()
            if r not in sh.bursty
        }
        free = free_fraction(mine, SCALING_RESOURCES)
        return job_stretch(free, mine, factor, load, sh.capacity, sh.bursty, sh.through, SCALING_RESOURCES)

    def stretches(self, table: dict[Key, float], comps: Iterable[int] | None = None) -> np.ndarray:
        """`stretch` of every composition (or of `comps`; the others left at 1).  A fit
        asks for the same compositions at tables that differ in one bound or a few, so each
        stretch is kept with the table values it depends on (its own kind's bounds, and
        those of the kinds beside it that reach a conserved resource: their bounds set what
        they draw there)."""
        out = np.ones(len(self.comps))
        resolved = None
        for c in range(len(self.comps)) if comps is None else comps:
            key = (c, tuple(table[k] for k in self._deps[c]))
            got = self._memo.get(key)
            if got is None:
                if resolved is None:
                    resolved = [ph.at(table) for ph in self.kinds]
                got = self._memo[key] = self.stretch(c, table, resolved)
            out[c] = got
        return out

    def oversubscription(self, c: int, r: str) -> float:
        """How far composition c's load on `r` exceeds what `r` delivers (its capacity, less
        what it loses to thrashing): 0 where it has room.  On a bursty resource, the
        others' load over its capacity (their bursts collide with the piece's whatever the
        total).  This is what a bound is identified from: the law's factor follows it."""
        sh = self.sh
        load = self.load(c)[r]
        cap = sh.capacity[r]
        if r in sh.bursty:
            own = self.kinds[self.comps[c][0]].uses.get(r, (0.0, 0.0))[0]
            return max(0.0, load - own) / cap
        t = sh.thrash.get(r)
        return max(0.0, load / (t.effective(cap, load) if t is not None else cap) - 1.0)


@dataclass
class StageData:
    """One stage's samples as the fit sees them, and which of its bounds a log can fit."""

    name: str  # as reported ("prestage+kernels" for the GPU part)
    stage: str  # whose bounds they are in the table
    own: dict[str, tuple[float, float]]  # resource -> (demand, the base's bound)
    added: dict[str, float]  # the terms the base lacks among them, resource -> demand
    dts: list[np.ndarray]  # per sample, its intervals' durations
    comps: list[np.ndarray]  # ... and their compositions (Timeline.comps)
    t: np.ndarray  # per sample, its logged seconds
    gbar: np.ndarray  # per sample x used: its time-averaged oversubscription
    used: list[str]  # its host resources
    quant_var: list[float]
    bounds: list[Bound]  # those decided: kept from the base, or not added
    groups: list[list[str]]  # those to fit: resources that share a scale

    @property
    def fixed(self) -> dict[str, float]:
        return {b.resource: b.bound for b in self.bounds}

    @property
    def room(self) -> float:
        return max(0.0, 1.0 - sum(self.fixed.values()))

    @property
    def weight(self) -> list[float]:
        """Per group, the bound one unit of its scale gives (the base's sum for a group of
        several, which keeps the base's ratio)."""
        return [max(1e-9, sum(self.own[r][1] for r in g)) if len(g) > 1 else 1.0 for g in self.groups]

    def bounds_of(self, x: np.ndarray) -> dict[str, float]:
        f = self.fixed
        for scale, grp in zip(x, self.groups, strict=True):
            for r in grp:
                f[r] = float(scale) * (self.own[r][1] if len(grp) > 1 else 1.0)
        return f

    def work(self, tl: Timeline, table: dict[Key, float]) -> np.ndarray:
        """Per sample, the unloaded work it did under `table`: the integral of dt / stretch."""
        every = np.unique(np.concatenate(self.comps))
        st = tl.stretches(table, every)
        return np.array([float(np.sum(dt / st[c])) for dt, c in zip(self.dts, self.comps, strict=True)])


def stage_data(
    name: str,
    stage: str,
    own: dict[str, tuple[float, float]],
    added: dict[str, float],
    tl: Timeline,
    members: list[int],
    quant_var: list[float],
) -> StageData:
    """One stage's samples (`members`, indices into tl.jobs) and the bounds of its own uses
    (`own`; `added` are the terms the base lacks) that a log may fit: a bound is a
    candidate only with MIN_CONTENTION_SAMPLES samples and its resource oversubscribed
    beside some of them, and, under the proportional law, at several load levels (else it
    is not identifiable and the base's stays; fit_bounds looks again at what the samples
    pin).  Resources whose loads rise and fall together share one scale."""
    sh = tl.sh
    used = [r for r in sorted(own) if r in sh.capacity and r not in DEVICE]
    dts, comps, gbar_rows = [], [], []
    for i in members:
        dt_l, c_l, g_l, m_l = [], [], [], []
        for p, (dt, comp) in zip(tl.pieces, tl.intervals, strict=True):
            if p.job != i:
                continue
            keys = tl.kinds[p.kind].keys
            dt_l.append(dt)
            c_l.append(comp)
            g_l.append(np.array([[tl.oversubscription(int(c), r) for r in used] for c in comp]))
            m_l.append(np.array([[1.0 if keys.get(r) == (stage, r) else 0.0 for r in used]] * len(dt)))
        dt = np.concatenate(dt_l)
        dts.append(dt)
        comps.append(np.concatenate(c_l))
        if not used:  # a stage on device resources only: nothing of the host to average
            gbar_rows.append(np.zeros(0))
            continue
        # the sample's time-averaged oversubscription over the phases that take the bound
        w = dt[:, None] * np.vstack([m.reshape(-1, len(used)) for m in m_l])
        g = np.vstack([x.reshape(-1, len(used)) for x in g_l])
        gbar_rows.append(np.sum(w * g, axis=0) / np.maximum(np.sum(w, axis=0), 1e-12))
    t = np.array([float(np.sum(dt)) for dt in dts])
    gbar = np.array(gbar_rows).reshape(len(t), len(used))

    bounds: list[Bound] = []
    fit: list[str] = []
    for c, r in enumerate(used):
        base_f = own[r][1]
        col = gbar[:, c]
        spread = float(np.std(col))
        if r in added:
            pass  # a term the base lacks: fitted where identifiable, else not added (below)
        elif r not in FITTED_RESOURCES:
            bounds.append(Bound(r, base_f, False, "kept from the base (a log does not time it)"))
        elif len(t) < MIN_CONTENTION_SAMPLES:
            why = f"kept from the base: {len(t)} samples, fitting a bound needs {MIN_CONTENTION_SAMPLES}"
            bounds.append(Bound(r, base_f, False, why))
        elif float(np.max(col)) <= 0.0:
            why = f"kept from the base: the log never oversubscribed {r} beside it (not identifiable)"
            bounds.append(Bound(r, base_f, False, why))
        elif spread < MIN_SPREAD and r not in sh.conserved:
            # under the proportional law a bound is seen only in its own stage's samples, so
            # they must show several load levels; under the conserved law it also sets what
            # the stage draws, so the common factor every other stage beside it sees, and
            # whether the samples pin it is the joint fit's to say (MAX_BOUND_SE)
            why = (
                f"kept from the base: the log shows it at one load level ({r} oversubscribed by "
                f"{float(np.mean(col)):.2f} +- {spread:.2f}): not identifiable"
            )
            bounds.append(Bound(r, base_f, False, why))
        else:
            fit.append(r)
    for r in [x for x in used if x in added]:
        col = gbar[:, used.index(r)]
        if len(t) >= MIN_CONTENTION_SAMPLES and float(np.std(col)) >= MIN_SPREAD:
            fit.append(r)
        else:
            bounds.append(
                Bound(r, 0.0, False, "not in the base; not added: the log does not show it at several loads")
            )

    def together(a: str, b: str) -> bool:
        c0, c1 = gbar[:, used.index(a)], gbar[:, used.index(b)]
        return abs(float(np.corrcoef(c0, c1)[0, 1])) > 0.95

    groups: list[list[str]] = []
    for r in [x for x in fit if x not in added]:
        for grp in groups:
            if together(grp[0], r):
                grp.append(r)
                break
        else:
            groups.append([r])
    # a term the base lacks has no ratio to keep: of added terms that rise together only
    # the first (the host thread's core before the bandwidth) is fitted
    for r in [x for x in fit if x in added]:
        first = next((grp[0] for grp in groups if grp[0] in added and together(grp[0], r)), None)
        if first is None:
            groups.append([r])
        else:
            why = (
                f"not in the base; not added: its load rose with {first}'s, and a log cannot tell them apart"
            )
            bounds.append(Bound(r, 0.0, False, why))
    return StageData(name, stage, own, added, dts, comps, t, gbar, used, quant_var, bounds, groups)


#: A fitted bound whose standard error (from the fit's information) is above this is not
#: identifiable from the log: the samples would fit as well with it anywhere in a range
#: wider than the test tolerances, so the base's stays.
MAX_BOUND_SE = 0.1
#: A term the base lacks is added only with a bound of at least this, and two standard
#: errors: one the samples cannot tell from none would load the others for nothing.
MIN_ADDED = 0.005
#: Finite-difference step of the fit's Jacobian, in units of a group's scale.
STEP = 1e-4


class _Joint:
    """One joint fit of the stages' bound groups (scales x, laid out stage by stage)."""

    def __init__(self, data: list[StageData], tl: Timeline, table: dict[Key, float]) -> None:
        self.data, self.tl, self.table = data, tl, table
        self.layout: list[list[int]] = []
        at = 0
        for d in data:
            self.layout.append(list(range(at, at + len(d.groups))))
            at += len(d.groups)
        self.size = at
        self.top = np.array([d.room / w for d in data for w in d.weight])

    def table_of(self, x: np.ndarray) -> dict[Key, float]:
        t = dict(self.table)
        for d, idx in zip(self.data, self.layout, strict=True):
            t.update({(d.stage, r): v for r, v in d.bounds_of(x[idx]).items()})
        return t

    def logw(self, x: np.ndarray) -> list[np.ndarray]:
        """Per stage, its samples' log implied work."""
        t = self.table_of(x)
        return [np.log(np.maximum(d.work(self.tl, t), 1e-300)) for d in self.data]

    def nll(self, x: np.ndarray) -> float:
        """The negative log likelihood, each stage's noise variance at its estimate."""
        return sum(len(w) * float(np.log(np.var(w) + 1e-300)) for w in self.logw(x)) / 2

    def solve(self) -> np.ndarray:
        from scipy.optimize import minimize

        # from the base's bounds (a scale of 1 for a group that keeps the base's ratio)
        start = np.array(
            [
                min(t, d.own[g[0]][1] if len(g) == 1 else 1.0)
                for d, idx in zip(self.data, self.layout, strict=True)
                for g, t in zip(d.groups, self.top[idx], strict=True)
            ]
        )
        cons = [
            {"type": "ineq", "fun": lambda x, idx=idx, d=d: d.room - float(np.dot(x[idx], d.weight))}
            for d, idx in zip(self.data, self.layout, strict=True)
            if idx
        ]
        res = minimize(self.nll, start, method="SLSQP", bounds=[(0.0, t) for t in self.top], constraints=cons)
        return np.clip(res.x, 0.0, self.top)

    def information(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(covariance of the scales, Gauss-Newton step from x): from J^T J / variance
        summed over the stages, J how each sample's centred log work moves with each scale
        (one-sided differences, never past a bound of 1)."""
        w0 = [w - w.mean() for w in self.logw(x)]
        var = [max(float(np.mean(w**2)), 1e-300) for w in w0]
        jac = [np.zeros((len(w), self.size)) for w in w0]
        for j in range(self.size):
            h = STEP if x[j] + STEP <= self.top[j] else -STEP
            xj = x.copy()
            xj[j] += h
            for k, w1 in enumerate(self.logw(xj)):
                jac[k][:, j] = (w1 - w1.mean() - w0[k]) / h
        info = sum(jk.T @ jk / v for jk, v in zip(jac, var, strict=True))
        grad = sum(jk.T @ wk / v for jk, wk, v in zip(jac, w0, var, strict=True))
        cov = np.linalg.pinv(info)
        return cov, -cov @ grad

    def doubtful(
        self, x: np.ndarray, cov: np.ndarray, step: np.ndarray
    ) -> list[tuple[StageData, list[str], str]]:
        """The groups a log cannot fit after all, each with why."""
        out = []
        for d, idx in zip(self.data, self.layout, strict=True):
            if not idx:
                continue
            wv = np.array(d.weight)
            total = float(x[idx] @ wv)
            if d.room > 0 and total >= d.room - 1e-3:
                beyond = float(step[idx] @ wv)
                se = float(np.sqrt(max(0.0, wv @ cov[np.ix_(idx, idx)] @ wv)))
                if beyond > 2 * se:
                    why = (
                        f"the fit ran into bound 1 with the samples asking for {total + beyond:.2f} "
                        f"(+- {se:.2f}): the slowdown beside it is more than the "
                        f"{self.tl.sh.law(d.groups[0][0])} carries"
                    )
                    out += [(d, g, why) for g in d.groups]
                    continue
            for j, g, wj in zip(idx, d.groups, d.weight, strict=True):
                se = float(np.sqrt(max(0.0, cov[j, j]))) * wj
                if g[0] in d.added and x[j] * wj < max(MIN_ADDED, 2 * se):
                    why = f"it gave bound {x[j] * wj:.3f} +- {se:.3f}: not told apart from none"
                    out.append((d, g, why))
                elif se > MAX_BOUND_SE:
                    out.append((d, g, f"the samples pin it only to +- {se:.2f}: not identifiable"))
        return out


def fit_bounds(data: list[StageData], tl: Timeline, table: dict[Key, float]) -> dict[Key, float]:
    """Every stage's identifiable bounds, fitted at once; returns the table they give, and
    adds to each stage's `bounds` what was fitted or, on a second look, kept.

    A stage's samples are slowed by what runs beside them as the law carries it, and under
    the conserved law a stage's bound sets what its jobs draw, so the factor every other
    stage beside them sees: a stage alone on a resource stretches by load / capacity
    whatever its own bound, and it is the others' samples that tell its bound.  So the
    bounds maximise the likelihood of all the samples together, each stage with its own
    lognormal noise: they minimise the sum over stages of n log(variance of the log
    implied work).  Under the proportional law a bound slows its own stage only, and this
    is each stage's least variance, apart.

    Then, from the fit's information (Gauss-Newton): a bound the samples cannot pin
    (standard error over MAX_BOUND_SE) is not identifiable; a stage whose bounds reach 1
    where the likelihood would still rise beyond (by more than two standard errors) shows a
    slowdown beside it that the law cannot carry, a mechanism the base lacks.  Either is
    kept from the base, and the others are fitted again without it."""
    while True:
        joint = _Joint(data, tl, table)
        if joint.size == 0:
            return dict(table)
        x = joint.solve()
        cov, step = joint.information(x)
        drop = joint.doubtful(x, cov, step)
        if not drop:
            break
        for d, g, why in drop:
            d.groups.remove(g)
            for r in g:
                c = d.gbar[:, d.used.index(r)]
                seen = f"{len(d.t)} samples at {r} oversubscription {c.min():.2f}..{c.max():.2f}"
                if r in d.added:
                    d.bounds.append(Bound(r, 0.0, False, f"not in the base; not added: {seen}, but {why}"))
                else:
                    d.bounds.append(Bound(r, d.own[r][1], False, f"kept from the base: {seen}, but {why}"))
    out = joint.table_of(x)
    for d, idx in zip(data, joint.layout, strict=True):
        fitted = d.bounds_of(x[idx]) if idx else {}
        for j, grp in zip(idx, d.groups, strict=True):
            se = float(np.sqrt(max(0.0, cov[j, j])))
            for r in grp:
                c = d.gbar[:, d.used.index(r)]
                law = tl.sh.law(r)
                why = (
                    f"fitted under the {law}, from {len(d.t)} samples at {r} oversubscription "
                    f"{c.min():.2f}..{c.max():.2f}, +- {se * (d.own[r][1] if len(grp) > 1 else 1.0):.3f}"
                )
                if len(grp) > 1:
                    others = ", ".join(x for x in grp if x != r)
                    why += f" (with {others}: their loads rose together, so the base's ratio is kept)"
                if r in d.added:
                    b = Bound(r, fitted[r], True, why + "; added: not in the base", d.added[r], law)
                    d.bounds.append(b)
                else:
                    d.bounds.append(Bound(r, fitted[r], True, why + f"; base {d.own[r][1]:.4g}", law=law))
    return out


def finish(d: StageData, tl: Timeline, table: dict[Key, float]) -> StageFit:
    """A stage's unloaded time (the mean of its samples' implied work under the fitted
    bounds) and noise (what spread is left, less the log's rounding)."""
    w = d.work(tl, table)
    t0 = float(np.mean(w))
    quant = float(np.mean(np.array(d.quant_var) / np.maximum(d.t, QUANTUM / 2) ** 2))
    var = float(np.var(w / t0, ddof=1)) if len(w) > 1 else 0.0
    cv = float(np.sqrt(max(0.0, var - quant)))
    raw = float(np.std(d.t) / np.mean(d.t))
    order = {r: i for i, r in enumerate(d.used)}
    bounds = sorted(d.bounds, key=lambda b: order[b.resource])
    return StageFit(d.name, len(d.t), float(np.mean(d.t)), t0, min(cv, 1.9), raw, bounds)
