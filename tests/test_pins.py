"""[pins]: what page-locking a, b, c where they land costs the device, in the profile, in
calibrate's fit, and in the model (a pause of every device as each partition's results
land and once its upload has left)."""

from __future__ import annotations

import copy
import threading
import tomllib

import pytest
from conftest import ROOT

from simgpu.calibrate.pins import burst_summary, fit_pins
from simgpu.config import PipelineConfig
from simgpu.errors import UserError
from simgpu.model.sim import SimRuntime
from simgpu.profile import profile_from_dict
from simgpu.prover import handoff
from simgpu.report.metrics import summarize
from simgpu.sched.registry import resolve_design

SHIPPED = ROOT / "simgpu" / "profile" / "profiles" / "h200-cupy.toml"
#: The thirty-seventh lease's probe on an H100 (docs/data/h100-2026-12-06k): 384 MiB
#: locked in 11.3 ms, unlocked in 6.4; two launching threads stalled by none of the lock
#: and all of the unlock.
MEASURED = {"lock_s_per_gib": 0.0301, "unlock_s_per_gib": 0.017, "lock_stall": 0.0, "unlock_stall": 1.0}
#: Page-locking that costs nothing: the baseline the pauses are read against.  It keeps
#: what [pins] also says of the prover, that the prestage queues its copies at once
#: from where a, b, c lie (so they cross the link whole: model.interpreter.on_link).
FREE = {"lock_s_per_gib": 0.0, "unlock_s_per_gib": 0.0, "lock_stall": 0.0, "unlock_stall": 0.0}


def _doc(upload: str | None = "pinned", pins: dict | None = MEASURED) -> dict:
    doc = copy.deepcopy(tomllib.loads(SHIPPED.read_text()))
    if upload is None:
        doc["calibration"].pop("abc_upload", None)
    else:
        doc["calibration"]["abc_upload"] = upload
    if pins is not None:
        doc["pins"] = dict(pins)
    else:
        doc.pop("pins", None)
    return doc


def _run(doc: dict, design: str = "single-lock", **config: object) -> tuple[object, object]:
    prof = profile_from_dict(doc, "pins-test")
    cfg = PipelineConfig().with_overrides(proofs=8, gpu_workers_per_device=2, **config)
    wl = prof.workload()
    result = SimRuntime(prof, cfg, wl, seed=3).run(resolve_design(design).fn)
    return prof, summarize(result)


def test_a_pinned_profile_pauses_for_the_bytes_its_upload_stage_gives_back():
    prof = profile_from_dict(_doc(), "pins-test")
    n = prof.workload().constraints
    r = prof.resolve(n)
    gib = dict(b for st in r.stages.values() for b in st.host_out)["host_abc"] / 2**30
    assert r.pins is not None and r.pins.buffers == {"host_abc"}
    assert r.pins.lock == pytest.approx((0.0301 * gib, 0.0))
    assert r.pins.unlock == pytest.approx((0.017 * gib, 1.0))


@pytest.mark.parametrize("upload", ["staged", None])
def test_a_prover_that_stages_its_uploads_has_no_pauses(upload):
    # a profile calibrated before the pins reads as staged: its [pins], if any, is moot
    prof = profile_from_dict(_doc(upload), "pins-test")
    assert prof.resolve(prof.workload().constraints).pins is None


@pytest.mark.parametrize(
    "bad",
    [
        {"lock_s_per_gib": 0.03},  # keys missing
        {**MEASURED, "unlock_stall": 1.5},  # a share above 1
        {**MEASURED, "lock_s_per_gib": -1},
        {**MEASURED, "lock_stall": "most"},
        {**MEASURED, "colour": 1},
    ],
)
def test_a_bad_pins_table_is_refused_in_one_line(bad):
    with pytest.raises(UserError, match=r"\[pins\]"):
        profile_from_dict(_doc(pins=bad), "pins-test")


def test_the_unlock_stalls_the_device_and_costs_throughput_where_the_gpu_is_the_bottleneck():
    _, without = _run(_doc(pins=FREE))
    _, paused = _run(_doc())
    # every partition's unlock stalls whatever runs on the device for all of its time
    assert paused.throughput > without.throughput
    # ... by about its pauses (a stall may also shift a lock hand-over: not exactly)
    prof = profile_from_dict(_doc(), "pins-test")
    r = prof.resolve(prof.workload().constraints)
    per_proof = prof.workload().partitions * (r.pins.unlock[0] + r.pins.lock[0] * r.pins.lock[1])
    assert paused.throughput - without.throughput <= per_proof * 1.5


def test_a_pause_that_stalls_nothing_holds_no_device_but_the_locks_still_take_turns():
    _, without = _run(_doc(pins=FREE))
    _, idle = _run(_doc(pins={**MEASURED, "unlock_stall": 0.0}))
    assert "pin_stalls" not in idle.bottleneck or idle.bottleneck["pin_stalls"] == 0.0
    # results landing together still wait for each other's locks at the driver
    # (model.interpreter.pin_pause): not faster than without (but for a hair: a lock's
    # turn can shift which worker's copies cross first), and slower by at most every
    # lock's time in a row
    prof = profile_from_dict(_doc(), "pins-test")
    r = prof.resolve(prof.workload().constraints)
    assert idle.throughput >= without.throughput * (1 - 1e-3)
    assert idle.throughput - without.throughput <= prof.workload().partitions * r.pins.lock[0]


def test_fit_pins_reads_seconds_a_gib_and_the_stall_as_a_share():
    gib = 2**30
    rows = [[gib // 4, 0.0075, 0.0045, 0.0, 0.0045], [gib, 0.030, 0.017, 0.003, 0.017]]
    got = fit_pins(rows)
    assert got["lock_s_per_gib"] == pytest.approx(0.0375 / 1.25)
    assert got["unlock_s_per_gib"] == pytest.approx(0.0215 / 1.25)
    assert got["lock_stall"] == pytest.approx(0.003 / 0.0375, abs=1e-3)
    assert got["unlock_stall"] == 1.0
    with pytest.raises(ValueError):
        fit_pins([])


def test_burst_summary_tells_locks_done_one_at_a_time_from_side_by_side():
    mib384 = 384 * 2**20
    # four locks of 12 ms alone: a row done one after another takes 48 ms, and launchers
    # beside it stalled 45 of them; side by side, 12 ms and nothing stalled
    in_a_row = [[mib384, 4, 0.048, 0.045, 0.012, 0.024, 0.036, 0.048]] * 3
    side_by_side = [[mib384, 4, 0.012, 0.0, 0.012, 0.012, 0.012, 0.012]] * 3
    assert burst_summary(in_a_row, 0.012) == pytest.approx((1.0, 0.9375))
    assert burst_summary(side_by_side, 0.012) == pytest.approx((0.25, 0.0))


def test_settled_returns_once_the_releaser_has_let_go_of_what_came_before():
    let_go = threading.Event()

    class Pin:
        def __del__(self) -> None:
            let_go.set()

    handoff.release_later(Pin())
    handoff.settled()
    assert let_go.is_set()


def test_the_bottleneck_report_names_the_stalls_only_where_the_prover_pins():
    _, paused = _run(_doc())
    _, staged = _run(_doc(upload="staged"))
    # two pauses a partition: the unlock's whole time and the lock's stalled share
    assert 0.0 < paused.bottleneck["pin_stalls"] < 0.2
    assert "pin_stalls" not in staged.bottleneck


def test_calibrate_warns_where_the_locks_ran_side_by_side():
    from simgpu.calibrate.build import pins_warning

    mib384 = 384 * 2**20
    rows = [[mib384, 0.012, 0.006, 0.011, 0.006]] * 3
    one_at_a_time = [[mib384, 4, 0.048, 0.045, 0.012, 0.024, 0.036, 0.048]] * 3
    side_by_side = [[mib384, 4, 0.015, 0.0, 0.015, 0.015, 0.015, 0.015]] * 3
    assert pins_warning({"rows": rows, "bursts": one_at_a_time}) is None
    assert "side by side" in pins_warning({"rows": rows, "bursts": side_by_side})
    assert pins_warning({"rows": rows}) is None  # a probe from before the bursts


def test_the_lock_s_sensitivity_to_busy_cores_is_read_as_a_stage_s():
    """A 384 MiB lock of 12 ms alone and 15 ms beside 8 busy cores of 16 (in pairs of
    calls back to back): 1 + b 8 / 16 = 1.25, b = 0.5, the profile's lock_pressure; a
    profile accepts it, and refuses one above 1."""
    from simgpu.calibrate.build import lock_pressure
    from simgpu.calibrate.chain import LOCK
    from simgpu.calibrate.measure import Contention

    pairs = [(0.012, 0.015)] * 6
    c = Contention(
        n=1 << 22, cores=16, membw_gbps=100.0, synthesis={}, loaded={LOCK: (0.012, 0.015)}, pressure_load=8
    )
    c.loaded_pairs = {LOCK: pairs}
    assert lock_pressure(c) == pytest.approx(0.5)
    assert lock_pressure(Contention(n=1 << 22, cores=16, membw_gbps=100.0, synthesis={}, loaded={})) is None
    prof = profile_from_dict(_doc(pins={**MEASURED, "lock_pressure": 0.5}), "pins-test")
    assert prof.resolve(prof.workload().constraints).pins.lock_pressure == 0.5
    with pytest.raises(UserError, match=r"\[pins\] lock_pressure"):
        profile_from_dict(_doc(pins={**MEASURED, "lock_pressure": 1.5}), "pins-test")


def test_refit_reads_the_lock_s_pressure_as_calibrate_does():
    """A profile whose contention record has the lock's pairs (pins.lock: 12 ms alone,
    15 ms beside the load) gets the lock_pressure calibrate would write again, from
    `refit_uses`; a profile without [pins] gets none."""
    from simgpu.calibrate.refit import contention_of, refit_uses

    doc = _doc()
    cal = doc["calibration"]
    load = contention_of(doc).pressure_load
    cal["pressure"]["pins.lock"] = [0.012, 0.015]
    cal["contention"].setdefault("pressure_pairs", {})["pins.lock"] = [[0.012, 0.015]] * 6
    cores = int(cal["contention"]["cores"])
    refit_uses(doc)
    assert doc["pins"]["lock_pressure"] == pytest.approx(min(1.0, 0.25 * cores / load), abs=1e-4)
    bare = _doc(pins=None)
    bare["calibration"]["pressure"]["pins.lock"] = [0.012, 0.015]
    refit_uses(bare)
    assert "pins" not in bare
