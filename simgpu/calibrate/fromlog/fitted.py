"""The fitted profile: stage times and noise rescaled from the base, the bounds, the
configuration, and the header saying what came from where; then the check prediction
of the logged configuration beside the log (`fit_from_log`).
"""

from __future__ import annotations

import copy
import statistics
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simgpu.calibrate.fromlog.bounds import (
    DEVICE,
    JOB_STAGES,
    PhaseUse,
    Sharing,
    StageFit,
    Timeline,
    base_table,
    finish,
    fit_bounds,
    make_room,
    phase_uses,
    sharing,
    stage_data,
)
from simgpu.calibrate.fromlog.samples import QUANTUM, Samples, check_enough, samples
from simgpu.calibrate.fromlog.settings import KINDS, Settings, infer_design, infer_settings
from simgpu.calibrate.refit import inline_laws
from simgpu.config import PipelineConfig, Workload, load_toml, read_config_table
from simgpu.cuzklog import (
    MUTEX_LOCKS,
    PHASE_FIELDS,
    SOURCE_COMMIT,
    STAGE_SOURCES,
    TIMELINE_SOURCE,
    TIMING_SOURCE,
    CuzkLog,
    read_log,
)
from simgpu.errors import UserError
from simgpu.profile import Law, PointsLaw, Profile, find_profile, load_profile, profile_from_dict
from simgpu.profile.tomlwrite import Inline, dumps

#: Host terms a fit may add to the GPU part under the mutex where its base has none: it
#: is driven by a host thread (a core) and streams its bases from host memory (the data
#: sheet, docs/data/cuzk-rtx5070ti.md: GPU stages slow when synthesis saturates DDR).
#: Its own bandwidth demand is not in a log, so it is 0: the term slows the kernels, it
#: does not load the others.  A term is offered only where no phase of the GPU part
#: reaches the resource already (the seed's kernels reach host memory through the link: a
#: second path would count it twice).
CANDIDATES: dict[str, float] = {"cores": 1.0, "membw": 0.0}
#: Monte Carlo runs of the check prediction.
CHECK_RUNS = 5
WORKLOAD = "from-log"


def law_at(law: Law | PointsLaw, n: int, seconds: float) -> Any:
    """The base's law for a time, rescaled to give `seconds` at size n: its shape in n
    is the base's (a log has one size), its level the log's."""
    if seconds <= 0:
        return 0.0
    base = law(n)
    if base <= 0:  # the base says nothing of this time's shape: proportional to n
        return Inline(law=f"t_log * n/{n}", t_log=seconds)
    k = seconds / base
    if isinstance(law, PointsLaw):
        out = Inline(points=[[int(x) if x == int(x) else x, y * k] for x, y in law.points])
        if law.beyond is not None:
            out["beyond"] = scaled(law.beyond, k)
        return out
    return seconds if _constant(law) else scaled(law, k)


def _constant(law: Law) -> bool:
    try:
        float(law.expr)
    except ValueError:
        return False
    return True


def scaled(law: Law, k: float) -> Inline:
    """`law` times k, as a law table."""
    name = next(c for c in ("k_log", "k_log1", "k_log2") if c not in law.coeffs)
    return Inline(law=f"{name} * ({law.expr})", **law.coeffs, **{name: k})


def kernel_shares(prof: Profile, n: int, s: Samples) -> tuple[float, list[tuple[str, float, bool]], str]:
    """How the time under the mutex splits: (prestage's share, [(phase, its share of the
    kernels, whether the base lacks it)], how it was decided).  The base's phases come
    first, in their order."""
    pre = prof.stages["prestage"].phases
    base_pre = sum(ph.time(n) for ph in pre)
    kphases = prof.stages["kernels"].phases
    base_k = [max(0.0, ph.time(n)) for ph in kphases]
    if not s.gpu_total:
        total = base_pre + sum(base_k)
        pre_share = base_pre / total if total > 0 else 0.0
        shares = [b / sum(base_k) if sum(base_k) > 0 else 1 / len(base_k) for b in base_k]
        out = [(ph.name, sh, False) for ph, sh in zip(kphases, shares, strict=True)]
        return pre_share, out, "the log times only the whole GPU part (mutex_held_ms): split as in the base"
    held = statistics.mean(j.seconds for j in s.stages["held"])
    gtotal = statistics.mean(s.gpu_total)
    pre_share = min(1.0, max(0.0, held - gtotal) / held)
    # a field that is 0 ms in every sample is a phase that did not run (simgpu's prover
    # has no batch addition), not one a little under a millisecond
    field_share = {
        f: statistics.mean(xs) / gtotal if max(xs) > QUANTUM else 0.0 for f, xs in s.phases.items()
    }
    covered = sum(field_share.values())
    if covered > 1.0:  # rounding of the fields: they cannot exceed the GPU thread's total
        field_share = {f: v / covered for f, v in field_share.items()}
        covered = 1.0
    shares = [0.0] * len(kphases)
    extra: list[tuple[str, float, bool]] = []
    owner = {p: f for f, ps in PHASE_FIELDS.items() for p in ps}
    for f, sh in field_share.items():
        idx = [i for i, ph in enumerate(kphases) if owner.get(ph.name) == f]
        _spread(shares, idx, base_k, sh, extra, f)
    rest = [i for i, ph in enumerate(kphases) if ph.name not in owner]
    _spread(shares, rest, base_k, 1.0 - covered, extra, "sync")
    out = [(ph.name, sh, False) for ph, sh in zip(kphases, shares, strict=True)]
    out += extra
    how = (
        "prestage = mutex_held_ms - gpu_total_ms; kernels phases from ntt_msm_h_ms, batch_add_ms, "
        "tail_msm_ms, the rest of gpu_total_ms to the phases no field covers"
    )
    return pre_share, out, how


def _spread(
    shares: list[float], idx: list[int], base: list[float], share: float, extra: list, name: str
) -> None:
    """Give `share` to the phases `idx` in the base's proportions, or to a new phase."""
    if share <= 0:
        return
    if not idx:
        if share > 0.01 or name != "sync":
            extra.append((name, share, True))
        return
    total = sum(base[i] for i in idx)
    for i in idx:
        shares[i] += share * (base[i] / total if total > 0 else 1 / len(idx))


@dataclass
class FromLog:
    """What `--from-log` fitted and decided: the profile document and the report."""

    doc: dict[str, Any]
    header: str
    settings: Settings
    fits: dict[str, StageFit]
    design: tuple[str, str]
    kept: list[str]
    checks: dict[str, dict[str, float | None]]
    log: CuzkLog
    notes: list[str]

    def summary(self) -> list[str]:
        """The report's lines, for the terminal."""
        log = self.log
        lines = [
            f"read {log.path}: {log.lines} lines, {len(log.partitions)} partitions of {len(log.jobs())} "
            f"job(s), {len(log.samples)} CUZK_TIMING samples"
        ]
        if log.skipped:
            counts = sorted(log.skipped.items(), key=lambda x: -x[1])
            lines.append("skipped: " + ", ".join(f"{n} {k}" for k, n in counts))
        lines.append("configuration:")
        for name, s in self.settings.items.items():
            shown = "auto" if s.value is None else s.value
            lines.append(f"  {name:24s} {shown!s:>12}  {s.source}")
        lines.append(f"  {'design':24s} {self.design[0]:>12}  inferred: {self.design[1]}")
        lines.append("stages (seconds at the log's size; t0 = unloaded, after the contention law):")
        for f in self.fits.values():
            lines.append(
                f"  {f.stage:16s} {f.samples:4d} samples  mean {f.mean:.4f}  t0 {f.t0:.4f}  noise cv "
                f"{f.cv:.3f} (raw spread {f.spread:.3f})"
            )
            lines += [f"    {b.resource:9s} bound {b.bound:.4f}  {b.why}" for b in f.bounds]
        lines += [f"from the base profile: {k}" for k in self.kept]
        lines += [f"note: {n}" for n in self.notes]
        for name, c in self.checks.items():
            err = "-" if c["rel_error"] is None else f"{100 * c['rel_error']:+.1f} %"
            pred = "-" if c["predicted"] is None else f"{c['predicted']:.4f}"
            lines.append(f"check {name}: predicted {pred} s, logged {c['logged']:.4f} s, error {err}")
        return lines


#: The order the stages are fitted in (and reported).
ORDER = ("synthesis", "prep", "b_g2_msm", "held")


def fit_stages(s: Samples, prof: Profile, n: int, cores: float, devices: int = 1) -> dict[str, StageFit]:
    """Every fitted stage: synthesis, prep, b_g2_msm and the GPU part under the mutex.
    Where the GPU part gains a term the base lacks, the fit is made again with its demand
    loading the others (a core driving the GPU is a core the others do not have)."""
    sh = sharing(prof, cores, devices)
    phases = phase_uses(prof, n)
    offered = {
        r: (d, 0.0) for r, d in CANDIDATES.items() if not any(_reaches(ph, r, sh) for ph in _held(phases))
    }
    fits = _fit_pass(s, prof, n, sh, offered, private=True)
    added = {
        b.resource: (b.demand, b.bound) for b in fits["held"].bounds if b.fitted and b.demand is not None
    }
    if not added:
        return fits
    again = _fit_pass(s, prof, n, sh, added, private=False)
    kept = {b.resource for b in again["held"].bounds if b.fitted and b.demand is not None}
    # a second fit that drops the term would leave its demand unaccounted: keep the first
    return again if kept == set(added) else fits


def _held(phases: dict[str, list[PhaseUse]]) -> list[PhaseUse]:
    return [ph for stage in JOB_STAGES["held"] for ph in phases.get(stage, [])]


def _reaches(ph: PhaseUse, r: str, sh: Sharing) -> bool:
    """Whether the phase leans on `r`, directly or through a link (the kernels' copies
    reach host memory: a host-memory term on them would count those bytes twice)."""
    return any(u == r or sh.through.get(u) == r for u in ph.uses)


def _fit_pass(
    s: Samples,
    prof: Profile,
    n: int,
    sh: Sharing,
    terms: dict[str, tuple[float, float]],
    private: bool,
) -> dict[str, StageFit]:
    """One fit of every stage, the GPU part with `terms` (resource -> (demand, bound))
    that the base lacks; `private`: their demand slows the GPU part but loads no one else
    (a candidate, until a fit adds it)."""
    phases = phase_uses(prof, n, {stage: terms for stage in JOB_STAGES["held"]})
    # the GPU part is fitted as one job: the prestage takes the kernels' bound on a host
    # resource both lean on (the profile written gets it in both).  A device bound is
    # never fitted (stage_data), so each keeps its own: the prestage's small share on the
    # GPU is not the kernels' whole one
    kernels = {
        r for ph in phases["kernels"] for r, k in ph.keys.items() if k == ("kernels", r) and r not in DEVICE
    }
    phases["prestage"] = [
        PhaseUse(
            ph.seconds,
            ph.uses,
            {r: ("kernels", r) if r in kernels else k for r, k in ph.keys.items()},
            frozenset(terms) if private else frozenset(),
        )
        for ph in phases["prestage"]
    ]
    if private:
        phases["kernels"] = [
            PhaseUse(ph.seconds, ph.uses, ph.keys, frozenset(terms)) for ph in phases["kernels"]
        ]
    table = base_table(phases)
    jobs = [j for name in ORDER for j in s.stages[name]]
    tl = Timeline(jobs, phases, sh, table)
    spans, at = {}, 0
    for name in ORDER:
        spans[name] = list(range(at, at + len(s.stages[name])))
        at += len(s.stages[name])
    data = []
    for name in ORDER:
        stage = "kernels" if name == "held" else name
        own = {r: ph.uses[r] for ph in phases[stage] for r, k in ph.keys.items() if k == (stage, r)}
        data.append(
            stage_data(
                "prestage+kernels" if name == "held" else name,
                stage,
                own,
                {r: d for r, (d, _) in terms.items()} if name == "held" else {},
                tl,
                spans[name],
                [j.quant_var for j in s.stages[name]],
            )
        )
    table = fit_bounds(data, tl, table)
    return {name: finish(d, tl, table) for name, d in zip(ORDER, data, strict=True)}


class _Doc:
    """The base profile's document, rewritten with what the log fitted."""

    def __init__(self, raw: dict[str, Any], prof: Profile, n: int) -> None:
        self.doc = inline_laws(copy.deepcopy(raw))
        self.doc.pop("calibration", None)  # the base's measurements are not this profile's
        self.prof, self.n = prof, n
        self.stages = self.doc["stages"]
        self.notes: list[str] = []

    def set_time(self, stage: str, seconds: float) -> None:
        """The stage's time (its phases' in the base's proportions) at the fitted level,
        each law in the base's shape."""
        laws = [ph.time for ph in self.prof.stages[stage].phases]
        base_t = [max(0.0, law(self.n)) for law in laws]
        total = sum(base_t)
        shares = [b / total if total > 0 else 1 / len(base_t) for b in base_t]
        if "phases" in self.stages[stage]:
            for ph, law, sh in zip(self.stages[stage]["phases"], laws, shares, strict=True):
                ph["time"] = law_at(law, self.n, seconds * sh)
        else:
            self.stages[stage]["time"] = law_at(laws[0], self.n, seconds)

    def set_fit(self, stage: str, fit: StageFit, seconds: float | None = None) -> None:
        if seconds is not None:
            self.set_time(stage, seconds)
        st = self.stages[stage]
        st["noise_cv"] = round(max(0.005, fit.cv), 4)
        uses = st.get("uses")
        for b in fit.bounds:
            if b.fitted and b.demand is not None:
                # a term the base lacks reaches every phase, as the fit gave it (phase_uses)
                for _, table in self._term_tables(stage):
                    table[b.resource] = Inline(demand=b.demand, bound=round(b.bound, 4))
                self.notes.append(f"{stage}: {b.resource} term added ({b.why})")
            elif b.fitted and uses is not None and b.resource in uses:
                uses[b.resource] = Inline(demand=uses[b.resource].get("demand", 1.0), bound=round(b.bound, 4))
        for where, table in self._term_tables(stage, create=False):
            self._make_room(where, table)

    def _term_tables(self, stage: str, create: bool = True) -> list[tuple[str, dict[str, Any]]]:
        """The `uses` tables a stage-level term reaches: the stage's own where a phase takes
        it (a phase with no `uses` of its own, or a stage without phases; made if `create`),
        and each phase's own."""
        st = self.stages[stage]
        phases = st.get("phases") or []
        out = []
        if not phases or any("uses" not in ph for ph in phases):
            if "uses" not in st and create:
                st["uses"] = Inline()
            if "uses" in st:
                out.append((stage, st["uses"]))
        out += [
            (f"{stage} phase {ph.get('name', i)}", ph["uses"]) for i, ph in enumerate(phases) if "uses" in ph
        ]
        return out

    def _make_room(self, where: str, uses: dict[str, Any]) -> None:
        """Bounds adding up to at most 1, as the fit evaluated them (make_room)."""
        nums = {r: float(u["bound"]) for r, u in uses.items() if _is_number(u.get("bound"))}
        for r, b in make_room(nums).items():
            if b != nums[r]:
                uses[r]["bound"] = round(b, 4)
                self.notes.append(
                    f"{where}: {r} bound lowered to {uses[r]['bound']} so that its bounds add up to 1"
                )

    def set_kernels(self, seconds: float, shares: list[tuple[str, float, bool]]) -> None:
        kernels = self.stages["kernels"]
        if "phases" not in kernels:
            self.set_time("kernels", seconds)
            if any(new for _, _, new in shares) or len(shares) > 1:
                self.notes.append("kernels: the base has no phases, so the log's phase times are not used")
            return
        laws = [ph.time for ph in self.prof.stages["kernels"].phases]
        phases = []
        for i, (name, share, new) in enumerate(shares):
            if new:
                phases.append({"name": name, "time": round(seconds * share, 9)})
                self.notes.append(
                    f"kernels phase {name}: timed by the log, not in the base: added, no buffers"
                )
            else:
                ph = dict(kernels["phases"][i])
                ph["time"] = law_at(laws[i], self.n, seconds * share)
                phases.append(ph)
        kernels["phases"] = phases


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _mean_wait(summaries: list[Any]) -> float:
    total = acq = 0.0
    for s in summaries:
        for name, lk in s.locks.items():
            if name.rsplit("/", 1)[-1] in MUTEX_LOCKS:
                total += lk["wait_s_total"]
                acq += lk["acquisitions"]
    return total / acq if acq else 0.0


def _mean_queue(records: list[Any]) -> float | None:
    """Mean seconds from partition_queued to partition_picked in one predicted run."""
    queued: dict[tuple[int, int], float] = {}
    waits = []
    for r in records:
        key = (r.proof, r.partition)
        if r.event == "partition_queued":
            queued[key] = r.t
        elif r.event == "partition_picked" and key in queued:
            waits.append(r.t - queued.pop(key))
    return statistics.mean(waits) if waits else None


def _check(pred: float | None, logged: float) -> dict[str, float | None]:
    err = None if pred is None or logged <= 0 else (pred - logged) / logged
    return {"predicted": pred, "logged": logged, "rel_error": err}


def fit_from_log(
    log_path: Path, out: Path, config_path: Path | None = None, base: str | None = None
) -> FromLog:
    """Read the log, fit, check, and write the profile to `out` (see the module docstring)."""
    from simgpu.model.montecarlo import predict
    from simgpu.sched.registry import resolve_design

    log = read_log(log_path)
    base_path = find_profile(base)
    prof = load_profile(base_path)
    try:
        raw = tomllib.loads(base_path.read_text())
    except OSError as e:
        raise UserError(f"cannot read base profile {base_path}: {e.strerror}") from None
    config = read_config_table(load_toml(config_path, "config file"), str(config_path)) if config_path else {}
    st = infer_settings(log, config, str(config_path) if config_path else None, prof)
    s = samples(log)
    check_enough(s)
    n = int(st.value("constraints"))
    design = infer_design(log)
    fits = fit_stages(s, prof, n, float(st.value("cpu_cores")), int(st.value("devices")))

    d = _Doc(raw, prof, n)
    for stage in ("synthesis", "prep", "b_g2_msm"):
        d.set_fit(stage, fits[stage], fits[stage].t0)
    held = fits["held"]
    pre_share, kshares, how = kernel_shares(prof, n, s)
    d.set_fit("prestage", held, held.t0 * pre_share)
    d.set_fit("kernels", held)
    d.set_kernels(held.t0 * (1.0 - pre_share), kshares)
    notes = [*st.notes, *d.notes, f"prestage + kernels: {how}"]
    kept = []
    # the epilogue: what a GPU call (GPU_START .. GPU_END) leaves once the parts the
    # design runs on its path are taken off (single-lock and split-finalizer alike)
    parts = [statistics.mean(s.pre_lock), statistics.mean(s.waits), held.mean, fits["b_g2_msm"].mean]
    epi = statistics.mean(s.calls) - sum(parts)
    if epi > QUANTUM / 2:
        d.set_time("epilogue", epi)
        notes.append(f"epilogue: {epi:.4f} s, the GPU calls' mean less their wait, hold and b_g2_msm")
        kept.append("epilogue noise (the log gives the epilogue as a difference of means, not per call)")
    else:
        kept.append(
            f"epilogue time and noise (the GPU calls leave {epi * 1e3:.1f} ms beside their parts: b_g2_msm "
            "ran beside the kernels, as in cuzk's split API, or under the mutex; not identifiable)"
        )
    doc = d.doc
    if st.items["cpu_cores"].kind == "log":
        doc["hardware"]["cpu_cores"] = int(st.value("cpu_cores"))
    kept += [
        "hardware: GPU, VRAM, host RAM and what is resident, memory and host-to-device bandwidth"
        + ("" if st.items["cpu_cores"].kind == "log" else ", cores")
        + " (a log does not measure capacities)",
        "every buffer's size and every stage's footprints (a log has no memory figures)",
        f"how each time grows with the partition size (the log has one size, n = {n:,}: each law keeps "
        "the base's shape, at the log's level)",
        "resource demands, and every contention bound not fitted (see above for why)",
        f"how each resource is shared, under which every bound was fitted ({sharing(prof, 1.0).describe()}): "
        "the base's [contention] section, as it is",
    ]
    wl = Workload(WORKLOAD, int(st.value("partitions")), n)
    doc["workloads"][WORKLOAD] = {"partitions": wl.partitions, "constraints": n}
    doc["profile"] = {
        "name": out.stem,
        "description": f"fitted from the daemon log {log_path.name} on the base profile {prof.name}",
        "source": f"simgpu calibrate --from-log {log_path.name}, {time.strftime('%Y-%m-%d')}",
        "default_workload": WORKLOAD,
    }

    # the check: the fitted profile predicts the logged configuration
    keys = ("devices", "gpu_workers_per_device", "partition_workers", "max_gpu_queue_depth", "total_budget")
    # gpu_threads is recorded from the log but not run: the profile's stage times hold for
    # cuzk's default pool (simgpu.config refuses any other value)
    keys += ("proofs", "concurrency", "arrival_rate")
    cfg = PipelineConfig().with_overrides(**{k: st.value(k) for k in keys if k in st.items})
    try:
        pred = predict(profile_from_dict(doc, str(out)), cfg, wl, resolve_design(design[0]), runs=CHECK_RUNS)
    except UserError as e:
        raise UserError(f"the fitted profile cannot predict the logged configuration: {e}") from None
    lives = list(log.partitions.values())
    makespan = (max(p.at("GPU_END") for p in lives) - min(p.at("SYNTH_START") for p in lives)) * QUANTUM
    checks = {
        "throughput (s/proof)": _check(
            pred.aggregate()["throughput_s_per_proof"], makespan / len(log.jobs())
        ),
        "mean mutex wait": _check(_mean_wait(pred.summaries), statistics.mean(s.waits)),
        "mean GPU queue wait": _check(_mean_queue(pred.first.records), statistics.mean(s.queue)),
    }
    doc["calibration"] = _calibration_table(log_path, prof, design, fits, st, checks)
    header = _header(log_path, log, prof, n, fits, st, design, kept, checks)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dumps(doc, header))
    load_profile(out)  # what was written must load
    return FromLog(doc, header, st, fits, design, kept, checks, log, notes)


def _key(name: str) -> str:
    return name.split(" (")[0].replace("+", "_").replace(" ", "_")


def _calibration_table(
    log_path: Path,
    prof: Profile,
    design: tuple[str, str],
    fits: dict[str, StageFit],
    st: Settings,
    checks: dict[str, dict[str, float | None]],
) -> dict[str, Any]:
    def num(v: float | None) -> float | str:
        return "n/a" if v is None else round(v, 6)

    return {
        "method": "from-log",
        "log": log_path.name,
        "formats": f"curio {SOURCE_COMMIT}",
        "base": prof.name,
        "design": design[0],
        "samples": {_key(f.stage): f.samples for f in fits.values()},
        "mean_s": {_key(f.stage): round(f.mean, 6) for f in fits.values()},
        "noise_cv": {_key(f.stage): round(f.cv, 4) for f in fits.values()},
        "raw_spread_cv": {_key(f.stage): round(f.spread, 4) for f in fits.values()},
        "bounds_fitted": [f"{f.stage}.{b.resource}" for f in fits.values() for b in f.bounds if b.fitted],
        "bound_laws": {
            f"{_key(f.stage)}.{b.resource}": b.law for f in fits.values() for b in f.bounds if b.fitted
        },
        "config": {k: ("auto" if v.value is None else v.value) for k, v in st.items.items()},
        "config_source": {k: v.kind for k, v in st.items.items()},
        "checks": {_key(k): Inline({kk: num(v) for kk, v in c.items()}) for k, c in checks.items()},
    }


def _header(
    log_path: Path,
    log: CuzkLog,
    prof: Profile,
    n: int,
    fits: dict[str, StageFit],
    st: Settings,
    design: tuple[str, str],
    kept: list[str],
    checks: dict[str, dict[str, float | None]],
) -> str:
    fitted = [f"{f.stage}.{b.resource} ({b.law})" for f in fits.values() for b in f.bounds if b.fitted]
    not_fitted = [f"{f.stage}.{b.resource}" for f in fits.values() for b in f.bounds if not b.fitted]
    lines = [
        f"simgpu profile fitted by `simgpu calibrate --from-log` on {time.strftime('%Y-%m-%d %H:%M')}",
        f"from the daemon log {log_path.name} ({log.lines} lines: {len(log.jobs())} jobs, "
        f"{len(log.partitions)} partitions of {n:,} constraints), on the base profile {prof.name}.",
        f"Formats as printed by curio {SOURCE_COMMIT[:12]} ({TIMELINE_SOURCE}, {TIMING_SOURCE});",
        "they and the mapping of cuzk's stages to simgpu's: docs/log-format.md.",
        "Where such a log times each of simgpu's stages:",
        *[f"  {stage}: {where};" for stage, where in STAGE_SOURCES.items()],
        "",
        "From the log:",
        "  stage times at the log's size and their noise: "
        + ", ".join(f.stage for f in fits.values())
        + ", and the epilogue where a GPU call leaves time for it;",
        "  contention bounds fitted, each under the base's law for its resource: "
        + (", ".join(fitted) or "none")
        + ";",
    ]
    names = {
        "log": "configuration from its lines",
        "config": "from --config",
        "inferred": "inferred from its events",
        "default": "defaults (the log does not say)",
        "base": "from the base profile",
    }
    for kind in KINDS:
        keys = st.by_kind(kind)
        if keys:
            lines.append(f"  {names[kind]}: {', '.join(keys)};")
    lines += [
        f"  design {design[0]}, inferred ({design[1]}).",
        "",
        f"From the base profile {prof.name}, because a log cannot inform them:",
        *[f"  {k};" for k in kept],
        "  contention bounds kept (not identifiable from this log): "
        + (", ".join(not_fitted) or "none")
        + ".",
        "",
        "Checks (the logged configuration predicted with this profile):",
    ]
    for name, c in checks.items():
        err = "n/a" if c["rel_error"] is None else f"{100 * c['rel_error']:+.1f}%"
        pred = "n/a" if c["predicted"] is None else f"{c['predicted']:.4f}"
        lines.append(f"  {name}: predicted {pred} s, logged {c['logged']:.4f} s ({err}).")
    return "\n".join(lines)
