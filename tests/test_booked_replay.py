"""experiments/booked_replay.py: a card's trace replayed as if b_g2_msm had booked its
staging whole, worked by hand on a six-row trace under a 9 MiB cap."""

from __future__ import annotations

from conftest import load_experiment

booked_replay = load_experiment("booked_replay")
MiB = 1 << 20


def row(thread: str, stage: str, op: str, mib: float, ptr: int) -> list:
    return [0.0, thread, stage, op, int(mib * MiB), ptr, 0, 0]


# w0's prestage leaves a free 6 MiB block; w1's b_g2_msm takes 2 of it for its bases
# batch; w0 takes 3 more, so w1's gathered points (1.5) grow a block of their own, and
# w0's kernels (2) find neither room in a block nor under the cap: the card refuses them.
TRACE = [
    row("w0", "prestage", "malloc", 6, 1),
    row("w0", "prestage", "free", 6, 1),
    row("w1", "b_g2_msm", "malloc", 2, 2),
    row("w0", "prestage", "malloc", 3, 3),
    row("w1", "b_g2_msm", "malloc", 1.5, 4),
    row("w0", "kernels", "malloc", 2, 0),
]


def test_the_booked_order_moves_a_calls_next_allocations_up_to_its_bases_batch() -> None:
    assert booked_replay.batch_size(TRACE) == 2 * MiB
    got = booked_replay.booked(TRACE, 2 * MiB)
    assert got == [TRACE[0], TRACE[1], TRACE[2], TRACE[4], TRACE[3], TRACE[5]]


def test_the_refusal_goes_away_when_the_points_come_with_the_batch() -> None:
    """As asked, the model's pool refuses the kernels' 2 MiB where the card did (7.5 MiB
    in blocks, a new 2 MiB block would pass 9).  Booked, the points take 1.5 of the 4
    MiB the batch left, the prestage grows a 3 MiB block (9 in all), and the kernels fit
    in the 2.5 MiB still free in the first block."""
    limit = 9 * MiB
    assert booked_replay.first_refusal(TRACE, limit) == (5, 2 * MiB)
    assert booked_replay.first_refusal(booked_replay.booked(TRACE, 2 * MiB), limit) is None


def test_a_booking_the_pool_cannot_serve_is_the_first_refusal() -> None:
    """Under 7 MiB the booked order needs a 3 MiB block beside the first 6: the model
    refuses the prestage the card served, and that row is the run's first refusal."""
    assert booked_replay.first_refusal(booked_replay.booked(TRACE, 2 * MiB), 7 * MiB) == (4, 3 * MiB)
