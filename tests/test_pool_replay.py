"""experiments/pool_replay.py: a card's first refusal read from its trace, worked by hand."""

from __future__ import annotations

from conftest import load_experiment

pool_replay = load_experiment("pool_replay")
MiB = 1 << 20


def test_a_first_refusal_names_the_request_the_pool_and_who_held_the_arrays() -> None:
    """Rows as CupyDevice records them (t, thread, stage, op, bytes, address, in arrays,
    reserved).  w0's prestage frees a 6 MiB block; w1's b_g2_msm takes 2 of it, w0 3
    more, and w1's next 1.5 grows a 4 MiB block of its own.  w0's kernels then ask 2
    MiB: 6.5 MiB are in arrays under 10 reserved, 3.5 cached, but only in pieces of 1
    and 2.5 MiB, and the card refuses it (address 0)."""
    rows = [
        (0.0, "w0", "prestage", "grow", 6 * MiB, 1, 0, 6 * MiB),
        (0.0, "w0", "prestage", "malloc", 6 * MiB, 1, 6 * MiB, 6 * MiB),
        (0.1, "w0", "prestage", "free", 6 * MiB, 1, 0, 6 * MiB),
        (0.2, "w1", "b_g2_msm", "malloc", 2 * MiB, 2, 2 * MiB, 6 * MiB),
        (0.3, "w0", "prestage", "malloc", 3 * MiB, 3, 5 * MiB, 6 * MiB),
        (0.4, "w1", "b_g2_msm", "grow", 4 * MiB, 4, 5 * MiB, 10 * MiB),
        (0.4, "w1", "b_g2_msm", "malloc", int(1.5 * MiB), 4, int(6.5 * MiB), 10 * MiB),
        (0.5, "w0", "kernels", "malloc", 2 * MiB, 0, int(6.5 * MiB), 10 * MiB),
    ]
    assert pool_replay.first_refusal(rows, 7, "I1 (a.json)") == (
        "I1 (a.json): row 7, w0 kernels asks 2.0 MiB; 6.5 MiB in arrays, 3.5 cached, 10.0 reserved; "
        "held (MiB): w1 b_g2_msm 3.5; w0 prestage 3.0; the pool before the trace 0.0"
    )
