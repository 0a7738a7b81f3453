"""experiments/stage_overlap.py: a stage's spans read against the stages that overlapped
them, on spans whose stretch is known."""

from __future__ import annotations

import pytest
from conftest import load_experiment

stage_overlap = load_experiment("stage_overlap")


def test_a_stretch_made_by_one_neighbour_is_read_back_as_that_neighbours():
    # prep takes 100 ms alone and 50% longer for a whole span beside a synthesis: each
    # span overlapped by a synthesis for a share f of it lasts 100 (1 + 0.5 f) ms
    alone, spans = 0.1, []
    # per prep span, the shares of it each overlapping synthesis covered: two syntheses
    # over the whole span count as 2.0
    cases = ((), (0.25,), (0.5,), (1.0,), (1.0, 1.0))
    for i, shares in enumerate(cases):
        t0, d = 10.0 * i, alone * (1 + 0.5 * sum(shares))
        spans.append([i, 0, "prep", 0, t0, t0 + d])
        spans += [[i, 1 + k, "synthesis", None, t0, t0 + share * d] for k, share in enumerate(shares)]
        spans.append([i, 9, "kernels", 0, t0 + d + 1.0, t0 + d + 2.0])  # after it: no overlap
    rows = stage_overlap.overlaps(spans, "prep")
    assert [round(o[0], 6) for _, _, o in rows] == [0.0, 0.25, 0.5, 1.0, 2.0]
    assert all(o[stage_overlap.STAGES.index("kernels")] == 0 for _, _, o in rows)
    coef, r2 = stage_overlap.fit(rows, alone)
    assert coef[stage_overlap.STAGES.index("synthesis")] == pytest.approx(0.5)
    assert r2 == pytest.approx(1.0)
    assert len(rows) == len(cases)
