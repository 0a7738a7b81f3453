"""How the one stream served each GPU stage (experiments/stream_timeline.py) and its
replay with a driver lock (experiments/driver_lock_replay.py), worked by hand on small
traces, and the validation's OOM rule and its errors by the host's speed
(experiments/gpu_validation.py)."""

from __future__ import annotations

import pytest
from conftest import load_experiment

stream_timeline = load_experiment("stream_timeline")
gpu_validation = load_experiment("gpu_validation")
driver_lock_replay = load_experiment("driver_lock_replay")  # imports stream_timeline, loaded above
pipeline_replay = load_experiment("pipeline_replay")  # imports both, loaded above

#: CUPTI's clock runs this far ahead of the spans' clock in the trace below (µs).
OFF = 1_000_000.0


def _trace() -> dict:
    """Two GPU workers (host threads 11 and 12; the profiler calls them 901 and 902).
    Worker 11's kernels stage runs 0-100 µs (spans' clock); worker 12's b_g2_msm 20-80.
    On the device: 11's kernel 0-50, 12's kernel 50-60, 11's kernel 60-90, idle after."""
    ops = [
        # [name, category, start, dur, stream, launching tid, launch time]
        [0, 0, OFF + 1, 49, 7, 901, OFF + 0.5],
        [1, 0, OFF + 50, 10, 7, 902, OFF + 21],
        [0, 0, OFF + 60, 30, 7, 901, OFF + 55],
    ]
    calls = [
        # [name, tid, start, dur]: 12 waits in a synchronize 22-60, 11 in a copy 56-90
        [2, 902, OFF + 22, 38],
        [3, 901, OFF + 56, 34],
    ]
    spans = [
        [11, "kernels", 0, 0, 0.0, 100.0],
        [12, "b_g2_msm", 0, 1, 20.0, 80.0],
        [11, "epilogue", 0, 0, 100.0, 120.0],
    ]
    return {
        "names": ["msm_accumulate", "msm_reduce_g2", "cudaStreamSynchronize", "cudaMemcpyAsync"],
        "categories": ["kernel", "gpu_memcpy", "gpu_memset"],
        "ops": ops,
        "calls": calls,
        "spans": spans,
        "offset_us": 0.0,
    }


def test_each_gpu_stage_splits_into_its_own_device_time_the_others_and_idle():
    rows = {r["stage"]: r for r in stream_timeline.episodes({"kernel_trace": _trace()})}
    assert set(rows) == {"kernels", "b_g2_msm"}  # the epilogue is not a GPU stage
    k, b = rows["kernels"], rows["b_g2_msm"]
    assert k["beside"] == "b_g2_msm" and b["beside"] == "kernels"
    # kernels, 0-100: own 1-50 and 60-90; the other's 50-60; idle 0-1 and 90-100
    assert k["own_device"] == pytest.approx(79)
    assert k["others_only"] == pytest.approx(10)
    assert k["idle"] == pytest.approx(11)
    assert k["waiting"] == pytest.approx(34) and k["host"] == pytest.approx(66)
    # b_g2_msm, 20-80: own 50-60; the other's 20-50 and 60-80; never idle
    assert b["own_device"] == pytest.approx(10)
    assert b["others_only"] == pytest.approx(50)
    assert b["idle"] == pytest.approx(0)
    assert b["waiting"] == pytest.approx(38)
    # its own kernel ran first at 50, 30 µs in, behind 11's kernel queued ahead (20-50)
    assert b["first_own"] == pytest.approx(30, abs=1) and b["others_before_own"] == pytest.approx(30, abs=1)
    assert k["first_own"] == pytest.approx(1, abs=1) and k["others_before_own"] == 0


def test_a_finalizer_thread_whose_id_the_next_one_reuses_keeps_its_own_device_time():
    """split-finalizer starts a thread per partition, and the system gives a finished
    thread's id to the next: here the profiler's thread 902 launches first for host
    thread 12 (b_g2_msm 20-80) and then for host thread 13 (b_g2_msm 130-170), whose
    kernel runs 140-150 with nothing beside it."""
    t = _trace()
    t["ops"].append([1, 0, OFF + 140, 10, 7, 902, OFF + 131])
    t["calls"].append([2, 902, OFF + 132, 20])
    t["spans"].append([13, "b_g2_msm", 0, 2, 130.0, 170.0])
    rows = {(r["tid"], r["stage"]): r for r in stream_timeline.episodes({"kernel_trace": t})}
    first, second = rows[(12, "b_g2_msm")], rows[(13, "b_g2_msm")]
    assert first["own_device"] == pytest.approx(10) and first["launches"] == 1
    assert second["own_device"] == pytest.approx(10) and second["launches"] == 1
    assert second["others_only"] == 0 and second["idle"] == pytest.approx(30)
    assert second["waiting"] == pytest.approx(20) and second["beside"] == "nothing"


def test_the_samplers_lateness_inside_a_span_is_summed_with_its_run_queue_wait():
    t = _trace()
    # [t, late µs, frames, run-queue µs] on the spans' clock: two inside b_g2_msm (20-80)
    t["py_samples"] = {"samples": [[10.0, 5.0, [], 1.0], [30.0, 7.0, [], 2.0], [70.0, 3.0, [], 0.5]]}
    rows = {r["stage"]: r for r in stream_timeline.episodes({"kernel_trace": t})}
    assert rows["b_g2_msm"]["sampler_late"] == pytest.approx(10.0)
    assert rows["b_g2_msm"]["sampler_runq"] == pytest.approx(2.5)
    assert rows["kernels"]["sampler_late"] == pytest.approx(15.0)  # 0-100 holds all three
    # samples from before the run-queue wait was kept: lateness only
    t["py_samples"] = {"samples": [[30.0, 7.0, []]]}
    rows = {r["stage"]: r for r in stream_timeline.episodes({"kernel_trace": t})}
    assert rows["b_g2_msm"]["sampler_late"] == pytest.approx(7.0) and rows["b_g2_msm"]["sampler_runq"] is None
    assert stream_timeline.episodes({"kernel_trace": _trace()})[0]["sampler_late"] is None


def test_a_launch_held_behind_the_other_workers_pageable_copy_is_listed():
    t = _trace()
    # 12 launches at 57 µs and is held 400 µs, while 11 is inside its copy (56-90) and
    # after it; 11's copy is a pageable read-back (its device op names the kind)
    t["names"] += ["cuLaunchKernel", "Memcpy DtoH (Device -> Pageable)"]
    t["calls"][1][3] = 500.0  # 11's copy now lasts 56-556
    t["calls"].append([4, 902, OFF + 57, 400.0])
    t["ops"].append([5, 1, OFF + 540, 10, 7, 901, OFF + 56])
    held = stream_timeline.held_calls({"kernel_trace": t})
    assert held["by_call"] == {"cuLaunchKernel": [pytest.approx(0.4), 1]}
    key = "cuLaunchKernel behind cudaMemcpyAsync (Memcpy DtoH (Device -> Pageable))"
    assert held["behind"] == {key: pytest.approx(0.4)}
    # the waits themselves (the synchronize, the copy) are not held calls
    assert "cudaMemcpyAsync" not in held["by_call"]


def test_a_trace_whose_launches_fall_outside_every_span_is_refused():
    t = _trace()
    t["spans"] = [[11, "kernels", 0, 0, 5000.0, 5001.0], [12, "b_g2_msm", 0, 1, 9000.0, 9001.0]]
    with pytest.raises(SystemExit, match="does not align"):
        stream_timeline.episodes({"kernel_trace": t})


@pytest.mark.parametrize(
    ("p", "k", "n", "right"),
    [
        (0.0, 0, 3, True),  # never, and the card never
        (0.0, 1, 3, False),  # never, but the card ran out once
        (1.0, 3, 3, True),
        (1.0, 2, 3, False),
        (0.1, 0, 3, True),  # a race the model gives 1 in 10: 0 of 3 is likely
        (0.1, 1, 3, True),  # and 1 of 3 has a 24% chance
        (0.1, 3, 3, False),  # 3 of 3 has 0.1%
        (0.5, 3, 3, True),
    ],
)
def test_the_oom_outcome_is_right_when_the_model_gives_the_real_count_a_fair_chance(p, k, n, right):
    assert gpu_validation.oom_plausible(p, k, n) is right


@pytest.mark.parametrize(
    ("p", "ran_out", "like"),
    [
        (0.0, False, True),  # the model completes, so does the run: its peak is comparable
        (0.0, True, False),  # the run stopped allocating where it failed
        (0.2, False, True),  # a race the model mostly completes
        (1.0, True, True),
        (0.9, False, False),
    ],
)
def test_peak_vram_is_read_from_a_run_of_the_outcome_the_model_gives(p, ran_out, like):
    assert gpu_validation.like_model({"OOM": {"p": p, "measured": ran_out}}) is like


def _run(pred: float, real: float, refs_ms: tuple[float, float], failed: int = 0) -> tuple[dict, dict]:
    """One validation run as gpu_validation's table holds it: (record, comparison)."""
    record = {"host_reference_s": [x / 1e3 for x in refs_ms]}
    return record, {
        "throughput (s/proof)": {"predicted": pred, "measured": real},
        "proofs failed": {"measured": failed},
        "OOM": {"p": 0.0},  # the model expects every proof done
    }


def test_the_throughput_error_is_told_by_the_hosts_speed_during_each_run():
    table = [
        _run(0.95, 1.00, (1.00, 1.05)),  # calibrate's speed (1.0 ms): -5%
        _run(0.90, 1.00, (1.00, 1.20)),  # 20% slower at its slowest: -10%
        _run(0.80, 1.00, (1.90, 2.00)),  # twice as slow: -20%
        _run(0.70, 1.00, (1.80, 1.90)),  # and -30%
        _run(0.50, 1.00, (1.00, 1.00), failed=2),  # lost proofs: not a throughput
    ]
    (line, blank) = gpu_validation._error_by_host_speed(table, cal_ms=1.0)
    assert blank == ""
    assert "within 10% of calibrate's: 1 runs, median -5.0%" in line
    assert "10-30% slower: 1 runs, median -10.0%" in line
    assert "over 30% slower: 2 runs, median -25.0% (-30.0 to -20.0)" in line
    # without calibrate's reading there is nothing to compare with
    assert gpu_validation._error_by_host_speed(table, cal_ms=None) == []


def test_long_stretches_are_the_host_work_with_no_driver_call_in_it():
    # µs: launches at 10 and 2000, a wait 2500-2600, in a stage spanning 0-5000
    n, total = stream_timeline._long_stretches([10.0, 2000.0], [(2500.0, 2600.0)], 0.0, 5000.0)
    assert n == 2  # 10 -> 2000 and 2600 -> 5000; 0 -> 10 and 2000 -> 2500 are short
    assert total == pytest.approx(1990 + 2400)
    # a wait that began before the span still ends the stretch at its start
    assert stream_timeline._long_stretches([], [(-50.0, 3000.0)], 0.0, 3500.0) == (0, 0.0)


def test_the_replay_serves_one_stream_in_order_and_the_driver_lock_holds_through_a_pageable_copy():
    r = driver_lock_replay
    step = r.Step
    # A queues a 10 ms kernel and reads back through pageable memory (1 ms on the device);
    # B, 1 ms later, queues a 1 ms kernel, spends 0.5 ms on the host, and is done.
    a = [step(0, "launch", 10_000), step(0, "pageable", 1_000), step(0, "end")]
    b = [step(1_000, "launch", 1_000), step(500, "end")]
    b_synced = [step(1_000, "launch", 1_000), step(0, "sync"), step(0, "end")]

    def spans(locked, b_steps):
        env = r.simpy.Environment()
        stream = r.Stream(env, "driver" if locked else "stream")
        pa, pb = env.process(stream.run(a)), env.process(stream.run(b_steps))
        env.run()
        return pa.value, pb.value

    # A's read-back waits for its kernel; B's launch only queues work, so B is done at 1.5 ms
    assert spans(False, b) == (11_000, 1_500)
    # with the lock, B's launch waits until A's copy has run (11 ms), then its host time
    assert spans(True, b) == (11_000, 11_500)
    # a sync waits for all the stream holds: A's kernel and copy, then B's own kernel
    assert spans(False, b_synced) == (11_000, 12_000)


kernel_trace = load_experiment("kernel_trace")


def test_a_profilers_trace_is_compacted_with_each_ops_launching_call_and_the_clocks_offset():
    """KernelTrace.record() on a trace in the profiler's format (Chrome trace events, as
    PyTorch's profiler exports CUPTI's records): each device op keeps the call that
    launched it, every call is kept, and the spans move onto CUPTI's clock by the
    markers' offset."""
    offset = 5_000_000.0  # CUPTI's µs minus perf_counter's
    markers = [(1.0 + i * 1e-3, 1.0 + i * 1e-3 + 1e-5) for i in range(5)]
    markers += [(3.0 + i * 1e-3, 3.0 + i * 1e-3 + 1e-5) for i in range(5)]

    def event(cat, name, tid, ts, dur, **args):
        return {"ph": "X", "cat": cat, "name": name, "tid": tid, "ts": ts, "dur": dur, "args": args}

    t = 2.0e6 + offset  # a launch at 2 s on perf_counter's clock
    events = [
        # each marker's cudaDeviceSynchronize, centred in its perf_counter bracket
        event("cuda_runtime", "cudaDeviceSynchronize", 1, (t0 + t1) / 2 * 1e6 + offset - 1.0, 2.0)
        for t0, t1 in markers
    ] + [
        event("cuda_driver", "cuLaunchKernel", 7, t, 4.0, correlation=11),
        event("kernel", "msm_accumulate", 0, t + 10.0, 300.0, correlation=11, stream=7),
        event("cuda_runtime", "cudaMemcpyAsync", 7, t + 20.0, 400.0, correlation=12),
        event(
            "gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 0, t + 310.0, 100.0, correlation=12, stream=7
        ),
        {"ph": "i", "cat": "ac2g", "name": "flow", "tid": 7, "ts": 0.0},  # not an op, not a call
    ]
    kt = kernel_trace.KernelTrace(executor=None)
    kt._markers, kt._trace = markers, {"traceEvents": events}
    kt.spans = [[42, "kernels", 0, 1, 1.999, 2.001]]
    rec = kt.record()
    assert rec["offset_us"] == pytest.approx(offset)
    names = rec["names"]
    kernel, copy = rec["ops"]
    assert names[kernel[0]] == "msm_accumulate" and rec["categories"][kernel[1]] == "kernel"
    assert kernel[5:] == [7, pytest.approx(2.0e6 + offset)]  # its launch: thread, start
    assert names[copy[0]].endswith("Pageable)")
    assert [c[3] for c in rec["calls"] if names[c[0]] == "cudaMemcpyAsync"] == [400.0]  # it waited
    assert sorted(names[c[0]] for c in rec["calls"]) == sorted(
        ["cudaDeviceSynchronize"] * 10 + ["cuLaunchKernel", "cudaMemcpyAsync"]
    )
    (span,) = rec["spans"]
    assert span[:4] == [42, "kernels", 0, 1]
    assert span[4] == pytest.approx(1.999e6 + offset) and span[5] == pytest.approx(2.001e6 + offset)
    # and the timeline reads it: the kernels' own device time inside its span
    (ep,) = stream_timeline.episodes({"kernel_trace": rec})
    assert ep["own_device"] == pytest.approx(400.0, abs=60)  # the kernel and the copy, µs


def _replay_two(gil_switch: float | None) -> dict[int, float]:
    """Thread 1 queues a 30 µs kernel at 0 after 100 µs of Python (or at once, without a
    lock); thread 0, 1 µs of Python later, queues 10 µs and waits for it."""
    import simpy

    Step = driver_lock_replay.Step
    env = simpy.Environment()
    gil = pipeline_replay.Gil(env, gil_switch) if gil_switch else None
    r = pipeline_replay.Replay(env, gil, wake=50.0)
    other = [Step(100.0 if gil else 0.0, "launch", 30.0), Step(0.0, "end")]
    target = [Step(1.0, "launch", 10.0), Step(0.0, "sync"), Step(0.0, "end")]
    p1 = env.process(r.run(other, 1))
    p0 = env.process(r.run(target, 0))
    env.run(until=env.all_of([p0, p1]))
    return {0: p0.value, 1: p1.value}


def test_a_sync_on_the_one_stream_waits_for_the_other_threads_work_queued_ahead():
    # the other's 30 µs kernel runs 0-30, ours 30-40: we wait 29 µs for its work
    assert _replay_two(None)[0] == pytest.approx(40.0)


def test_the_interpreter_lock_holds_a_launch_back_until_the_holder_must_drop_it():
    # the other holds the lock in 100 µs of Python; after a 20 µs switch interval it must
    # drop it: our 1 µs of Python runs 20-21, our kernel 21-31 on an idle device, and the
    # sync returns before the wake-up, so we keep the lock to the end
    spans = _replay_two(gil_switch=20.0)
    assert spans[0] == pytest.approx(31.0)
    # the other gets it back at 31 and runs its last 80 µs of Python: 111, then its
    # kernel (queued, not waited for)
    assert spans[1] == pytest.approx(111.0)
