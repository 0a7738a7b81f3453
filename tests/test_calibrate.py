"""Fitting cost laws, writing profiles, and calibrating the CPU backend end to end."""

from __future__ import annotations

import json
import statistics
import tomllib
from dataclasses import replace

import pytest
from conftest import ROOT
from typer.testing import CliRunner

from simgpu.calibrate.build import HOST_DRIFT_WARN, trips_share
from simgpu.calibrate.chain import TRIP
from simgpu.calibrate.fit import (
    EXACT_BYTES,
    IN_ORDER_PAIRS,
    TIME_LAWS,
    buffer_law,
    device_law,
    fit_device_queue,
    fit_pressure,
    stage_means,
    time_law,
    time_laws,
)
from simgpu.calibrate.measure import EPILOGUE_SAMPLES, Contention
from simgpu.calibrate.refit import refit_profile
from simgpu.cli import app, main
from simgpu.errors import UserError
from simgpu.profile import Law, PointsLaw, load_profile, profile_from_dict
from simgpu.profile.laws import fit_law
from simgpu.profile.tomlwrite import Inline, dumps


def test_fit_recovers_a_known_law():
    ns = [1 << k for k in range(10, 20, 2)]
    ys = [0.002 + 3e-9 * n for n in ns]
    f = fit_law(ns, ys, ("a + b*n", "a + b*N*log2(N)"))
    assert f.law == "a + b*n" and f.max_rel_error < 1e-9
    assert f.coeffs["a"] == pytest.approx(0.002) and f.coeffs["b"] == pytest.approx(3e-9)


def test_time_law_keeps_the_points_where_no_law_fits():
    ns = [1 << 10, 1 << 12, 1 << 14, 1 << 16]
    ys = [1.0, 0.5, 4.0, 2.0]  # no smooth law near this
    law, err = time_law(ns, ys)
    assert err > 0.05 and "points" in law
    p = PointsLaw.parse(law["points"], "t", law["beyond"])
    assert [p(n) for n in ns] == ys
    # beyond the ladder, the best law over all of it rather than the last segment
    assert p(1 << 20) == pytest.approx(fit_law(ns, ys, TIME_LAWS)(1 << 20))


def test_a_buffer_law_is_kept_only_where_it_gives_every_size_to_the_byte():
    """The H query's bases batch is (N - 1) rows of 96 B: the best law with coefficients
    >= 0, 96 N less a little, is within 2e-7 of every size, yet a few hundred bytes short
    at 2^22, and a pool block of 96 (N - 1) B would then not take the next 96 N B batch.
    So the measured points are written, with the law beyond them; an exact 96 N stays a
    law."""
    ns = [1 << 18, 1 << 20, 1 << 22]
    law, err = buffer_law(ns, [96.0 * (n - 1) for n in ns])
    assert "points" in law and err == 0.0
    p = Law.parse(dict(law), "b")
    assert [p(n) for n in ns] == [96 * (n - 1) for n in ns]
    assert p(1 << 24) == pytest.approx(96 * (1 << 24), rel=1e-5)  # the law, beyond
    exact, _ = buffer_law(ns, [96.0 * n for n in ns])
    assert exact["law"] == "a + b*N"
    q = Law.parse(dict(exact), "b")
    assert all(abs(q(n) - 96 * n) <= EXACT_BYTES for n in ns)


def test_an_exact_buffer_law_is_written_with_round_coefficients():
    """Least squares leaves noise in a coefficient's last bits, and that noise differs
    between numpy builds; a law exact to the byte is written at the fewest decimals that
    keep it exact, so every machine writes 96 B a row as 96 and no stray 3e-9 B."""
    ns = [1 << 18, 1 << 19, 1 << 20, 1 << 21, 1 << 22]
    law, _ = buffer_law(ns, [96.0 * n + 1e-9 * (k % 2) for k, n in enumerate(ns)])
    assert dict(law) == {"law": "a + b*N", "a": 0.0, "b": 96.0}
    fixed, _ = buffer_law(ns, [24.0 for _ in ns])
    assert fixed["a"] == 24.0 and fixed.get("b", 0.0) == 0.0


def test_a_slow_host_moment_is_taken_out_of_driver_stages():
    # The epilogue's work is the same at every size; one repeat ran on a core that was
    # 1.5x slow, and the reference loop timed just before it says so.
    rows = [
        {"constraints": 1 << 14, "epilogue": [0.004, 0.004], "epilogue_ref": [0.001, 0.001]},
        {"constraints": 1 << 16, "epilogue": [0.004, 0.006], "epilogue_ref": [0.001, 0.0015]},
    ]
    at = statistics.mean([0.001, 0.001, 0.001, 0.0015])  # the calibration's mean host speed
    assert stage_means(rows, "epilogue") == pytest.approx([0.004 * at / 0.001] * 2)
    # a stage in other processes (or a profile without references) keeps its raw means
    rows[1]["b_g2_msm"], rows[0]["b_g2_msm"] = [1.0, 2.0], [1.0, 1.0]
    assert stage_means(rows, "b_g2_msm") == [1.0, 1.5]


def test_stages_with_a_known_algorithm_fit_only_its_law():
    assert time_laws("epilogue") == ("a",)  # the same work at every size
    assert time_laws("b_g2_msm") == ("a + b*n/log2(n)",)  # Pippenger on the CPU
    assert time_laws("kernels") == TIME_LAWS  # GPU MSMs whose window steps: free pick


def test_points_law_interpolates_and_extrapolates_rising_segments_only():
    p = PointsLaw(((1.0, 10.0), (2.0, 20.0), (4.0, 10.0)))
    assert p(1.5) == pytest.approx(15.0)
    assert p(8.0) == 10.0  # a falling last segment is held flat beyond the data
    assert PointsLaw(((1.0, 1.0), (2.0, 3.0)))(4.0) == pytest.approx(7.0)


def test_a_points_law_gives_each_measured_point_back_exactly():
    """A use's share read at two sizes becomes a points law held flat beyond them
    (build.stage_uses_over); at a read size it is what was read, to the bit, so that a
    share read as 0 is never a rounding below it (a bound of -1e-16 failed CI once)."""
    from simgpu.profile.schema import UseLaw, uses_at

    for a, b in [(0.9, 0.1), (0.8943, 0.3), (0.7, 0.0), (0.2, 1.0)]:
        law = PointsLaw(((1, a), (64, a), (256, b), (1 << 32, b)))
        assert (law(64), law(256), law(1 << 40)) == (a, b, b)
        # and between them a weighted mean of two shares, never below the smaller
        assert min(a, b) <= law(100) <= max(a, b)
    # a share off by a rounding below 0 is read as 0 (kept within [0, 1])
    rounding = UseLaw(demand=PointsLaw(((1, 25.0),)), bound=PointsLaw(((1, 0.3), (2, -1e-16))))
    assert uses_at({"h2d": rounding}, 2, "t")["h2d"].bound == 0.0


def test_points_law_follows_its_law_beyond_the_measured_sizes():
    t = {"points": [[1024, 1.0], [4096, 3.0]], "beyond": {"law": "a*n", "a": 0.001}}
    p = Law.parse(t, "t")
    assert p(2048) == pytest.approx(1 + 2 / 3)  # between the points: linear
    assert p(8192) == pytest.approx(8.192) and p(512) == pytest.approx(0.512)
    with pytest.raises(UserError, match="beyond: expected a law"):
        Law.parse({"points": [[1, 1.0]], "beyond": {"points": [[2, 2.0]]}}, "t")
    with pytest.raises(UserError, match="not extra"):
        Law.parse({"points": [[1, 1.0]], "extra": 1}, "t")


def test_toml_writer_round_trips_a_profile():
    doc = tomllib.loads((ROOT / "simgpu" / "profile" / "profiles" / "h200-cupy.toml").read_text())
    from simgpu.calibrate.refit import inline_laws

    assert tomllib.loads(dumps(inline_laws(doc))) == doc
    assert tomllib.loads(dumps({"a": Inline(law="n", b=1.5)})) == {"a": {"law": "n", "b": 1.5}}


def test_the_shipped_h200_profile_loads_and_predicts():
    prof = load_profile(ROOT / "simgpu" / "profile" / "profiles" / "h200-cupy.toml")
    r = prof.resolve(1 << 20)
    # footprints from the prover's plan: 32 B per domain element for d_a, 64 for d_bc
    assert r.buffers["d_a"] == 32 << 20 and r.buffers["d_bc"] == 64 << 20
    assert sum(ph.seconds for ph in r.stages["kernels"].phases) > 0
    code = main(["predict", "--profile", "h200-cupy", "--constraints", "2^20", "--partitions", "4", "--json"])
    assert code == 0


def test_a_bad_calibrated_b_g2_split_is_a_user_error():
    doc = tomllib.loads((ROOT / "simgpu" / "profile" / "profiles" / "h200-cupy.toml").read_text())
    doc["calibration"]["b_g2_threads"] = "four"
    with pytest.raises(UserError, match="b_g2_threads must be a positive integer"):
        profile_from_dict(doc)


def test_refit_on_small_sizes(tmp_path):
    out = tmp_path / "small.toml"
    errors = refit_profile(ROOT / "simgpu" / "profile" / "profiles" / "h200-cupy.toml", out, max_size=1 << 20)
    doc = tomllib.loads(out.read_text())
    assert doc["calibration"]["refit_max_size"] == 1 << 20
    assert set(errors) >= {"synthesis_compute", "synthesis_transfer", "b_g2_msm", "kernels_h_msm"}
    profile_from_dict(doc)


def test_calibrate_the_cpu_backend(tmp_path):
    """The whole pipeline on the CPU backend: measure, fit, write; the profile loads and
    predicts, and says what it measured."""
    out = tmp_path / "cpu.toml"
    r = CliRunner().invoke(
        app,
        [
            "calibrate",
            "--out",
            str(out),
            "--backend",
            "cpu",
            "--sizes",
            "2^6..2^8",
            "--repeats",
            "1",
            "--keys-dir",
            str(tmp_path / "keys"),
            "--device-law",
            "in-order",
            "--pairing-sizes",
            "2^6",
        ],
    )
    assert r.exit_code == 0, r.output
    doc = tomllib.loads(out.read_text())
    # b_g2_msm on the CPU gives no in-order pairings: the law asked for is refused aloud
    assert "fitted proportionally" in " ".join(r.output.split())
    assert "gpu" not in doc.get("contention", {})
    assert doc["calibration"]["sizes"] == [64, 256]
    # between the measured sizes the buffers carry the memory plan's bytes (an MSM's
    # temporaries step with its window, so interpolating would miss them)
    from simgpu.calibrate.build import plan_buffers

    planned = plan_buffers("generic", 128, stream_batch=1 << 16, b_g2_on="cpu")  # the CPU backend's batch
    stepped = {b: v for b, v in doc["buffers"].items() if isinstance(v, dict) and "points" in v}
    assert stepped, "some buffer steps between 2^6 and 2^8"
    for buf, v in stepped.items():
        assert [n for n, _ in v["points"]] == [64, 128, 256], buf
        assert dict(v["points"])[128] == planned[buf], buf
    assert set(doc["calibration"]["measurements"]) == {"n64", "n256"}
    # milliseconds-long, noisy: the epilogue is sampled several times per repeat
    assert doc["calibration"]["repeats"] == 1
    assert len(doc["calibration"]["measurements"]["n64"]["epilogue"]) == EPILOGUE_SAMPLES
    # each epilogue sample comes with the host's speed just before it, and the record says
    # how far that speed moved over the ladder (and the run warns past HOST_DRIFT_WARN)
    assert len(doc["calibration"]["measurements"]["n64"]["epilogue_ref"]) == EPILOGUE_SAMPLES
    refs = [statistics.median(m["epilogue_ref"]) for m in doc["calibration"]["measurements"].values()]
    drift = doc["calibration"]["host_drift"]
    # the record rounds the drift to 1e-3 and each sample to 1 µs: the ratio of the
    # rounded medians may stray by that much (1.065 against 1.06399 on a 2-core machine)
    slack = 5e-4 + drift * 5e-7 * (1 / min(refs) + 1 / max(refs))
    assert drift == pytest.approx(max(refs) / min(refs), abs=slack)
    assert ("speed moved" in " ".join(r.output.split())) == (drift > HOST_DRIFT_WARN)  # Rich may wrap
    assert "buffer_arrays" not in doc  # the CPU backend's ledger has no pool to trace
    # the allocator a cap meets: exact bytes in the CPU backend's ledger (CuPy's caching
    # pool on the GPU, which calibrate now writes itself)
    assert doc["hardware"]["vram_pool"] == "exact"
    prof = load_profile(out)
    assert prof.hardware.cpu_cores >= 1 and "synthesis" in prof.stages
    assert prof.calibrated_b_g2_threads == 4  # what its b_g2_msm times hold for
    assert doc["calibration"]["msm_capacity"] == prof.calibrated_msm_capacity == "witness"
    # synthesis: computed in a worker, then carried back through the driver's one result
    # thread, which every partition's result shares
    compute, transfer = prof.resolve(256).stages["synthesis"].phases
    assert (compute.name, transfer.name) == ("compute", "transfer")
    assert transfer.seconds > 0
    # the way back is host work too: its sensitivity to busy cores, fitted from its trip
    # timed alone and beside the pressure load (each repeat's two calls back to back, the
    # median of their ratios), beside its share of the result channel
    tr_uses = dict(transfer.uses)
    cores = doc["calibration"]["contention"]["cores"]
    assert set(tr_uses) == {"driver_rx", "pressure", "handoff"}
    # a result on its way back is one the driver's stages are slowed by (`handoff`); each
    # driver stage's sensitivity to it, from its calls alone and beside results coming back
    assert (tr_uses["handoff"].demand, tr_uses["handoff"].bound) == (1.0, 0.0)
    handoff = doc["calibration"]["contention"]["handoff"]
    assert set(handoff) == {"prep", "prestage", "kernels", "b_g2_msm", "epilogue"}
    for stage, rows in handoff.items():
        uses = dict(prof.resolve(256).stages[stage].phases[0].uses)
        p = uses["pressure"].bound
        slopes = [(b / a / (1 + p * c / cores) - 1) / m for a, b, m, c in rows if m >= 0.2]
        if slopes:  # results were on their way back beside enough of its calls
            want = min(1.0, max(0.0, statistics.median(slopes)))
            assert uses["handoff"].bound == pytest.approx(want, abs=0.02) and uses["handoff"].demand == 0.0
    pairs = doc["calibration"]["contention"]["pressure_pairs"]["synthesis.transfer"]
    ratio = statistics.median(beside / alone for alone, beside in pairs)
    k, cores = doc["calibration"]["pressure"]["syntheses_beside"], doc["calibration"]["contention"]["cores"]
    want = min(1.0, max(0.0, (ratio - 1) * cores / k))
    assert tr_uses["pressure"].bound == pytest.approx(want, abs=0.02)  # each call is stored to 1 us
    assert doc["calibration"]["pressure"]["synthesis.transfer"] == [  # the fastest each way, kept
        min(a for a, _ in pairs),
        min(b for _, b in pairs),
    ]
    m = doc["calibration"]["measurements"]["n256"]
    # how much the trips back wait on the driver: measured, four results at once against
    # one alone (calibrate's pool has four workers), and read through the law backwards
    assert len(m["synthesis_trip"]) == 1 and len(m["synthesis_trip_x4"]) == 4
    share = trips_share(statistics.mean(m["synthesis_trip"]), statistics.mean(m["synthesis_trip_x4"]), 4)
    rx = dict(transfer.uses)["driver_rx"]
    assert rx.bound == pytest.approx(share, abs=2e-3)
    assert rx.demand == rx.bound  # the reader is drawn on for that share of the trip only
    assert m["synthesis_compute"][0] + m["synthesis_transfer"][0] == pytest.approx(
        m["synthesis"][0], abs=2e-6
    )  # stored to 1 us
    # the kernels timed twice a repeat: phase by phase (a sync after each), and as a run
    # launches them; the phases' laws carry the second's total
    assert len(m["kernels_unsynced"]) == len(m["kernels"]) == 1
    from simgpu.calibrate.fit import unsynced_scale

    (f,) = unsynced_scale([m])
    phases = prof.resolve(256).stages["kernels"].phases
    measured = sum(m[f"kernels_{ph.name}"][0] for ph in phases)
    pooled = doc["calibration"]["alone_pooled"]["n256"]["kernels"]  # (below)
    assert sum(ph.seconds for ph in phases) == pytest.approx(f * measured * pooled, rel=0.05)
    # how the device shares its work, measured and fitted into the gpu resource's uses
    queue = doc["calibration"]["device_queue"]
    assert set(queue) == {
        "kernels_beside_kernel_load",
        "kernels_beside_copy_load",
        "prestage_beside_kernel_load",
        "kernels_beside_one_prestage",
        "kernels_beside_gpu_load",
        "prestage_beside_gpu_load",
        "one_prestage",
        "one_prestage_beside_kernels",  # (b_g2_msm ran on the host: no prestage beside it)
        # the loads' side of the pairings: a round alone, and while the stage ran
        "kernel_load_beside_kernels",
        "copy_load_beside_kernels",
        "kernel_load_beside_prestage",
        "gpu_load_beside_kernels",
        "gpu_load_beside_prestage",
    }
    # b_g2_msm ran on the host here, so its pairings that read the device as one stream
    # were not timed: the device keeps the proportional law
    assert "contention" not in doc
    assert all(alone > 0 and beside > 0 for alone, beside in queue.values())
    for n in (64, 256):
        kernels_gpu = dict(prof.resolve(n).stages["kernels"].phases[0].uses)["gpu"]
        assert kernels_gpu.demand == 1.0 and 0.0 <= kernels_gpu.bound <= 1.0
        assert 0.0 <= dict(prof.resolve(n).stages["prestage"].phases[0].uses)["h2d"].bound <= 1.0
    # what each stage meets was read at 2^6 too (--pairing-sizes): each use is the fit of
    # its own size's readings there, and a law between and beyond them
    from dataclasses import replace

    from simgpu.calibrate.build import stage_uses
    from simgpu.calibrate.refit import contentions_of, refit_uses
    from simgpu.profile.tomlwrite import dumps

    first, at64 = contentions_of(doc)
    assert (first.n, at64.n) == (256, 64) and at64.loaded_pairs and at64.device_queue and at64.handoff
    assert not at64.synthesis  # the host's k-at-once syntheses: read at the first size only
    # a driver stage's time alone, at a size whose contention runs read it alone again,
    # is the median of every such reading, the ladder's and theirs (fit.pooled_alone)
    from simgpu.calibrate.fit import alone_readings

    for c in (first, at64):
        row = doc["calibration"]["measurements"][f"n{c.n}"]
        more = alone_readings(c)["prep"]
        assert len(more) >= len(c.loaded_pairs["prep"]) + len(c.handoff["prep"])
        want = statistics.median([*row["prep"], *more]) / statistics.median(row["prep"])
        # calibrate pooled the readings as taken, the record keeps them to 1 us: at 2^6
        # a call takes tens of microseconds, so the rounding shows
        slack = 4e-6 / min([*row["prep"], *more])
        # (the factor itself is recorded to 1e-4)
        assert doc["calibration"]["alone_pooled"][f"n{c.n}"]["prep"] == pytest.approx(want, rel=slack + 1e-4)
        assert f"alone over every call, n={c.n:,}: prep x" in " ".join(r.output.split())  # and says so
        # the law meets each size's pooled mean to within its recorded worst fit error
        got = prof.resolve(c.n).stages["prep"].phases[0].seconds
        fit_error = doc["calibration"]["fit_max_rel_error"]["prep"]
        assert got == pytest.approx(statistics.mean(row["prep"]) * want, rel=fit_error + slack + 1e-4)
    # and a refit reads the stored measurements as calibrate read them
    refit_profile(out, tmp_path / "refit.toml")
    refitted = tomllib.loads((tmp_path / "refit.toml").read_text())["calibration"]["alone_pooled"]
    for c in (first, at64):
        row = doc["calibration"]["measurements"][f"n{c.n}"]
        for stage, more in alone_readings(c).items():
            slack = 4e-6 / min([*(row.get(f"{stage}_unsynced") or row[stage]), *more])
            f = doc["calibration"]["alone_pooled"][f"n{c.n}"][stage]
            assert refitted[f"n{c.n}"][stage] == pytest.approx(f, rel=slack + 2e-4), (c.n, stage)
    # fitted again from what the profile stores (to 1 us), so that the fits compare exactly
    again = tomllib.loads(out.read_text())
    refit_uses(again)
    (tmp_path / "again.toml").write_text(dumps(again, "refitted"))
    refit = load_profile(tmp_path / "again.toml")
    law, h2d = doc["calibration"]["device_law"], doc["hardware"]["h2d_gbps"]
    differ = []
    for c in (first, at64):
        c = replace(c, synthesis=first.synthesis, gil=first.gil, membw_gbps=first.membw_gbps)
        for stage, uses in stage_uses(c, h2d, "cpu", 4, device_law=law).items():
            name, i = ("synthesis", 1) if stage == TRIP else (stage, 0)
            got = dict(refit.resolve(c.n).stages[name].phases[i].uses)
            wrote = dict(prof.resolve(c.n).stages[name].phases[i].uses)
            for res, u in uses.items():
                assert (got[res].demand, got[res].bound) == pytest.approx((u["demand"], u["bound"])), (
                    stage,
                    res,
                )
                # calibrate's own fit, from the readings before they were stored
                assert wrote[res].bound == pytest.approx(u["bound"], abs=0.02), (stage, res)
                if isinstance(again["stages"][name].get("uses", {}).get(res, {}).get("bound"), dict):
                    differ.append((name, res))
    assert differ  # some use read differently at the two sizes (a timing never repeats exactly)
    stage, res = differ[0]
    at = {n: dict(refit.resolve(n).stages[stage].phases[0].uses)[res].bound for n in (64, 128, 256, 1 << 20)}
    assert at[128] == pytest.approx(at[64] + (at[256] - at[64]) / 3)  # linear in n between
    assert at[1 << 20] == pytest.approx(at[256])  # held beyond the last size read
    r = CliRunner().invoke(app, ["predict", "--profile", str(out), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["proofs"]["failed"] == 0


def test_the_trips_share_reads_the_queue_at_the_reader():
    """k trips started at once queue at the driver: the i-th waits for i - 1 receives, so
    their mean is alone * (1 + share * (k - 1) / 2)."""
    # 0.1 s alone, receives of 0.02 s: 0.10, 0.12, 0.14, 0.16 s -> mean 0.13
    assert trips_share(0.100, 0.130, 4) == pytest.approx(0.2)
    assert trips_share(0.100, 0.250, 4) == pytest.approx(1.0)  # every second queued
    assert trips_share(0.100, 0.090, 4) == 0.0  # no slower together: nothing shared
    assert trips_share(0.100, 0.900, 4) == 1.0  # slower than serial: clamped


def test_the_pressure_fit_reads_the_burst_law_backwards():
    """On 16 cores, beside 8 busy ones a stage takes 1 + b 8 / 16 as long: prep 100 ->
    116 ms gives b = 0.32.  Synthesis 1.0 s alone, 1.175 s with 8 at once and 1.375 s with
    16 (7 and 15 others busy) lies on b = 0.4; 32 at once (oversubscribed) is left to the
    cores.  b_g2_msm keeps its threads' cores busy on the CPU, the driver's one on the GPU."""
    c = Contention(
        n=1 << 20,
        cores=16,
        membw_gbps=100.0,
        synthesis={1: 1.0, 8: 1.175, 16: 1.375, 32: 2.75},
        loaded={"prep": (0.100, 0.116), "b_g2_msm": (0.050, 0.050)},
        pressure_load=8,
    )
    on_gpu = fit_pressure(c, b_g2_cores=1)
    assert on_gpu["prep"]["pressure"] == {"demand": 1.0, "bound": pytest.approx(0.32)}
    assert on_gpu["synthesis"]["pressure"]["bound"] == pytest.approx(0.4, abs=1e-4)
    assert on_gpu["b_g2_msm"]["pressure"] == {"demand": 1.0, "bound": 0.0}
    assert fit_pressure(c, b_g2_cores=8)["b_g2_msm"]["pressure"]["demand"] == 8.0


def test_the_pressure_fit_reads_each_pair_of_calls_back_to_back():
    """A stage whose host flips between a fast and a slow mode: alone and beside, one
    after the other, it reads 7.5 / 8.1 ms in the fast mode and 10.0 / 10.8 in the slow
    one, 1.08x either way.  The fastest call each way pairs the fast alone with a beside
    that only caught the slow mode (10.5 / 7.5 = 1.4x); the pairs' median reads 1.08x,
    b = 0.16 beside 8 of 16 cores."""
    pairs = [(0.0075, 0.0081), (0.0100, 0.0108), (0.0075, 0.0105), (0.0100, 0.0108), (0.0100, 0.0108)]
    loaded = {"prestage": (min(a for a, _ in pairs), min(b for _, b in pairs))}
    c = Contention(n=1 << 20, cores=16, membw_gbps=100.0, synthesis={}, loaded=loaded, pressure_load=8)
    assert fit_pressure(c, 1)["prestage"]["pressure"]["bound"] == pytest.approx(0.16, abs=1e-4)  # 1.08x
    c.loaded_pairs = {"prestage": pairs}
    assert fit_pressure(c, 1)["prestage"]["pressure"]["bound"] == pytest.approx(0.16, abs=1e-4)
    # the pairs decide where they are kept: the fastest calls alone (a profile calibrated
    # before the pairs were kept) read the mode change
    c.loaded_pairs = {}
    c.loaded = {"prestage": (0.0075, 0.0105)}
    assert fit_pressure(c, 1)["prestage"]["pressure"]["bound"] == pytest.approx(0.8, abs=1e-4)


def test_bad_size_ladders_are_user_errors(capsys):
    assert main(["calibrate", "--out", "x.toml", "--sizes", "2^10..2^5"]) == 2
    assert "powers of two" in capsys.readouterr().err


def test_an_unknown_device_law_is_a_user_error(capsys, tmp_path):
    assert main(["calibrate", "--out", str(tmp_path / "x.toml"), "--device-law", "banana"]) == 2
    err = capsys.readouterr().err
    assert "--device-law 'banana': one of proportional, in-order" in err and "Traceback" not in err


def test_device_queue_fit_reads_the_fluid_shares_law_backwards():
    """Worked by hand.  One in-order queue: kernels beside kernels take 2x (bound 1),
    beside copies 1.8x (the copies' demand 0.8); prestage beside kernels 1.16x (bound
    0.16 / 0.8 = 0.2, the rest on the link); b_g2_msm beside copies 1.72x (0.72 / 0.8)."""
    uses = fit_device_queue(
        {
            "kernels beside kernel_load": (0.1, 0.2),
            "kernels beside copy_load": (0.1, 0.18),
            "prestage beside kernel_load": (0.1, 0.116),
            "b_g2_msm beside copy_load": (0.05, 0.086),
        },
        h2d_gbps=50.0,
    )
    assert uses["kernels"]["gpu"] == Inline(demand=1.0, bound=1.0)
    assert uses["prestage"]["gpu"] == Inline(demand=0.8, bound=0.2)
    assert uses["prestage"]["h2d"] == Inline(demand=50.0, bound=0.8)
    assert uses["b_g2_msm"]["gpu"] == Inline(demand=1.0, bound=0.9)
    # A copy engine beside compute: copies do not slow kernels, so prestage is all link.
    sep = fit_device_queue(
        {"kernels beside kernel_load": (0.1, 0.2), "kernels beside copy_load": (0.1, 0.1)}, 50.0
    )
    assert "gpu" not in sep["prestage"] and sep["prestage"]["h2d"]["bound"] == 1.0
    assert fit_device_queue({}, 50.0) == {}


def test_the_in_order_pairings_read_the_kernels_claim_on_the_one_stream():
    """Worked by hand, the in-order law (a bound fraction stretches by 1 + the others'
    demand).  b_g2_msm beside its own loop 1.6x: its bound 0.6.  Beside another GPU
    worker's prestage + kernels 2.2x: that worker's kernels claim (2.2 - 1) / 0.6 = 2
    of the stream.  The kernels beside the b_g2_msm loop 1.5x: their bound 0.5 (the
    loop's demand is the unit).  Beside copies 1.4x: the copies' demand 0.4 / 0.5 = 0.8.
    Prestage beside the b_g2_msm loop 1.1x: its bound 0.1, the rest on the link."""
    queue = {
        "kernels beside kernel_load": (0.1, 0.15),
        "kernels beside copy_load": (0.1, 0.14),
        "prestage beside kernel_load": (0.1, 0.11),
        "b_g2_msm beside copy_load": (0.05, 0.07),
        "b_g2_msm beside kernel_load": (0.05, 0.08),
        "b_g2_msm beside gpu_load": (0.05, 0.11),
    }
    assert device_law(queue, "in-order") == "in-order"
    assert device_law(queue) == "proportional"  # what is wanted when nothing is asked
    uses = fit_device_queue(queue, h2d_gbps=50.0, law="in-order")
    assert uses["b_g2_msm"]["gpu"] == Inline(demand=1.0, bound=0.6)
    assert uses["kernels"]["gpu"] == Inline(demand=2.0, bound=0.5)
    assert uses["prestage"]["gpu"] == Inline(demand=0.8, bound=0.1)
    assert uses["prestage"]["h2d"] == Inline(demand=50.0, bound=0.9)
    # without the two b_g2_msm pairings it is the proportional reading, as before
    older = {k: v for k, v in queue.items() if k not in IN_ORDER_PAIRS}
    assert device_law(older, "in-order") == "proportional"
    assert fit_device_queue(older, 50.0, "in-order")["kernels"]["gpu"]["demand"] == 1.0
    assert fit_device_queue(queue, 50.0) == fit_device_queue(older, 50.0)
    with pytest.raises(UserError, match="unknown device law"):
        device_law(queue, "banana")


def test_the_device_law_goes_into_the_profile_with_the_uses_it_was_fitted_for():
    from simgpu.calibrate.build import set_device_law
    from simgpu.calibrate.measure import Contention

    def contention(queue):
        return Contention(1024, 4, 10.0, {}, {}, queue, 2, {})

    in_order = {k: (0.01, 0.02) for k in IN_ORDER_PAIRS}
    doc = {"contention": {"membw": {"law": "conserved"}}}
    set_device_law(doc, contention(in_order))  # not asked for: the default
    assert doc["contention"] == {"membw": {"law": "conserved"}}
    set_device_law(doc, contention(in_order), "in-order")
    assert doc["contention"] == {"membw": {"law": "conserved"}, "gpu": {"law": "in-order"}}
    set_device_law(doc, contention({}), "in-order")  # refitted without the pairings: the default again
    assert doc["contention"] == {"membw": {"law": "conserved"}}
    bare: dict = {}
    set_device_law(bare, None)
    assert bare == {}


def test_one_prestage_beside_the_kernels_gives_the_copies_demand():
    """Worked by hand.  Kernels (bound 1: 2x beside kernels) take 40 ms alone and 60 ms
    with a 30 ms prestage started with them: in those 30 ms they did 10 ms of work (the
    last 30 ms of their 40 they did alone), so they ran at 1/3: 1 + 1 x demand = 3, the
    copies' demand is 2, above the whole device (a continuous copy load, 18x, would have
    said 17 and been clamped to 1).  b_g2_msm, 15 ms alone and 35 ms beside the 30 ms
    prestage: 10 ms done in it, at 1/3: 1 + bound x 2 = 3, bound 1.  Wholly inside it
    (25 ms against 15): 1 + bound x 2 = 25/15, bound 1/3.  Prestage beside kernels
    1.06x: its bound 0.06 / 2 = 0.03."""
    queue = {
        "kernels beside kernel_load": (0.040, 0.080),
        "kernels beside copy_load": (0.040, 0.72),
        "prestage beside kernel_load": (0.030, 0.0318),
        "b_g2_msm beside copy_load": (0.015, 0.27),
        "kernels beside one_prestage": (0.040, 0.060),
        "b_g2_msm beside one_prestage": (0.015, 0.035),
        "one_prestage": (0.029, 0.030),
    }
    uses = fit_device_queue(queue, h2d_gbps=50.0)
    assert uses["prestage"]["gpu"]["demand"] == pytest.approx(2.0)
    assert uses["prestage"]["gpu"]["bound"] == pytest.approx(0.03)
    assert uses["b_g2_msm"]["gpu"]["bound"] == 1.0
    inside = fit_device_queue(queue | {"b_g2_msm beside one_prestage": (0.015, 0.025)}, 50.0)
    assert inside["b_g2_msm"]["gpu"]["bound"] == pytest.approx(1 / 3, abs=1e-4)
    # A prestage of 0.3 ms beside kernels of 164 ms (the CPU backend) hides in their
    # noise: the continuous copy load's reading stands (clamped at 1).
    short = queue | {"kernels beside one_prestage": (0.164, 0.170), "one_prestage": (0.0003, 0.0003)}
    assert fit_device_queue(short, 50.0)["prestage"]["gpu"]["demand"] == 1.0


def test_a_failing_device_load_is_reported_not_waited_for():
    """measure_device_queue waits for its background load to reach steady state: a load
    that fails at once must end that wait and hand its error back."""
    import threading

    from simgpu.calibrate.measure import _loop

    def boom() -> None:
        raise MemoryError("device full")

    stop, started, errors = threading.Event(), threading.Event(), []
    t = threading.Thread(target=_loop, args=(boom, stop, started, errors))
    t.start()
    assert started.wait(timeout=5)
    t.join(timeout=5)
    assert [type(e) for e in errors] == [MemoryError]


def test_a_loads_inputs_come_ready_as_fresh_copies_each_time():
    """The GPU worker's loop takes a, b, c copied ahead (prestage lets them go): each take
    is a new copy of the same values, never the originals."""
    import numpy as np

    from simgpu.calibrate.measure import ReadyCopies

    a, b = np.arange(6, dtype=np.uint32), np.ones((2, 3), dtype=np.uint32)
    copies = ReadyCopies((a, b))
    try:
        first, second = copies.take(), copies.take()
    finally:
        copies.close()
    for got in (first, second):
        assert np.array_equal(got[0], a) and np.array_equal(got[1], b)
        assert got[0] is not a and not np.shares_memory(got[0], a)
    assert not np.shares_memory(first[0], second[0])


def test_a_load_whose_input_copier_died_raises_instead_of_waiting_for_ever():
    import numpy as np

    from simgpu.calibrate.measure import ReadyCopies

    class Unc(np.ndarray):
        def copy(self, *args, **kwargs):  # host memory ran out while copying
            raise MemoryError("no host memory for a copy")

    copies = ReadyCopies((np.zeros(4, dtype=np.uint32).view(Unc),))
    try:
        with pytest.raises(RuntimeError, match="stopped") as err:
            copies.take(poll=0.05)
    finally:
        copies.close()
    assert isinstance(err.value.__cause__, MemoryError)


def test_the_device_queue_is_measured_with_b_g2_msm_on_the_device(tmp_path) -> None:
    """measure_device_queue on an executor that runs b_g2_msm on the device (the CPU
    backend stands for it): every pair the fit reads comes back, b_g2_msm's beside the
    copy load and beside one prestage among them, each a pair of positive times.  And
    the driver's chain of stages (measure_gil's, measure_pressure's, and beside another
    driver thread's prep) on that executor: b_g2_msm on device 0, every stage timed."""
    from simgpu.calibrate.chain import PRESSURE_STAGES
    from simgpu.calibrate.lock import measure_gil
    from simgpu.calibrate.measure import measure_beside_prep, measure_device_queue
    from simgpu.prover.circuits import CircuitSpec
    from simgpu.real.executor import ProverExecutor, ProverSettings

    spec = CircuitSpec(log_constraints=8, public_inputs=2, seed=12)
    settings = ProverSettings(backend="cpu", b_g2_on="gpu", partition_workers=1, keys_dir=tmp_path)
    ex = ProverExecutor(spec, settings)
    try:
        queue = measure_device_queue(ex, spec.constraints, lambda _: None, repeats=1)
        # the median of three windows: one alone can meet a hiccup of the host (a CI run
        # read 0.0 beside the Python thread once, its window no later than the quiet one)
        gil, (loop_wait, burst_wait) = measure_gil(ex, spec.constraints, lambda _: None, repeats=3)
        beside_prep = measure_beside_prep(ex, spec.constraints, lambda _: None, repeats=1)
    finally:
        ex.close()
    assert set(gil) == set(PRESSURE_STAGES)
    assert all(a > 0 and b > 0 and w >= 0 and bb > 0 for a, b, _, w, bb in gil.values())
    # a request for the lock waits beside a thread of pure Python, and less beside a bursty one
    assert loop_wait > burst_wait >= 0
    assert set(beside_prep) == set(PRESSURE_STAGES) and all(a > 0 and b > 0 for a, b in beside_prep.values())
    pairs = {
        "kernels beside kernel_load",
        "kernels beside copy_load",
        "prestage beside kernel_load",
        "b_g2_msm beside copy_load",
        "kernels beside one_prestage",
        "b_g2_msm beside one_prestage",
        "b_g2_msm beside kernel_load",
        "b_g2_msm beside gpu_load",
        "kernels beside gpu_load",
        "prestage beside gpu_load",
    }
    # and each pairing with a continuous load read from the load's side too: its round
    # alone, and while the stage ran
    loads_side = {
        f"{load} beside {stage}"
        for stage, _, load in (p.partition(" beside ") for p in pairs)
        if load != "one_prestage"
    }
    # and the prestage started with them, over both and beside each apart: a single lock
    # starts it beside the last holder's b_g2_msm, two locks beside the other's kernels
    started = {"one_prestage", "one_prestage beside kernels", "one_prestage beside b_g2_msm"}
    assert set(queue) == pairs | loads_side | started
    both = statistics.median(queue[f"one_prestage beside {s}"][1] for s in ("kernels", "b_g2_msm"))
    assert queue["one_prestage"][1] == pytest.approx(both)  # one repeat: the two calls' median
    assert device_law(queue, "in-order") == "in-order"
    assert all(a > 0 and b > 0 for a, b in queue.values())


def test_a_loads_rounds_count_by_their_share_inside_the_window() -> None:
    """rounds_within: how much of a load ran while a stage did, each round by the share
    of it inside the stage's window (the load's side of a device-queue pairing)."""
    from simgpu.calibrate.measure import rounds_within

    rounds = [(0.0, 1.0), (1.0, 2.0), (2.0, 4.0)]
    assert rounds_within(rounds, 0.5, 2.0) == pytest.approx(1.5)  # half the first, all the second
    assert rounds_within(rounds, 1.0, 3.0) == pytest.approx(1.5)  # the second, half the third
    assert rounds_within(rounds, 5.0, 6.0) == 0.0
    # a load that kept its pace through the window did a round a round's time: a stage of
    # 3 s beside rounds of 1 s saw 3 of them
    assert rounds_within([(t, t + 1.0) for t in range(-2, 8)], 0.0, 3.0) == pytest.approx(3.0)


def test_refit_uses_gives_back_the_uses_calibrate_fitted() -> None:
    """The shipped h200-cupy keeps its contention runs ([calibration.contention], the
    device-queue and pressure pairs): fitted again from them, every stage's uses are
    the ones calibrate wrote (to the last digit the stored pairs' rounding leaves: they
    are kept to the microsecond, so a 7.9 ms prestage's ratio carries a few 1e-4)."""
    import copy
    import tomllib

    ROUNDING = 5e-4

    from simgpu.calibrate.refit import contention_of, refit_uses

    doc = tomllib.loads((ROOT / "simgpu" / "profile" / "profiles" / "h200-cupy.toml").read_text())
    assert contention_of(doc).synthesis[32] > contention_of(doc).synthesis[1]
    again = copy.deepcopy(doc)
    refit_uses(again)
    for stage, entry in doc["stages"].items():
        want, got = entry.get("uses", {}), again["stages"][stage].get("uses", {})
        assert set(got) == set(want), stage
        for res, use in want.items():
            if isinstance(use["bound"], dict):  # a law over sizes, refitted from its pairs
                assert got[res]["demand"] == use["demand"], (stage, res)
                want_pts, got_pts = use["bound"]["points"], got[res]["bound"]["points"]
                assert [n for n, _ in got_pts] == [n for n, _ in want_pts], (stage, res)
                for (_, w), (_, g) in zip(want_pts, got_pts, strict=True):
                    assert g == pytest.approx(w, abs=ROUNDING), (stage, res)
                continue
            assert got[res]["demand"] == pytest.approx(use["demand"], rel=1e-3), (stage, res)
            assert got[res]["bound"] == pytest.approx(use["bound"], abs=ROUNDING), (stage, res)


def test_refit_uses_refuses_a_profile_without_contention_runs() -> None:
    import tomllib

    from simgpu.calibrate.refit import refit_uses
    from simgpu.errors import UserError

    doc = tomllib.loads((ROOT / "simgpu" / "profile" / "profiles" / "h200-cupy.toml").read_text())
    del doc["calibration"]["contention"]
    with pytest.raises(UserError, match="no contention runs"):
        refit_uses(doc)


def test_the_contention_runs_measure_every_load_on_real_processes(tmp_path) -> None:
    """measure_contention at a tiny size on the CPU backend: k syntheses at once for each
    k (started together in a pool of real worker processes), every driver stage alone
    and beside the pressure load, and the device queue; what the profile keeps of it
    (contention_record) reads back as the same Contention."""
    from simgpu.calibrate.build import contention_record
    from simgpu.calibrate.chain import PRESSURE_STAGES
    from simgpu.calibrate.measure import measure_contention
    from simgpu.calibrate.refit import contention_of
    from simgpu.real.executor import ProverSettings

    settings = ProverSettings(backend="cpu", partition_workers=1, keys_dir=tmp_path)
    c = measure_contention(1 << 8, settings, [1, 2], lambda _: None)
    assert sorted(c.synthesis) == [1, 2] and all(t > 0 for t in c.synthesis.values())
    # every driver stage, and the synthesis result's way back, beside the pressure load
    assert set(c.loaded) == {*PRESSURE_STAGES, TRIP} and c.pressure_load >= 1
    assert all(a > 0 and b > 0 for a, b in c.loaded.values())
    # each repeat's calls back to back, whose fastest each way are `loaded`
    assert set(c.loaded_pairs) == set(c.loaded)
    assert all(len(ps) > 1 for ps in c.loaded_pairs.values())
    assert all(
        c.loaded[s] == (min(a for a, _ in ps), min(b for _, b in ps)) for s, ps in c.loaded_pairs.items()
    )
    assert "kernels beside kernel_load" in c.device_queue
    assert set(c.gil) == set(PRESSURE_STAGES)
    for a, b, lost, w, bb in c.gil.values():
        assert a > 0 and b > 0 and 0.0 <= lost <= 1.0 and w >= 0 and bb > 0
    assert c.gil_waits[0] > 0
    doc = {
        "calibration": {
            "contention": contention_record(c),
            "pressure": {"syntheses_beside": c.pressure_load, **{s: list(p) for s, p in c.loaded.items()}},
            "device_queue": {k.replace(" ", "_"): list(p) for k, p in c.device_queue.items()},
        }
    }
    back = contention_of(doc)
    assert back.loaded == c.loaded and back.device_queue == c.device_queue
    assert {s: [tuple(p) for p in ps] for s, ps in back.loaded_pairs.items()} == {
        s: [(pytest.approx(a, abs=1e-6), pytest.approx(b, abs=1e-6)) for a, b in ps]
        for s, ps in c.loaded_pairs.items()
    }
    assert back.gil == {st: pytest.approx(v, abs=1e-6) for st, v in c.gil.items()}
    assert back.gil_waits == pytest.approx(c.gil_waits, abs=1e-6)
    assert back.synthesis == pytest.approx(c.synthesis, abs=1e-6)
    # every call of the k at once, two rounds of k, whose mean is the k's reading and
    # whose spread is the host's under that load
    assert {k: len(v) for k, v in c.synthesis_calls.items()} == {1: 2, 2: 4}
    assert all(c.synthesis[k] == pytest.approx(sum(v) / len(v)) for k, v in c.synthesis_calls.items())
    assert back.synthesis_calls == {k: pytest.approx(v, abs=1e-6) for k, v in c.synthesis_calls.items()}
    # every driver stage beside results coming back: each repeat's calls, and how many
    # results were on their way back and how many syntheses computing beside the second
    assert set(c.handoff) == set(PRESSURE_STAGES)
    for rows in c.handoff.values():
        assert len(rows) > 1 and all(a > 0 and b > 0 and m >= 0 and k >= 0 for a, b, m, k in rows)
    assert sum(m for rows in c.handoff.values() for _, _, m, _ in rows) > 0  # results did come back
    assert back.handoff == {s: [pytest.approx(r, abs=1e-6) for r in rows] for s, rows in c.handoff.items()}


def test_a_profile_older_than_the_record_is_refitted_with_one_given(tmp_path) -> None:
    """A profile written before calibrate kept [calibration.contention] refits its uses
    once the record is handed over (as experiments/refit_uses.py reads it from the
    lease's log), and says so in its header."""
    import tomllib

    from simgpu.calibrate.refit import refit_profile
    from simgpu.profile.tomlwrite import dumps

    shipped = ROOT / "simgpu" / "profile" / "profiles" / "h200-cupy.toml"
    doc = tomllib.loads(shipped.read_text())
    record = doc["calibration"].pop("contention")
    old = tmp_path / "old.toml"
    old.write_text(dumps(doc, "an older profile"))
    with pytest.raises(UserError, match="no contention runs"):
        refit_profile(old, tmp_path / "out.toml", uses=True)
    refit_profile(old, tmp_path / "out.toml", uses=True, contention=record)
    text = (tmp_path / "out.toml").read_text()
    assert "[calibration.contention] added" in text
    again = tomllib.loads(text)
    assert again["stages"]["kernels"]["uses"]["gpu"]["bound"] == pytest.approx(
        doc["stages"]["kernels"]["uses"]["gpu"]["bound"], abs=2e-4
    )


def test_the_handoff_fit_reads_each_pair_against_the_results_beside_it() -> None:
    """A prestage of 20 ms alone took 24.2 ms beside 1.5 results on their way back and
    0.5 syntheses computing, and it is 0.32 sensitive to busy cores (of 16): the
    computing core is worth 1 + 0.32 * 0.5 / 16 = 1.01, so each result adds
    (24.2 / 20 / 1.01 - 1) / 1.5 = 0.1320 of its time.  The median over the pairs: one
    pair in another of the VM's modes (40 ms) does not move it; a pair with almost no
    result beside it (0.05) is not read.  A stage never slowed reads 0; the synthesis's
    way back draws 1, slowing nothing itself."""
    from simgpu.calibrate.build import stage_uses
    from simgpu.calibrate.fit import fit_handoff

    one = 24.2 / 20 / 1.01
    pair = (0.020, 0.0242, 1.5, 0.5)
    rows = [pair, pair, (0.020, 0.040, 1.5, 0.5), (0.020, 0.030, 0.05, 0)]
    c = Contention(n=1 << 20, cores=16, membw_gbps=100.0, synthesis={}, loaded={}, handoff={"prestage": rows})
    got = fit_handoff(c, {"prestage": 0.32})["prestage"]["handoff"]
    assert got == {"demand": 0.0, "bound": pytest.approx((one - 1) / 1.5, abs=1e-4)}
    c.handoff["epilogue"] = [(0.015, 0.015, 1.0, 0.0)] * 3
    assert fit_handoff(c, {})["epilogue"]["handoff"]["bound"] == 0.0
    c.handoff = {}
    assert fit_handoff(c, {}) == {}  # calibrated before it measured results coming back
    # in a profile: the stages' sensitivities, and the way back's draw
    c = Contention(
        n=1 << 20,
        cores=16,
        membw_gbps=100.0,
        synthesis={1: 1.0, 2: 1.0},
        loaded={"prestage": (0.02, 0.02), "synthesis.transfer": (0.1, 0.1)},
        pressure_load=8,
        handoff={"prestage": rows},
    )
    uses = stage_uses(c, 50.0, "gpu", 8)
    no_pressure = (24.2 / 20 - 1) / 1.5  # alone and beside the syntheses alike: sensitivity 0
    assert uses["prestage"]["handoff"]["bound"] == pytest.approx(no_pressure, abs=1e-4)
    assert uses["synthesis.transfer"]["handoff"] == {"demand": 1.0, "bound": 0.0}


def test_the_gil_fit_counts_asks_and_times_waits() -> None:
    """A stage of 10 ms alone takes 14.7 ms beside a thread of pure Python, beside which
    a request for the lock waits 0.5 ms, and is 0.32 sensitive to busy cores (of 16): the
    thread's core is worth 1 + 0.32 / 16 = 1.02, so the stage lost 14.7 / 1.02 - 10 =
    4.41 ms to 8.8 asks, 0.882 a millisecond; a request beside it waited 40 us (0.04 ms).
    A stage that never asks: bound 0.  Without the thread's wait timed (a calibration
    before it was), CPython's 5 ms switch interval stands for it.  Where the stage was
    also timed beside a bursty thread (a wait of 50 us: 10.52 ms, 10.31 with its core's
    pressure taken out, so 0.31 ms lost to 6.2 asks the queued work did not cover),
    those asks are its bound: 0.62 a millisecond."""
    from simgpu.calibrate.fit import DEFAULT_SWITCH_INTERVAL, fit_gil

    c = Contention(
        n=1024,
        cores=16,
        membw_gbps=100.0,
        synthesis={},
        loaded={},
        gil={"prep": (0.010, 0.0147, 0.0, 40e-6, 0.0), "kernels": (0.040, 0.040, 0.0, 2e-6, 0.0)},
        gil_waits=(0.0005, 0.0),
    )
    got = fit_gil(c, {"prep": 0.32})
    assert got["prep"]["gil"] == {"demand": pytest.approx(0.04), "bound": pytest.approx(0.8824, abs=1e-4)}
    assert got["kernels"]["gil"] == {"demand": pytest.approx(0.002), "bound": 0.0}
    old = fit_gil(replace(c, gil_waits=(0.0, 0.0)), {"prep": 0.32})
    assert DEFAULT_SWITCH_INTERVAL == 0.005
    assert old["prep"]["gil"]["bound"] == pytest.approx(0.08824, abs=1e-4)
    bursty = replace(c, gil={"prep": (0.010, 0.0147, 0.0, 40e-6, 0.01031 * 1.02)}, gil_waits=(0.0005, 50e-6))
    assert fit_gil(bursty, {"prep": 0.32})["prep"]["gil"]["bound"] == pytest.approx(0.62, abs=1e-3)


def test_the_gil_fit_is_asked_for_and_sits_beside_the_shares() -> None:
    """calibrate records the interpreter-lock runs; their fit is only asked for
    (refit_uses(doc, gil=True)) until a lease shows it predicts the pipeline.  Asked
    for, the kernels get a gil use beside their GPU share (a rate of asks, which
    scales their time, not a share of it), and the GPU share stays; a profile without
    the runs is refused, not refitted with nothing.  A row of three values (a
    calibration before the waits were timed) reads a wait of 0."""
    import tomllib

    from simgpu.calibrate.refit import refit_uses

    doc = tomllib.loads((ROOT / "simgpu" / "profile" / "profiles" / "h200-cupy.toml").read_text())
    assert doc["calibration"]["contention"]["gil"]  # the shipped calibration recorded them
    del doc["calibration"]["contention"]["gil"]
    # one contention size, so that each fit is one number (the shipped one also ran at
    # 2^20, and its uses are laws over the two sizes)
    doc["calibration"].pop("contention_at", None)
    with pytest.raises(UserError, match="no gil runs"):
        refit_uses(doc, gil=True)
    gpu_before = doc["stages"]["kernels"]["uses"]["gpu"]["bound"]
    # 1.8x beside a Python thread
    doc["calibration"]["contention"]["gil"] = {"kernels": [0.040, 0.072, 0.2]}
    refit_uses(doc)
    assert "gil" not in doc["stages"]["kernels"]["uses"]  # not asked for: as calibrate writes it
    refit_uses(doc, gil=True)
    uses = doc["stages"]["kernels"]["uses"]
    p = uses["pressure"]["bound"]
    assert uses["gil"]["demand"] == 0.0
    wait = doc["calibration"]["contention"]["gil_loop_wait"]  # the continuous thread's, as timed
    assert uses["gil"]["bound"] == pytest.approx((0.072 / (1 + p / 16) - 0.040) / wait / 40, abs=1e-4)
    assert uses["gpu"]["bound"] == gpu_before


def test_the_shipped_profiles_result_channel_is_what_its_stored_trips_say() -> None:
    """The synthesis transfer's use of the driver's result channel, in the shipped h200
    profile, is read from the trips it stores the way calibrate reads them now (a queue
    at the reader: simgpu.calibrate.refit.result_channel_use), demand and bound alike."""
    from simgpu.calibrate.refit import result_channel_use

    doc = tomllib.loads((ROOT / "simgpu" / "profile" / "profiles" / "h200-cupy.toml").read_text())
    (transfer,) = [ph for ph in doc["stages"]["synthesis"]["phases"] if ph["name"] == "transfer"]
    assert transfer["uses"]["driver_rx"] == result_channel_use(doc)
    # and beside it the pressure of the trip timed beside a load of syntheses, and the
    # result itself on its way back (handoff: demand 1, bound 0, it slows the driver's
    # stages, not itself)
    assert set(transfer["uses"]) == {"driver_rx", "pressure", "handoff"}
    assert transfer["uses"]["handoff"] == {"demand": 1.0, "bound": 0.0}
    assert "synthesis.transfer" in doc["calibration"]["pressure"]
    # at 2^22 a result holds the reader for about a tenth of its trip
    points = dict(transfer["uses"]["driver_rx"]["bound"]["points"])
    assert 0.05 < points[1 << 22] < 0.2


def test_the_exclusive_reading_gives_the_stream_to_whatever_of_a_stage_is_on_it():
    """Worked by hand: the kernels and b_g2_msm are wholly the stream's (demand 1,
    bound 1: two of them halve each other), whatever the loops' pairings read; the
    prestage beside the b_g2_msm loop 1.3x: 0.3 of it on the stream (demand 1), the
    rest on the link.  Calibrate asks for it by default; it needs only that pairing, and
    b_g2_msm's use is the device's only where it was timed on the device."""
    from simgpu.calibrate.fit import DEFAULT_DEVICE_LAW, EXCLUSIVE_PAIRS

    queue = {
        "kernels beside kernel_load": (0.1, 0.18),
        "kernels beside copy_load": (0.1, 0.12),
        "prestage beside kernel_load": (0.1, 0.13),
        "b_g2_msm beside kernel_load": (0.05, 0.08),
    }
    assert DEFAULT_DEVICE_LAW == "exclusive" and device_law(queue, "exclusive") == "exclusive"
    uses = fit_device_queue(queue, h2d_gbps=50.0, law="exclusive")
    assert uses["kernels"]["gpu"] == Inline(demand=1.0, bound=1.0)
    assert uses["b_g2_msm"]["gpu"] == Inline(demand=1.0, bound=1.0)
    assert uses["prestage"]["gpu"] == Inline(demand=1.0, bound=0.3)
    assert uses["prestage"]["h2d"] == Inline(demand=50.0, bound=0.7)
    on_cpu = {k: v for k, v in queue.items() if not k.startswith("b_g2_msm")}
    assert "b_g2_msm" not in fit_device_queue(on_cpu, 50.0, "exclusive")
    # without its pairing it is the proportional reading
    older = {k: v for k, v in queue.items() if k not in EXCLUSIVE_PAIRS}
    assert device_law(older, "exclusive") == "proportional"
    assert fit_device_queue(older, 50.0, "exclusive") == fit_device_queue(older, 50.0)


def test_the_shipped_h200_profile_is_its_lease_calibration_as_calibrate_wrote_it() -> None:
    """h200-cupy is the forty-seventh lease's calibration (kept in docs/data), nothing
    changed but its name: the kernels timed both with and without the phase clock's
    syncs at every size, the device read exclusively, the buffers at every size of the
    ladder, the G2 MSM's arrays sized by the key, a, b and c page-locked ([pins])."""
    import tomllib

    shipped = tomllib.loads((ROOT / "simgpu" / "profile" / "profiles" / "h200-cupy.toml").read_text())
    lease = tomllib.loads(
        (ROOT / "docs" / "data" / "h200-2026-12-06r" / "call1" / "h200-cupy-key.toml").read_text()
    )
    assert shipped["calibration"]["abc_upload"] == "pinned" and "lock_pressure" in shipped["pins"]
    assert shipped["profile"].pop("name") == "h200-cupy"
    assert lease["profile"].pop("name") == "h200-cupy-key"
    assert shipped == lease
    assert shipped["calibration"]["device_law"] == "exclusive"
    assert shipped["calibration"]["msm_capacity"] == "key"
    # the law's pairing and both sides of each device pairing were measured
    assert "prestage_beside_kernel_load" in shipped["calibration"]["device_queue"]
    assert "kernel_load_beside_kernels" in shipped["calibration"]["device_queue"]
    # and the kernels unsynced at every size, which the phases' laws carry
    sizes = shipped["calibration"]["measurements"]
    assert all("kernels_unsynced" in sizes[f"n{n}"] for n in shipped["calibration"]["sizes"])
    # (at 2^18 the syncs cost a few percent of the stage: 28.9 ms synced, 28.1 unsynced
    # here; 34.9 and 32.2 on the twenty-sixth lease)
    kernels = load_profile(ROOT / "simgpu" / "profile" / "profiles" / "h200-cupy.toml").resolve(1 << 18)
    total = sum(ph.seconds for ph in kernels.stages["kernels"].phases)
    at = sizes["n262144"]
    assert total == pytest.approx(statistics.median(at["kernels_unsynced"]), rel=0.03)
    assert total < statistics.median(at["kernels"])


def test_a_stage_alone_is_read_over_every_reading_calibrate_took_of_it() -> None:
    """simgpu.calibrate.fit.pooled_alone: the ladder read prep in one stretch of a host
    that then slowed; the pressure pairs, results coming back and the interpreter-lock
    run read it alone four, two and one time more, minutes later.  The fit takes the
    median of all thirteen readings, not the ladder's moment."""
    from simgpu.calibrate.fit import alone_readings, pooled_alone

    c = Contention(
        n=1 << 20,
        cores=16,
        membw_gbps=100.0,
        synthesis={},
        loaded={},
        loaded_pairs={"prep": [(0.2, 0.3)] * 4, "kernels": [(0.06, 0.07)] * 4, TRIP: [(9.0, 9.0)] * 4},
        handoff={"prep": [(0.2, 0.25, 1.0, 0.0)] * 2},
        gil={"prep": (0.2, 0.4, 0.0, 0.0, 0.0), "epilogue": (0.03, 0.06, 0.0, 0.0, 0.0)},
    )
    readings = alone_readings(c)
    assert readings == {"prep": [0.2] * 7, "kernels": [0.06] * 4, "epilogue": [0.03]}  # no trip
    at = {
        "constraints": 1 << 20,
        "prep": [0.1] * 6,
        "kernels": [0.055] * 3,  # with the phase clock's syncs
        "kernels_unsynced": [0.05] * 3,  # as a run (and the pairs) take it
        "kernels_ntt": [0.01] * 3,
        "epilogue": [0.02],
        "epilogue_ref": [0.001],
        "prestage": [0.007] * 3,  # no other reading: as measured
    }
    below = {"constraints": 1 << 18, "prep": [0.03] * 6}
    rows, factors = pooled_alone([below, at], {1 << 20: readings})
    assert rows[0] == below  # a size no contention run read: as measured
    assert factors == {1 << 20: {"prep": 2.0, "kernels": 1.2, "epilogue": 1.25}}
    pooled = rows[1]
    assert pooled["prep"] == pytest.approx([0.2] * 6)  # median of 6 x 0.1 and 7 x 0.2
    # the kernels compared unsynced (the pairs run the stage as the pipeline does), and
    # their phases and synced timing scale with them: the clock's share stays
    assert pooled["kernels_unsynced"] == pytest.approx([0.06] * 3)
    assert pooled["kernels"] == pytest.approx([0.066] * 3)
    assert pooled["kernels_ntt"] == pytest.approx([0.012] * 3)
    assert pooled["epilogue"] == pytest.approx([0.025]) and pooled["epilogue_ref"] == [0.001]
    assert pooled["prestage"] == [0.007] * 3
    assert at["prep"] == [0.1] * 6  # the stored measurements are not changed


def test_the_kernels_phases_are_fitted_as_a_run_takes_them_without_the_clocks_syncs() -> None:
    """simgpu.calibrate.fit.unsynced_scale: the phase clock syncs the device after each
    kernels phase, a run does not.  Where the stage was also timed without the clock, the
    phases scale by the medians' ratio; before it was, the gap at the contention size
    (its synced median less the device queue's kernels alone) comes out of every size."""
    from simgpu.calibrate.fit import phase_means, sync_gap, unsynced_scale

    new = {
        "constraints": 1 << 20,
        "kernels": [0.050, 0.052, 0.054],
        "kernels_unsynced": [0.045, 0.046, 0.047],
    }
    assert unsynced_scale([new]) == [pytest.approx(0.046 / 0.052)]
    old = [
        {"constraints": 1 << 18, "kernels": [0.038], "kernels_ntt": [0.010], "prep": [0.02]},
        {"constraints": 1 << 20, "kernels": [0.0497], "kernels_ntt": [0.012], "prep": [0.05]},
    ]
    gap = sync_gap(old, alone_unsynced=0.0459, at=1 << 20)
    assert gap == pytest.approx(0.0038)
    assert unsynced_scale(old, gap) == [pytest.approx(0.0342 / 0.038), pytest.approx(0.0459 / 0.0497)]
    assert phase_means(old, "kernels_ntt", gap) == [
        pytest.approx(0.010 * 0.0342 / 0.038),
        pytest.approx(0.012 * 0.0459 / 0.0497),
    ]
    assert phase_means(old, "prep", gap) == phase_means(old, "prep")  # other stages as measured
    assert sync_gap(old, alone_unsynced=0.060, at=1 << 20) == 0.0  # noise: no gain from the syncs
    assert sync_gap(old, alone_unsynced=None, at=1 << 20) is None
    assert unsynced_scale(old) == [1.0, 1.0]  # nothing unsynced measured: as measured


def test_a_calibration_stopped_by_sigterm_writes_what_it_measured(tmp_path) -> None:
    """`timeout`, or a job scheduler, stops a process with SIGTERM: calibrate takes it as
    Ctrl-C, so the sizes measured by then are fitted and written, the rest named as
    missing, instead of an hour of a GPU's time lost with nothing on disk."""
    import signal
    import subprocess
    import sys

    out = tmp_path / "cut.toml"
    args = ["calibrate", "--out", str(out), "--backend", "cpu", "--sizes", "2^6..2^14", "--repeats", "2"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "simgpu.cli", *args, "--keys-dir", str(tmp_path / "keys")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:  # the second size begun: the first is measured
        lines.append(line)
        if line.startswith("[2/"):
            proc.send_signal(signal.SIGTERM)
            break
    rest, _ = proc.communicate(timeout=120)
    log = "".join(lines) + rest
    assert proc.returncode == 0, log
    assert "interrupted: writing what was measured" in log
    doc = tomllib.loads(out.read_text())
    assert doc["calibration"]["sizes"][0] == 64
    assert "n=16384: not measured (interrupted)" in doc["calibration"]["missing"]
    assert load_profile(out).resolve(64).stages["kernels"].seconds > 0


def test_a_calibration_says_how_its_a_b_c_reached_the_device():
    from simgpu.calibrate.build import abc_upload
    from simgpu.calibrate.measure import SizeRun

    def run(**counts: int) -> SizeRun:
        return SizeRun(1 << 20, abc_uploads=counts)

    assert abc_upload([run(pinned=6, staged=0), run(pinned=6)]) == "pinned"
    assert abc_upload([run(pinned=0, staged=6)]) == "staged"
    assert abc_upload([run(pinned=5, staged=1)]) == "mixed"
    assert abc_upload([run(), SizeRun(1 << 18)]) is None  # a backend that pins nothing
    prof = profile_from_dict(
        tomllib.loads((ROOT / "simgpu/profile/profiles/h200-cupy.toml").read_text())
        | {"calibration": {"abc_upload": "pinned"}}
    )
    assert prof.calibrated_abc_upload == "pinned"


def test_the_second_prestage_uploads_a_b_c_the_way_the_first_did():
    import mmap

    import numpy as np

    from simgpu.calibrate.measure import _abc_kept
    from simgpu.prover.prepared import Prepared

    rng = np.random.default_rng()
    a, b, c = (rng.integers(0, 2**32, (256, 8), dtype=np.uint32) for _ in range(3))
    kept = Prepared(None, 0, [], 256, a, b, c, None, None, None)  # type: ignore[arg-type]
    regions: list = []
    *copies, pin = _abc_kept(kept, lambda r: regions.append(r) or "pin")
    assert pin is None and regions == []  # the first was staged: so is the second
    pairs = list(zip(copies, (a, b, c), strict=True))
    assert all(np.array_equal(x, y) and x.ctypes.data != y.ctypes.data for x, y in pairs)
    kept.abc_pin = "the first's pin"
    *copies, pin = _abc_kept(kept, lambda r: regions.append(r) or "pin")
    (region,) = regions
    assert pin == "pin" and region.ctypes.data % mmap.PAGESIZE == 0  # as a received result's
    assert [x.ctypes.data for x in copies] == [region.ctypes.data + i * a.nbytes for i in range(3)]
    assert all(np.array_equal(x, y) for x, y in zip(copies, (a, b, c), strict=True))


def test_results_coming_back_beside_the_stages_are_not_page_locked(tmp_path) -> None:
    """measure_handoff times the driver's stages beside results coming back; those
    results are mapped but not page-locked: what the pins cost is [pins]'s (measured
    apart, simgpu.calibrate.pins), and read here too it would count twice.  The chain's
    own partitions are pinned as a pipeline's are (a stand-in pin that refuses, so the
    CPU backend's uploads go the staged way)."""
    from simgpu.calibrate.measure import measure_handoff
    from simgpu.prover.circuits import CircuitSpec
    from simgpu.real.executor import ProverExecutor, ProverSettings

    spec = CircuitSpec(log_constraints=8, public_inputs=2, seed=13)
    ex = ProverExecutor(spec, ProverSettings(backend="cpu", partition_workers=2, keys_dir=tmp_path))
    pinned: list[int] = []
    ex.pin = lambda region: pinned.append(region.nbytes)  # None: refused, uploads staged
    try:
        got = measure_handoff(ex, spec.constraints, lambda _: None, repeats=1)
    finally:
        ex.close()
    assert all(len(rows) == 1 for rows in got.values())
    assert len(pinned) == 3  # the warm chain's partition, the one alone and the one beside
