"""Every kernel and copy a real run puts on the GPU, with the driver thread that launched
it and the stage that thread was in (issue #19: how the one stream interleaves workers).

The stage spans of a run say what ran beside what on the host's clock; they cannot say
how the device served two workers' kernels while both were inside a stage.  CUPTI can:
it timestamps every kernel, copy and memset on the device, and every driver call on the
thread that made it, and a launch's correlation id ties the two.  PyTorch's profiler
(on the GPU machine's image, not a dependency of simgpu) is the CUPTI client used here;
it sees CuPy's launches as well, because CUPTI's activity records are per process.

    with KernelTrace(executor) as kt:
        RealRuntime(executor, cfg, wl).run(design)
    record = kt.record()       # JSON-able: names, ops, driver calls, stage spans

The record's clock is microseconds on CUPTI's timebase; `offset_us` maps the host's
`time.perf_counter()` onto it (marker synchronizes before and after the run), so the stage
spans, taken on perf_counter, are given on CUPTI's clock too.  CUPTI adds a few
microseconds per launch: a traced run's timings are not the untraced run's, its order is.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


class KernelTrace:
    """Trace the device activity of one run of `executor` (a ProverExecutor)."""

    def __init__(self, executor: Any, sample_period: float | None = None) -> None:
        """sample_period: also sample every thread's Python frame this often
        (experiments/py_sampler.py), to tell a host stretch's Python from its wait."""
        self.ex = executor
        self._sampler: Any = None
        if sample_period:
            from py_sampler import PySampler  # beside this script

            self._sampler = PySampler(sample_period)
        self.spans: list[list[Any]] = []  # [native tid, stage, proof, index, t0, t1] (perf_counter s)
        self._lock = threading.Lock()
        self._orig: Any = None
        self._prof: Any = None
        self._markers: list[tuple[float, float]] = []
        self._trace: dict[str, Any] | None = None

    def __enter__(self) -> KernelTrace:
        import torch  # noqa: F401  (the GPU machine's image holds it; CUPTI through kineto)
        from torch.profiler import ProfilerActivity, profile

        orig = self.ex.run_stage
        self._orig = orig

        def run_stage(name: str, part: Any, device: Any, inputs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return orig(name, part, device, inputs)
            finally:
                t1 = time.perf_counter()
                with self._lock:
                    self.spans.append([threading.get_native_id(), name, part.proof.id, part.index, t0, t1])

        self.ex.run_stage = run_stage
        self._prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        self._prof.__enter__()
        self._mark()
        if self._sampler is not None:
            self._sampler.start()
        return self

    def _mark(self) -> None:
        """Five device synchronizes from this thread, each bracketed on perf_counter:
        their calls on CUPTI's clock give the offset between the clocks."""
        import cupy as cp

        for _ in range(5):
            t0 = time.perf_counter()
            cp.cuda.runtime.deviceSynchronize()
            t1 = time.perf_counter()
            self._markers.append((t0, t1))

    def __exit__(self, *exc: Any) -> None:
        if self._sampler is not None:
            self._sampler.stop()
        self._mark()
        self._prof.__exit__(*exc)
        del self.ex.run_stage  # the executor's own method again
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "trace.json"
            self._prof.export_chrome_trace(str(path))
            self._trace = json.loads(path.read_text())

    def record(self) -> dict[str, Any]:
        """The run's device activity, compacted: `names` (kernel and call names), `ops`
        ([name, category, start_us, dur_us, stream, launching tid, launch_us] per kernel,
        copy or memset), `calls` ([name, tid, start_us, dur_us] per runtime or driver call),
        `spans` ([tid, stage, proof, index, start_us, end_us] per stage run), `offset_us`,
        and with a sampler `py_samples` (PySampler.record, its times in µs as the spans')."""
        assert self._trace is not None, "record() after the traced run"
        events = self._trace["traceEvents"]
        api = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver") and e.get("ph") == "X"]
        by_corr = {e["args"]["correlation"]: e for e in api if "correlation" in e.get("args", {})}
        names: dict[str, int] = {}

        def nid(name: str) -> int:
            return names.setdefault(name, len(names))

        ops = []
        for e in events:
            if e.get("cat") not in DEVICE_CATS or e.get("ph") != "X":
                continue
            launch = by_corr.get(e.get("args", {}).get("correlation"))
            ops.append(
                [
                    nid(e["name"]),
                    DEVICE_CATS.index(e["cat"]),
                    round(float(e["ts"]), 3),
                    round(float(e["dur"]), 3),
                    e.get("args", {}).get("stream"),
                    launch["tid"] if launch else None,
                    round(float(launch["ts"]), 3) if launch else None,
                ]
            )
        ops.sort(key=lambda o: o[2])
        # every runtime and driver call, launches included: a thread's time inside the
        # driver is what tells a call held up there from host work in Python
        calls = [[nid(e["name"]), e["tid"], round(float(e["ts"]), 3), round(float(e["dur"]), 3)] for e in api]
        offset = self._offset(api)
        spans = [
            [tid, stage, proof, index, round(t0 * 1e6 + offset, 3), round(t1 * 1e6 + offset, 3)]
            for tid, stage, proof, index, t0, t1 in self.spans
        ]
        out: dict[str, Any] = {
            "names": list(names),
            "categories": list(DEVICE_CATS),
            "ops": ops,
            "calls": calls,
            "spans": spans,
            "offset_us": offset,
            "markers": self._markers,
        }
        if self._sampler is not None:
            # the samples on the spans' clock, so one alignment serves both
            py = self._sampler.record()
            py["samples"] = [[round(t * 1e6 + offset, 1), *rest] for t, *rest in py["samples"]]
            py["gc"] = [[round(t * 1e6 + offset, 1), *rest] for t, *rest in py.get("gc", [])]
            out["py_samples"] = py
        return out

    def _offset(self, api: list[dict[str, Any]]) -> float:
        """CUPTI's clock minus perf_counter's, in µs: each marker's device synchronize
        against the perf_counter bracket it ran in (their midpoints).  The profiler names
        threads its own way, so the markers are found by their call (the first five and
        the last five device synchronizes of the run), not by this thread's id; the
        record keeps the brackets too, and experiments/stream_timeline.py aligns the
        spans from the launches themselves."""
        syncs = sorted((e for e in api if e["name"] == "cudaDeviceSynchronize"), key=lambda e: e["ts"])
        if len(syncs) < len(self._markers):
            return 0.0
        pairs = list(zip(syncs[:5] + syncs[-5:], self._markers, strict=True))
        return statistics.median(
            float(e["ts"]) + float(e["dur"]) / 2 - (t0 + t1) / 2 * 1e6 for e, (t0, t1) in pairs
        )
