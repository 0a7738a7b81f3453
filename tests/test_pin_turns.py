"""The driver page-locks one region at a time (model.interpreter.pin_pause): results that
land together wait for each other's locks, and every device stands still for the whole
row.  Worked on the tiny profile, where the times are round."""

from __future__ import annotations

import copy
import tomllib

import pytest
from conftest import DATA, simulate
from hypothesis import given, settings
from hypothesis import strategies as st

from simgpu.profile import profile_from_dict
from simgpu.report.trace import stage_rows

GPU = {"gpu": {"demand": 1.0, "bound": 1.0}}


def _doc(pins: dict | None) -> dict:
    """tiny.toml with a pinned prover: its a, b, c (host_abc, 1 GiB) page-locked as they
    land, and its GPU stages on the device's `gpu`, so that a pause holds them."""
    doc = copy.deepcopy(tomllib.loads((DATA / "tiny.toml").read_text()))
    doc["calibration"] = {"abc_upload": "pinned"}
    # prestage is the upload stage (it leans on the link, by nothing: bound 0)
    doc["stages"]["prestage"]["uses"] = GPU | {"h2d": {"demand": 1.0, "bound": 0.0}}
    doc["stages"]["kernels"]["uses"] = GPU
    if pins is not None:
        doc["pins"] = pins
    return doc


def _rows(pins: dict | None, proofs: int = 1):
    result, summary = simulate(
        profile_from_dict(_doc(pins), "turns"), "single-lock", proofs=proofs, partition_workers=2
    )
    return sorted((r for r in stage_rows(result.records)), key=lambda r: (r[2], r[4])), summary


def _spans(rows, stage: str) -> list[tuple[float, float]]:
    return [(round(r[4], 6), round(r[5], 6)) for r in rows if r[2] == stage]


#: half a second a GiB to lock, the device held throughout; unlocking costs nothing
HELD = {"lock_s_per_gib": 0.5, "unlock_s_per_gib": 0.0, "lock_stall": 1.0, "unlock_stall": 0.0}


def test_two_results_landing_together_lock_one_after_the_other():
    """Both syntheses compute until 1.0.  The first result's lock has the driver at once
    (its 0.5 s is in the stage's time, as calibrate timed it; the pause runs after it):
    the device stands still 1.0-1.5.  The second waits its turn: its synthesis ends at
    1.5, and the device stands still again 1.5-2.0.  The first prestage (after a 0.5 s
    prep, at 1.5) cannot run until 2.0 and ends at 2.25; without [pins] at 1.75."""
    plain, _ = _rows(None)
    held, _ = _rows(HELD)
    assert _spans(plain, "synthesis") == [(0.0, 1.0), (0.0, 1.0)]
    assert _spans(plain, "prestage")[0] == (1.5, 1.75)
    assert _spans(held, "synthesis") == [(0.0, 1.0), (0.0, 1.5)]
    assert _spans(held, "prestage")[0] == pytest.approx((1.5, 2.25), abs=1e-6)
    # the second partition's prep starts when its lock's call has returned
    assert _spans(held, "prep")[1][0] == pytest.approx(1.5, abs=1e-6)


def test_a_lock_that_holds_nothing_still_waits_its_turn():
    """lock_stall 0: the devices never stand still, so the first prestage runs at 1.5 as
    without [pins]; the second synthesis still ends at 1.5."""
    held, _ = _rows({**HELD, "lock_stall": 0.0})
    assert _spans(held, "synthesis") == [(0.0, 1.0), (0.0, 1.5)]
    assert _spans(held, "prestage")[0] == pytest.approx((1.5, 1.75), abs=1e-6)


def test_an_unlock_takes_its_turn_without_holding_up_its_stage():
    """The unlock (on the prover's releaser thread) waits for the locks before it, but the
    stage that gives the buffer back does not: prestage ends when it would without it."""
    locks_only, _ = _rows(HELD)
    prof = profile_from_dict(_doc({**HELD, "unlock_s_per_gib": 0.25, "unlock_stall": 1.0}), "turns")
    result, _ = simulate(prof, "single-lock", proofs=1, partition_workers=2)
    both = sorted(stage_rows(result.records), key=lambda r: (r[2], r[4]))
    assert _spans(both, "prestage")[0] == _spans(locks_only, "prestage")[0] == pytest.approx((1.5, 2.25))
    # the first unlock is asked for at 2.25 (the locks ended at 2.0): it holds the first
    # kernels (1 s) 2.25-2.5, so they end at 3.5; the second prestage runs 3.5-3.75
    # under the single lock and its unlock holds the device 3.75-4.0
    pauses = [x for p in result.saturation["pins"] for x in p]
    assert pauses == pytest.approx([1.0, 1.5, 1.5, 2.0, 2.25, 2.5, 3.75, 4.0], abs=1e-5)


def test_a_lock_beside_busy_cores_lasts_longer_by_its_pressure():
    """One synthesis slot, where the daemon also runs prep: the first result lands at 1.0
    and its prep keeps one core of 8 busy from 1.0 to 1.5.  With lock_pressure 1 the
    0.5 s lock runs at 1 / (1 + 1/8) of its speed beside it: by 1.5 it has done 0.4444 s,
    the last 0.0556 s at full speed, so the device stands still until 1.5556, and the
    first prestage (ready at 1.5) ends 0.25 s later, at 1.8056; without, at 1.75."""

    def run(pressure: float) -> tuple[list, object]:
        doc = _doc({**HELD, "lock_pressure": pressure})
        # prep keeps a core busy (it draws on `pressure`) without being slowed by it
        doc["stages"]["prep"]["uses"] = {"pressure": {"demand": 1.0, "bound": 0.0}}
        result, _ = simulate(profile_from_dict(doc, "turns"), "single-lock", proofs=1, partition_workers=1)
        return sorted(stage_rows(result.records), key=lambda r: (r[2], r[4])), result

    plain, _ = run(0.0)
    slowed, result = run(1.0)
    assert _spans(plain, "prep")[0] == _spans(slowed, "prep")[0] == (1.0, 1.5)
    assert _spans(plain, "prestage")[0] == pytest.approx((1.5, 1.75), abs=1e-6)
    rest = 0.5 - 0.5 / 1.125
    assert _spans(slowed, "prestage")[0] == pytest.approx((1.5, 1.75 + rest), abs=1e-5)
    assert result.saturation["pins"][0] == pytest.approx([1.0, 1.5 + rest], abs=1e-6)


@settings(max_examples=25, deadline=None)
@given(
    lock=st.floats(0.01, 1.0),
    unlock=st.floats(0.0, 0.5),
    workers=st.integers(1, 4),
    partitions=st.integers(1, 6),
    gpu_workers=st.integers(1, 3),
)
def test_the_driver_never_pauses_for_two_page_locks_at_once(lock, unlock, workers, partitions, gpu_workers):
    """Whatever lands together, the pauses of the locks and unlocks (each holding every
    device whole, stall 1) follow one another: no two overlap, and each lasts its time."""
    pins = {"lock_s_per_gib": lock, "unlock_s_per_gib": unlock, "lock_stall": 1.0, "unlock_stall": 1.0}
    result, summary = simulate(
        profile_from_dict(_doc(pins), "turns"),
        "single-lock",
        proofs=2,
        partition_workers=workers,
        partitions=partitions,
        gpu_workers_per_device=gpu_workers,
    )
    pauses = sorted(result.saturation.get("pins", []))
    assert len(pauses) == 2 * partitions * (2 if unlock > 0 else 1)
    for (_, end), (start, _) in zip(pauses, pauses[1:], strict=False):
        assert start >= end - 1e-9
    # host_abc is 1 GiB: each pause is a lock's or an unlock's seconds a GiB, whole
    for start, end in pauses:
        assert min(abs(end - start - lock), abs(end - start - unlock)) < 1e-6
    assert summary.completed == 2
