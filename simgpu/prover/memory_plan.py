"""The prover's memory plan: which named buffers each stage holds, allocates and frees.

This is the simulator's view of `simgpu.prover.groth16` (the Profile's footprints come
from it) and it must say what the code does: on the CPU backend a test checks that the
ledger's peak during `kernels` equals `stage_peak(plan, "kernels")` to the byte; on the
GPU a test checks it within 5% of CuPy's pool peak.  Kernel-internal scratch (NTT,
MSM temporaries) comes from `simgpu.gpu.footprint`, the kernels' own account; the CPU
backend books those same sizes, so both backends follow one plan.

`prover_plan(shape, stream_batch=..., resident_bases=..., prestaged=..., b_g2_on=...)`
returns::

    {"buffers": {name: bytes, ...},
     "resident": {"vram": [names], "host": [names]},
     "stages": {
        "synthesis": {"host_out": ["host_abc", "host_aux"]},
        "prep":      {"host_out": ["host_prep"]},
        "prestage":  {"vram_out": ["d_a", "d_bc"], "host_release": ["host_abc"]},
        "kernels":   {"vram_in": ["d_a", "d_bc"], "vram_out": ["d_a"],
                      "phases": [{"name": "ntt", "transient": ["ntt_scratch"], "release": ["d_bc"]},
                                 {"name": "h_msm", "staging": ["h_msm_staging"],
                                  "transient": ["h_msm"], "release": []},
                                 ... l_msm, a_msm, b1_msm]},
        "b_g2_msm":  {"host_in": ["host_prep"]},
        "epilogue":  {"host_release": ["host_aux", "host_prep"]}},
     "detail": {phase: {buffer: bytes at the phase's peak}},
     "prestaged": whether kernels is handed d_a and d_bc by a prestage}

Resident device buffers: the NTT tables of the domain size (cached by the kernels after
the first compute_h: the twiddles of the largest domain seen and this size's coset and
constant tables; the first call also holds `ntt_twiddle_build` while building the
twiddles, listed as the ntt phase's `transient_first_call`), and with resident_bases the
key's G1 bases (srs_h, srs_l, srs_a, srs_b1).

The plan says *which* buffers; the rules of *when* they are allocated and freed are the
profile's (simgpu.profile.resolve.StagePlan): the plan becomes a profile's footprint
tables (`prover_profile_dict`), and `stage_peak` walks that profile's StagePlan, the same
walk the model's ledgers follow.  So `vram_out` is what the stage leaves to its caller
(kernels leaves d_a: the design frees the prestage handle), and kernels run without a
prestage (`prestaged=False`) allocate d_a and d_bc themselves, upload them (releasing
host_abc) and free them at the end.

An MSM phase's peak comes in two parts, in the order the prover allocates them: its
staging, `*_msm_staging` (the phase's `staging`), then its temporaries, `*_msm` (its
`transient`).  Per batch of `C` rows the stage holds the streamed bases (C x 96 B,
unless resident), then for the ones an int32 index (4 B each), and for the tails an
index, the gathered bases (96 B) and the scalars (32 B): the staging; then Pippenger's
temporaries.  The phase peak is over the batch with the most ones and the batch with
the most tails.  g1_sum's own scratch (an index copy and partial
sums, about 11 B per point) is not in the kernels' account (`footprint` has no
`g1_sum_device_bytes` yet; it is used as soon as it has): it never sets a phase's peak,
the tails' MSM does.

With `b_g2_on="gpu"` the b_g2_msm stage runs on the device (groth16._b_g2_on_device):
its stage entry is then `{"on": "gpu", "host_in": ["host_prep"], "phases": [{"name":
"b_g2_msm", "staging": ["b_g2_msm_staging"], "transient": ["b_g2_msm"], ...}]}`, the
two buffers being the stage's peak: the streamed batch of G2 points (batch x 192 B),
then for the batch with the most non-zero scalars (k of them, tails and ones together;
with msm_capacity "key", the circuit's `key_capacity` instead, the same for every
witness) an index (4 B each) beside the gathered points (192 B), then those points and
their scalars (32 B): the staging; then the G2 MSM's temporaries.  With "cpu" (the default)
the stage holds no device memory.

The counts come from a `ProverShape`: exact from a `Prepared` partition, or the expected
values for a `CircuitSpec` of any size (`ProverShape.estimate`, no circuit built).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from simgpu.gpu.footprint import (
    g1_sum_transient_bytes,
    msm_transient_bytes,
    ntt_build_bytes,
    ntt_table_bytes,
    ntt_transient_bytes,
)
from simgpu.profile.resolve import Resolved
from simgpu.profile.schema import profile_from_dict
from simgpu.prover.circuits import CircuitSpec, expected_a_density, layout_of, uncovered_field_outputs
from simgpu.prover.device import checked_capacity

if TYPE_CHECKING:
    from simgpu.prover.prepared import Prepared, QuerySplit

FR_BYTES = 32
G1_AFFINE_BYTES = 96
G2_AFFINE_BYTES = 192
INDEX_BYTES = 4  # int32 positions inside a batch
HOST_POSITION_BYTES = 8  # int64 positions kept by prep

MSM_PHASES = ("h", "l", "a", "b1")

#: With "key", the capacity stands this many standard deviations above the expected
#: count.  CHOICE: a B query's non-zero count is its field values plus its bits that
#: are 1, each bit a coin; its standard deviation is below the square root of the
#: expected count (for fair bits, sqrt(bits)/2), so the capacity is exceeded with odds
#: below 1e-9, and then the MSM runs in pieces of the capacity, never in more memory.
CAPACITY_SIGMAS = 6.0


# --- the shape of one partition --------------------------------------------------------


@dataclass
class ProverShape:
    """What the memory plan depends on: domain, witness sizes, the query lengths and how
    many of each query's scalars are ones and tails.  `from_prepared` is exact (it keeps
    the positions, so per-batch maxima are exact); `estimate` is the expectation for a
    spec, from its layout alone (no circuit is built, so any size works)."""

    domain_size: int
    num_inputs: int
    num_aux: int
    lengths: dict[str, int]
    ones: dict[str, int]
    tails: dict[str, int]
    splits: dict[str, QuerySplit] | None = field(default=None, repr=False)
    #: the circuit the shape is of (the key's capacities come from its expectation)
    spec: CircuitSpec | None = field(default=None, repr=False)

    @classmethod
    def from_prepared(cls, prepared: Prepared) -> ProverShape:
        splits = {"l": prepared.split_l, "a": prepared.split_a, "b1": prepared.split_b}
        n = prepared.domain_size
        lengths = {"h": n - 1, **{q: s.length for q, s in splits.items()}}
        return cls(
            domain_size=n,
            num_inputs=len(prepared.public_inputs) + 1,
            num_aux=prepared.split_l.length,
            lengths=lengths,
            ones={q: len(s.ones) for q, s in splits.items()},
            tails={q: len(s.tails) for q, s in splits.items()},
            splits=splits,
            spec=prepared.spec,
        )

    @classmethod
    def estimate(cls, spec: CircuitSpec) -> ProverShape:
        if spec.family == "porep":
            return cls._estimate_porep(spec)
        lay = layout_of(spec)
        n = spec.domain_size
        and_rows = lay.derived_bits // 2
        xor_rows = lay.derived_bits - and_rows
        # Expected ones: a BIT is 1 with probability 1/2, an AND 1/4, an XOR 1/2.
        bit_ones = lay.base_bits / 2 + and_rows / 4 + xor_rows / 2
        a_len = round(expected_a_density(spec) * lay.num_vars)
        b_len = 1 + lay.base_bits + lay.b_field_vars
        field_aux = lay.free_vars + lay.field_rows
        return cls(
            domain_size=n,
            num_inputs=lay.num_inputs,
            num_aux=lay.num_aux,
            lengths={"h": n - 1, "l": lay.num_aux, "a": a_len, "b1": b_len},
            ones={
                "l": round(bit_ones),
                "a": 1 + round(lay.base_bits / 2),
                "b1": 1 + round(lay.base_bits / 2),
            },
            tails={
                "l": field_aux,
                "a": max(0, a_len - lay.num_inputs - lay.base_bits) + lay.public_inputs,
                "b1": lay.b_field_vars,
            },
            spec=spec,
        )

    def batch_nonzero_max(self, query: str, batch: int) -> int:
        """Most non-zero scalars (ones and tails together) in one batch of `batch` rows."""
        if self.splits is not None:
            split = self.splits[query]
            edges = np.arange(0, split.length + batch, batch)
            per = np.diff(np.searchsorted(split.ones, edges)) + np.diff(np.searchsorted(split.tails, edges))
            return int(per.max(initial=0))
        length = max(1, self.lengths[query])
        rows = min(batch, length)
        nonzero = self.ones[query] + self.tails[query]
        return min(nonzero, -(-rows * nonzero // length))

    @classmethod
    def _estimate_porep(cls, spec: CircuitSpec) -> ProverShape:
        """The porep family's expectation.  Its derived bits form one chain (each reads the
        previous as its A operand, a fair BIT as its B operand): an XOR is 1 with
        probability 1/2, an AND with half its predecessor's, so over a chain whose rows are
        ANDs with probability alpha the mean share of ones is m = (1 - alpha) / (2 - alpha).
        Every derived bit but the last is in A; field values are tails."""
        lay = layout_of(spec)
        n = spec.domain_size
        derived = lay.derived_bits
        alpha = (derived // 2) / derived if derived else 0.0
        m = (1 - alpha) / (2 - alpha)
        derived_in_a = max(0, derived - 1)
        field_in_a = lay.free_vars + lay.field_rows - uncovered_field_outputs(lay)
        a_len = lay.num_inputs + lay.base_bits + derived_in_a + round(field_in_a)
        return cls(
            domain_size=n,
            num_inputs=lay.num_inputs,
            num_aux=lay.num_aux,
            lengths={"h": n - 1, "l": lay.num_aux, "a": a_len, "b1": 1 + lay.base_bits + lay.b_field_vars},
            ones={
                "l": round(lay.base_bits / 2 + derived * m),
                "a": 1 + round(lay.base_bits / 2 + derived_in_a * m),
                "b1": 1 + round(lay.base_bits / 2),
            },
            tails={
                "l": lay.free_vars + lay.field_rows,
                "a": round(field_in_a) + lay.public_inputs,
                "b1": lay.b_field_vars,
            },
            spec=spec,
        )

    def batch_maxima(self, query: str, batch: int) -> tuple[int, int]:
        """Most ones and most tails in one batch of `batch` rows of `query`."""
        if self.splits is not None:
            return self.splits[query].batch_maxima(batch)
        length = max(1, self.lengths[query])
        rows = min(batch, length)
        return (
            min(self.ones[query], -(-rows * self.ones[query] // length)),
            min(self.tails[query], -(-rows * self.tails[query] // length)),
        )


# --- the plan ----------------------------------------------------------------------------


def _msm_phase(
    shape: ProverShape, query: str, stream_batch: int, resident: bool
) -> tuple[int, dict[str, int]]:
    """Peak transient bytes of one MSM phase and the buffers live at that peak."""
    length = shape.lengths[query]
    batch = max(1, min(stream_batch, length))
    tag = f"{query}_msm"
    staging = {} if resident else {f"{tag}_bases_batch": batch * G1_AFFINE_BYTES}
    if query == "h":
        # Dense: scalars are h's coefficients, read in place from d_a.
        at_peak = {**staging, f"{tag}_temporaries": msm_transient_bytes(batch)}
        return sum(at_peak.values()), at_peak
    ones, tails = shape.batch_maxima(query, batch)
    candidates = [
        {f"{tag}_index": ones * INDEX_BYTES, f"{tag}_temporaries": g1_sum_transient_bytes(ones)},
        # gather: index and gathered bases both live
        {f"{tag}_index": tails * INDEX_BYTES, f"{tag}_tail_bases": tails * G1_AFFINE_BYTES},
        # Pippenger: gathered bases, scalars and the MSM's temporaries
        {
            f"{tag}_tail_bases": tails * G1_AFFINE_BYTES,
            f"{tag}_scalars": tails * FR_BYTES,
            f"{tag}_temporaries": msm_transient_bytes(tails),
        },
    ]
    best = max(candidates, key=lambda c: sum(c.values()))
    at_peak = {**staging, **best}
    return sum(at_peak.values()), at_peak


def key_capacity(spec: CircuitSpec, batch: int) -> int:
    """Points the B query's G2 MSM is sized for per batch of `batch` rows with
    msm_capacity "key" (simgpu.prover.device.MSM_CAPACITIES): the circuit's expected
    count of non-zero scalars in a batch (`ProverShape.estimate`) and CAPACITY_SIGMAS
    standard deviations of room, at most the batch's rows.  A function of the circuit
    alone, so every partition's MSM takes the same arrays."""
    est = ProverShape.estimate(spec)
    rows = max(1, min(batch, est.lengths["b1"]))
    expected = est.batch_nonzero_max("b1", rows)
    return max(1, min(rows, expected + math.ceil(CAPACITY_SIGMAS * math.sqrt(expected))))


def g2_msm_points(shape: ProverShape, batch: int, capacity: str = "witness") -> int:
    """Points the B query's G2 MSM allocates for in its largest batch: the batch's own
    non-zero count ("witness") or the circuit's `key_capacity` ("key")."""
    if checked_capacity(capacity) == "witness":
        return shape.batch_nonzero_max("b1", batch)
    if shape.spec is None:
        raise ValueError("msm_capacity 'key' needs the shape's circuit (ProverShape.spec)")
    return key_capacity(shape.spec, batch)


def _b_g2_phase(
    shape: ProverShape, stream_batch: int, capacity: str = "witness"
) -> tuple[int, dict[str, int]]:
    """Peak device bytes of b_g2_msm on the device and the buffers live at that peak."""
    length = shape.lengths["b1"]  # the B query: G1 (b1) and G2 share its rows
    batch = max(1, min(stream_batch, length))
    k = g2_msm_points(shape, batch, capacity)
    tag = "b_g2_msm"
    staging = {f"{tag}_bases_batch": batch * G2_AFFINE_BYTES}
    candidates = [
        {f"{tag}_index": k * INDEX_BYTES, f"{tag}_tail_bases": k * G2_AFFINE_BYTES},
        {
            f"{tag}_tail_bases": k * G2_AFFINE_BYTES,
            f"{tag}_scalars": k * FR_BYTES,
            f"{tag}_temporaries": msm_transient_bytes(k, "g2"),
        },
    ]
    at_peak = {**staging, **max(candidates, key=lambda c: sum(c.values()))}
    return sum(at_peak.values()), at_peak


def _split_staging(at_peak: dict[str, int]) -> tuple[int, int]:
    """(temporaries, staging) bytes of an MSM phase's peak: what Pippenger allocates once
    its inputs are on the device, and those inputs (the bases batch, gathered tails,
    scalars, indices), which come first."""
    temporaries = sum(v for k, v in at_peak.items() if k.endswith("_temporaries"))
    return temporaries, sum(at_peak.values()) - temporaries


def _staged_phase(name: str, staging: int, buffers: dict[str, int]) -> dict[str, Any]:
    """An MSM phase: its staging (when it has any) uploaded first, then its temporaries.
    A staging buffer is added to `buffers` under the phase's name + "_staging"."""
    phase: dict[str, Any] = {"name": name, "transient": [name], "release": []}
    if staging:
        buffers[f"{name}_staging"] = staging
        phase["staging"] = [f"{name}_staging"]
    return phase


def prover_plan(
    shape: ProverShape,
    *,
    stream_batch: int,
    resident_bases: bool = False,
    prestaged: bool = True,
    b_g2_on: str = "cpu",
    msm_capacity: str = "witness",
) -> dict:
    """The memory plan of one partition (see the module docstring for its shape).
    b_g2_on: "cpu" (G2 pool or threads, no device memory) or "gpu" (the device);
    msm_capacity: how the device's G2 MSM sizes its arrays (MSM_CAPACITIES)."""
    if b_g2_on not in ("cpu", "gpu"):
        raise ValueError(f"b_g2_on must be 'cpu' or 'gpu', got {b_g2_on!r}")
    checked_capacity(msm_capacity)
    n = shape.domain_size
    buffers: dict[str, int] = {
        "d_a": n * FR_BYTES,
        "d_bc": 2 * n * FR_BYTES,
        "host_abc": 3 * n * FR_BYTES,
        "host_aux": shape.num_aux * FR_BYTES,
        "host_prep": sum(
            shape.ones[q] * HOST_POSITION_BYTES + shape.tails[q] * (HOST_POSITION_BYTES + FR_BYTES)
            for q in ("l", "a", "b1")
        ),
        "ntt_scratch": ntt_transient_bytes(n),
        "ntt_tables": ntt_table_bytes(n),
        "ntt_twiddle_build": ntt_build_bytes(n),
    }
    detail: dict[str, dict[str, int]] = {"ntt": {"ntt_scratch": buffers["ntt_scratch"]}}
    staging: dict[str, int] = {}
    for q in MSM_PHASES:
        _, at_peak = _msm_phase(shape, q, stream_batch, resident_bases)
        buffers[f"{q}_msm"], staging[f"{q}_msm"] = _split_staging(at_peak)
        detail[f"{q}_msm"] = at_peak
    # The NTT tables of this domain size stay cached on the device after the first
    # compute_h (the plan is the steady state; a first call also builds them, transiently
    # holding ntt_twiddle_build).
    resident_vram: list[str] = ["ntt_tables"]
    resident_host: list[str] = []
    srs_bytes = sum(shape.lengths[q] * G1_AFFINE_BYTES for q in MSM_PHASES)
    if resident_bases:
        for q in MSM_PHASES:
            buffers[f"srs_{q}"] = shape.lengths[q] * G1_AFFINE_BYTES
            resident_vram.append(f"srs_{q}")
    else:
        # The key's G1 bases in (pinned) host memory, which the batches stream from.
        buffers["host_srs"] = srs_bytes
        resident_host.append("host_srs")
    buffers["host_srs_g2"] = shape.lengths["b1"] * G2_AFFINE_BYTES
    resident_host.append("host_srs_g2")

    msm_phases = [_staged_phase(f"{q}_msm", staging[f"{q}_msm"], buffers) for q in MSM_PHASES]
    ntt_phase = {
        "name": "ntt",
        "transient": ["ntt_scratch"],
        "transient_first_call": ["ntt_scratch", "ntt_twiddle_build"],
        "release": ["d_bc"],
    }
    b_g2: dict[str, Any] = {"host_in": ["host_prep"]}
    if b_g2_on == "gpu":
        _, detail["b_g2_msm"] = _b_g2_phase(shape, stream_batch, msm_capacity)
        buffers["b_g2_msm"], staged = _split_staging(detail["b_g2_msm"])
        b_g2 = {"on": "gpu", "host_in": ["host_prep"], "phases": [_staged_phase("b_g2_msm", staged, buffers)]}
    stages = {
        "synthesis": {"host_out": ["host_abc", "host_aux"]},
        "prep": {"host_out": ["host_prep"]},
        "prestage": {"vram_out": ["d_a", "d_bc"], "host_release": ["host_abc"]},
        # kernels leaves d_a in the handle it was given (the design frees it with the
        # prestage's handle); run without one, it allocates and uploads a, b, c itself.
        "kernels": {"vram_in": ["d_a", "d_bc"], "vram_out": ["d_a"], "phases": [ntt_phase, *msm_phases]},
        "b_g2_msm": b_g2,
        "epilogue": {"host_release": ["host_aux", "host_prep"]},
    }
    return {
        "buffers": buffers,
        "resident": {"vram": resident_vram, "host": resident_host},
        "stages": stages,
        "detail": detail,
        "prestaged": prestaged,
    }


def plan_resolved(plan: dict) -> Resolved:
    """The plan as a profile resolved at its size: the footprint rules of
    simgpu.profile.resolve (one StagePlan per stage) applied to the prover's buffers."""
    doc = prover_profile_dict(
        plan,
        name="memory plan",
        hardware=_PLAN_HARDWARE,
        workload={"name": "plan", "partitions": 1, "constraints": 16},
    )
    return profile_from_dict(doc).resolve(16)


#: Hardware for a profile that only answers memory questions (sizes are the plan's).
_PLAN_HARDWARE = {
    "gpu": "plan",
    "vram": 1 << 60,
    "cpu_cores": 1,
    "host_ram": 1 << 60,
    "membw_gbps": 1.0,
    "h2d_gbps": 1.0,
}


def stage_peak(plan: dict, stage: str) -> int:
    """Peak device bytes during `stage`, resident buffers included: the stage's StagePlan
    walked from what it is handed (kernels: the prestaged d_a and d_bc, unless the plan
    is for the path without a prestage)."""
    resolved = plan_resolved(plan)
    st = resolved.stages[stage]
    handed = {b: n for b, n in st.vram_in} if plan.get("prestaged", True) else {}
    resident = sum(plan["buffers"][x] for x in plan["resident"]["vram"])
    return resident + resolved.plan(stage, handed).peak(handed)


def plan_for_backend(
    shape: ProverShape, backend: object, *, prestaged: bool = True, b_g2_on: str = "cpu"
) -> dict:
    """prover_plan with a backend's stream_batch, resident_bases and msm_capacity."""
    return prover_plan(
        shape,
        stream_batch=int(backend.stream_batch),  # type: ignore[attr-defined]
        resident_bases=bool(backend.resident_bases),  # type: ignore[attr-defined]
        prestaged=prestaged,
        b_g2_on=b_g2_on,
        msm_capacity=str(getattr(backend, "msm_capacity", "witness")),
    )


# --- the plan as a profile's footprint tables ------------------------------------------

#: Stages whose footprints come from the plan, and the plan keys each keeps.
_KEEP = ("host_out", "vram_out", "vram_in", "host_release")


def footprint_tables(plan: dict[str, Any]) -> tuple[dict[str, int], dict[str, dict[str, Any]], int, int]:
    """(buffers, stage footprints, resident VRAM bytes, resident host bytes) of a
    prestaged plan.  Resident buffers (NTT tables, a resident key) become the profile's
    resident bytes rather than buffers, as the model treats them."""
    resident_vram = plan["resident"]["vram"]
    resident_host = plan["resident"]["host"]
    buffers = {
        name: int(size)
        for name, size in plan["buffers"].items()
        if name not in resident_vram and name not in resident_host
    }
    stages: dict[str, dict[str, Any]] = {}
    for name, st in plan["stages"].items():
        out: dict[str, Any] = {"on": st["on"]} if "on" in st else {}
        for key in _KEEP:
            if st.get(key) and not (name == "kernels" and key == "vram_out"):
                # kernels' "vram_out" in the plan is what it leaves in the caller's handle
                # (d_a); in a profile that is implied by not releasing it.
                out[key] = list(st[key])
        if "phases" in st:
            out["phases"] = [
                {
                    "name": ph["name"],
                    "transient": list(ph.get("transient", [])),
                    "release": list(ph.get("release", [])),
                    **({"staging": list(ph["staging"])} if ph.get("staging") else {}),
                }
                for ph in st["phases"]
            ]
        stages[name] = out
    vram = sum(int(plan["buffers"][x]) for x in resident_vram)
    host = sum(int(plan["buffers"][x]) for x in resident_host)
    return buffers, stages, vram, host


def prover_profile_dict(
    plan: dict[str, Any],
    *,
    name: str,
    hardware: dict[str, Any],
    workload: dict[str, Any],
    times: dict[str, Any] | None = None,
    uses: dict[str, dict[str, Any]] | None = None,
    noise_cv: dict[str, float] | None = None,
) -> dict[str, Any]:
    """A profile (TOML-shaped dict) for the prover at one size.

    times: per stage a law (number, expression or table) or, for a stage with phases,
    {phase: law}; missing stages take 0 s (enough for memory-only questions).
    hardware: the [hardware] table; its vram_resident / host_resident are increased by
    the plan's resident buffers."""
    times = times or {}
    buffers, stages, res_vram, res_host = footprint_tables(plan)
    hw = dict(hardware)
    base = hw.get("vram_resident", 0)
    hw["vram_resident"] = base + res_vram if isinstance(base, int) else base
    hw["host_resident"] = int(hw.get("host_resident", 0)) + res_host
    out_stages: dict[str, Any] = {}
    for st_name, fp in stages.items():
        on = plan["stages"][st_name].get("on")
        st: dict[str, Any] = {"on": on or ("gpu" if st_name in ("prestage", "kernels") else "cpu")}
        st.update({k: v for k, v in fp.items() if k != "phases"})
        law = times.get(st_name, 0.0)
        if "phases" in fp:
            per = law if isinstance(law, dict) and "law" not in law else {}
            st["phases"] = [dict(ph, time=per.get(ph["name"], 0.0)) for ph in fp["phases"]]
        else:
            st["time"] = law
        if uses and st_name in uses:
            st["uses"] = uses[st_name]
        if noise_cv and st_name in noise_cv:
            st["noise_cv"] = noise_cv[st_name]
        out_stages[st_name] = st
    estimate = sum(buffers.get(b, 0) for b in ("host_abc", "host_aux", "host_prep"))
    return {
        "profile": {"name": name, "default_workload": workload["name"]},
        "hardware": hw,
        "workloads": {
            workload["name"]: {"partitions": workload["partitions"], "constraints": workload["constraints"]}
        },
        "memory": {"partition_estimate": estimate},
        "buffers": buffers,
        "stages": out_stages,
    }
