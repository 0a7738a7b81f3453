"""What the plot draws beside the stages: lock waits (hatched) and holds on the worker
lanes, and on each OOM holder's lane the span its buffers were live."""

from __future__ import annotations

import pytest
from conftest import simulate, tiny_profile

from simgpu.report.document import Meta
from simgpu.report.plot import live_spans, lock_waits, write_plot

GiB = 1 << 30
ONE_PROOF = {"proofs": 1, "concurrency": 1}


def test_lock_waits_are_drawn_from_the_acquisitions():
    # tiny single-lock (test_designs): w1 waits for the lock 1.5 -> 2.75 while w0 holds it
    result, _ = simulate(tiny_profile(), "single-lock", **ONE_PROOF)
    (wait,) = lock_waits(result.records)
    assert (wait["lock"], wait["worker"]) == ("gpu0/gpu", "gpu0.w1")
    assert (wait["start"], wait["end"]) == (pytest.approx(1.5), pytest.approx(2.75))


def test_an_ooms_holders_are_framed_from_their_allocation_to_the_oom(tmp_path):
    # tiny two-lock at 4.5 GiB: w0's d_a, pre-staged at 1.5, is live when w1 runs out at 2.75
    result, s = simulate(tiny_profile(hardware={"vram": "4.5GiB"}), "two-lock", **ONE_PROOF)
    (oom,) = s.oom_events
    assert live_spans(oom) == [("gpu0.w0", pytest.approx(1.5), pytest.approx(2.75), GiB)]
    path = tmp_path / "p.png"
    write_plot(path, result, Meta("predict", "two-lock", "tiny", {}, {}))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
