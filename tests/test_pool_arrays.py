"""The prover's arrays inside a profile's buffers, read from a pool trace
(simgpu.calibrate.arrays): worked by hand on a trace as CupyDevice records it."""

from __future__ import annotations

import json

from conftest import ROOT, tiny_profile

from simgpu.calibrate.arrays import FRACTION_DIGITS, arrays_table, buffer_arrays, phase_arrays
from simgpu.profile import load_profile
from simgpu.profile.schema import phase_key

MiB = 1 << 20


def _row(label: str, op: str, mib: float, ptr: int) -> tuple:
    return (0.0, "MainThread", label, op, int(mib * MiB), ptr, 0, 0)


#: One partition's h MSM and b_g2_msm: the bases batch, then temporaries, one freed early
#: (the 2 MiB at 0xC), one let go by the next stage (the 8 MiB at 0xF, under "free").
TRACE = [
    _row("prestage", "malloc", 128, 0x1),
    _row("kernels.h_msm", "malloc", 384, 0xA),
    _row("kernels.h_msm", "malloc", 256, 0xB),
    _row("kernels.h_msm", "malloc", 2, 0xC),
    _row("kernels.h_msm", "free", 2, 0xC),
    _row("kernels.h_msm", "malloc", 192, 0xD),
    _row("kernels.h_msm", "free", 192, 0xD),
    _row("kernels.h_msm", "free", 256, 0xB),
    _row("kernels.h_msm", "free", 384, 0xA),
    _row("b_g2_msm", "malloc", 192, 0xA),  # the same address again, a new array
    _row("b_g2_msm", "malloc", 97, 0xE),
    _row("b_g2_msm", "malloc", 300, 0xB),
    _row("b_g2_msm", "malloc", 8, 0xF),
    _row("b_g2_msm", "free", 300, 0xB),
    _row("free", "free", 8, 0xF),
    _row("free", "free", 128, 0x1),
]

STAGES = {
    "kernels": {
        "phases": [
            {"name": "ntt", "transient": ["ntt_scratch"]},
            {"name": "h_msm", "transient": ["h_msm"], "staging": ["h_msm_staging"]},
        ]
    },
    "b_g2_msm": {
        "phases": [{"name": "b_g2_msm", "transient": ["b_g2_msm"], "staging": ["b_g2_msm_staging"]}]
    },
}


def test_the_arrays_at_each_phase_peak_in_allocation_order():
    arrays = phase_arrays(TRACE)
    assert arrays["kernels.h_msm"] == [384 * MiB, 256 * MiB, 192 * MiB]  # the 2 MiB was gone by then
    assert arrays["b_g2_msm"] == [192 * MiB, 97 * MiB, 300 * MiB, 8 * MiB]
    assert arrays["prestage"] == [128 * MiB]


def test_a_phase_arrays_split_into_its_staging_and_its_temporaries():
    """The staging is the first arrays up to its bytes (the bases batch alone for h; the
    bases and the tails for b_g2), the rest the temporaries; one array needs no table."""
    sizes = {"h_msm_staging": 384 * MiB, "b_g2_msm_staging": 289 * MiB}
    got = buffer_arrays(STAGES, sizes, phase_arrays(TRACE))
    d = FRACTION_DIGITS
    assert got == {
        "h_msm": [round(256 / 448, d), round(192 / 448, d)],
        "b_g2_msm_staging": [round(192 / 289, d), round(97 / 289, d)],
        "b_g2_msm": [round(300 / 308, d), round(8 / 308, d)],
    }


def test_a_staging_larger_than_its_batch_keeps_the_batch_exact():
    """The L query's staging in the plan is the bases batch (384 MiB) and its gathered
    tails (5.7 MiB), which the prover allocates later as arrays of their own: the trace
    shows the batch alone at the staging's place.  The staging is then the batch and one
    array for the rest, and cut from the plan's bytes the batch comes back to the byte,
    so that the block the H query's batch left (384 MiB) takes it, as on the card."""
    from simgpu.devicepool import CachingPool, cut

    phase = {"name": "l_msm", "transient": ["l_msm"], "staging": ["l_msm_staging"]}
    stages = {"kernels": {"phases": [phase]}}
    staging = 384 * MiB + 5_976_883  # not a multiple of anything
    trace = [
        _row("kernels.l_msm", "malloc", 384, 0xA),
        _row("kernels.l_msm", "malloc", 30, 0xB),
        _row("kernels.l_msm", "malloc", 12, 0xC),
    ]
    got = buffer_arrays(stages, {"l_msm_staging": staging}, phase_arrays(trace))
    assert len(got["l_msm_staging"]) == 2
    batch, rest = cut(staging, tuple(got["l_msm_staging"]))
    assert (batch, rest) == (384 * MiB, 5_976_883)
    pool = CachingPool(1 << 40)
    pool.free(pool.malloc(384 * MiB))  # the H query's batch, given back
    pool.malloc(batch)
    assert pool.reserved == 384 * MiB  # reused, not a second block


def test_calibrate_writes_the_arrays_of_every_traced_size_as_points():
    """Two traced sizes: the same phases, another grain (the buckets do not grow); the
    table loads as the profile's [buffer_arrays]."""
    sizes = {"h_msm_staging": 384 * MiB, "b_g2_msm_staging": 289 * MiB}
    small = [r if r[3] != "malloc" or r[4] != 256 * MiB else (*r[:4], 64 * MiB, *r[5:]) for r in TRACE]
    got = arrays_table(STAGES, [(1 << 22, sizes, phase_arrays(TRACE)), (1 << 20, sizes, phase_arrays(small))])
    assert [n for n, _ in got["h_msm"]["points"]] == [1 << 20, 1 << 22]
    assert got["h_msm"]["points"][0][1] == [round(64 / 256, 6), round(192 / 256, 6)]
    prof = tiny_profile(buffers={"h_msm": "1GiB"}, buffer_arrays={"h_msm": got["h_msm"]})
    assert prof.buffer_arrays["h_msm"][1][0] == 1 << 22


def test_the_shipped_arrays_add_up_to_the_shipped_footprints():
    """Two measurements of one thing on two machines: h200-cupy's footprints (the pool's
    peak per phase, the twenty-fifth lease) and the arrays of a trace of the ninth lease
    (docs/data/h200-2026-12-01h/pool-arrays.json).  At the sizes the profile measured, each
    staged phase's arrays sum to its staging and temporaries within 0.5% (the G2 MSM
    sized by the key: up to 1% over the witness-sized trace)."""
    prof = load_profile(ROOT / "simgpu" / "profile" / "profiles" / "h200-cupy.toml")
    record = json.loads((ROOT / "docs" / "data" / "h200-2026-12-01h" / "pool-arrays.json").read_text())
    checked = 0
    for n in (1 << 20, 1 << 22):  # calibrated sizes (2^21 is interpolated by the profile)
        arrays = record[str(n)]["arrays"]
        for st in prof.resolve(n).stages.values():
            for ph in st.phases:
                got = arrays.get(phase_key(st.name, ph.name))
                if not got or not ph.staging:
                    continue
                want = sum(size for _, size in ph.staging + ph.transient)
                if ph.name == "b_g2_msm" and prof.calibrated_msm_capacity == "key":
                    # the trace's prover sized the G2 MSM by its witness; the profile's, by
                    # the key's expected count plus six deviations, holds it and a margin
                    assert 0 <= 1 - sum(got) / want < 0.01, (n, st.name, ph.name)
                else:
                    assert abs(sum(got) / want - 1) < 0.005, (n, st.name, ph.name)
                checked += 1
    assert checked == 10  # the four G1 MSMs and b_g2_msm, at both sizes
