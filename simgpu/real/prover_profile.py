"""The real prover seen as a Profile: its memory plan in the model's terms.

`simgpu.real.prover_footprint` says which named buffers each stage of the prover holds,
allocates and frees; this module writes that as the `[buffers]` table and the stage
footprint keys of a profile (simgpu.profile), so that the model books exactly what the
prover allocates.  RealRuntime uses it for `vram_estimate`; calibration writes it into
the profiles it measures.
"""

from __future__ import annotations

from typing import Any

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
        out: dict[str, Any] = {}
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
        st: dict[str, Any] = {"on": "gpu" if st_name in ("prestage", "kernels") else "cpu"}
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
