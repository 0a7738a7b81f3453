"""The caching device pool (simgpu.devicepool), as CuPy's pool behaves under a cap:
worked by hand, then as properties against the exact ledger.  The first case is the one
tests/test_groth16_gpu.py::test_a_cap_counts_the_free_part_of_a_split_block runs on the
card."""

from __future__ import annotations

import pytest
from conftest import simulate, tiny_profile
from hypothesis import given, settings
from hypothesis import strategies as st

from simgpu.config import PipelineConfig
from simgpu.devicepool import UNIT, CachingPool, cut, held_before, holders, replay
from simgpu.errors import UserError, VramExhausted
from simgpu.ledger import vram_ledger
from simgpu.model.sim import SimRuntime

MiB = 1 << 20
GiB = 1 << 30


def test_the_free_rest_of_a_split_block_counts_against_the_cap():
    """96 MiB cap: a 64 MiB block freed, 8 MiB cut from it; 60 MiB fits beside the 8 MiB
    of arrays (88 free) but not in the pool: the block's 56 MiB rest is too short, the
    block is not wholly free so it cannot go back, and a new block would pass the cap."""
    pool = CachingPool(96 * MiB)
    big = pool.malloc(64 * MiB)
    pool.free(big)
    small = pool.malloc(8 * MiB)
    assert pool.reserved == 64 * MiB and pool.cached == 56 * MiB
    assert pool.malloc(60 * MiB) is None
    pool.free(small)  # the block is whole again: its 64 MiB serve 60 without a new block
    assert pool.malloc(60 * MiB) is not None and pool.reserved == 64 * MiB


def test_a_refusal_says_how_much_is_free_only_in_split_blocks():
    """The first case through a ledger, as the model books it: the 60 MiB refused with 32
    MiB free under the cap and 56 MiB more free in the block the 8 MiB array splits.  The
    report tells the two apart, where it would otherwise count the 56 as resident."""
    from simgpu.report.explain import tell

    led = vram_ledger(0, 96 * MiB, allocator=CachingPool(96 * MiB))
    led.alloc(64 * MiB, "h_msm").release()
    led.alloc(8 * MiB, "b_g2_msm", stage="b_g2_msm", worker="gpu0.w0", proof=0, partition=0)
    with pytest.raises(VramExhausted) as e:
        led.alloc(60 * MiB, "h_msm", stage="kernels", worker="gpu0.w1", proof=1, partition=0)
    err = e.value
    assert (err.free, err.cached) == (32 * MiB, 56 * MiB)
    assert str(err).endswith("free 32.00 MiB of 96.00 MiB (56.00 MiB more free in split blocks)")
    o = err.as_dict() | {"t": 1.0}
    lines = tell(o)
    assert "(56.00 MiB free only in split blocks), 28.00 MiB short." in lines[0]
    assert lines[-1].startswith("It was not short of bytes: 88.00 MiB were free in all, 56.00 MiB of it")


def test_wholly_free_blocks_go_back_when_a_new_one_would_pass_the_cap():
    pool = CachingPool(96 * MiB)
    pool.free(pool.malloc(64 * MiB))
    assert pool.malloc(90 * MiB) is not None  # the 64 MiB block given back first
    assert pool.reserved == 90 * MiB and pool.cached == 0


def test_best_fit_takes_the_shortest_free_stretch_and_merges_neighbours():
    pool = CachingPool(1 << 40)
    a, b, c = pool.malloc(10 * MiB), pool.malloc(4 * MiB), pool.malloc(6 * MiB)  # three blocks
    pool.free(a)
    pool.free(c)
    got = pool.malloc(5 * MiB)
    assert got.block == c.block  # 6 MiB is the shortest stretch that fits 5
    pool.free(got)
    assert [x.size for x in pool._blocks[c.block]] == [6 * MiB]  # merged back whole
    assert pool.malloc(1).size == UNIT  # rounded up as CuPy rounds
    pool.free(b)


def test_a_replayed_trace_refuses_where_the_card_refused():
    """A real trace's rows (t, thread, stage, op, bytes, address, in arrays, in all) as
    CupyDevice records them: the split-block case of the first test, with the card's
    refusal (address 0), a flush and the retry.  The model pool follows it row by row."""
    rows = [
        (0.0, "w0", "kernels", "malloc", 64 * MiB, 0xA000, 64 * MiB, 64 * MiB),
        (0.1, "w0", "kernels", "free", 64 * MiB, 0xA000, 0, 64 * MiB),
        (0.2, "w1", "prestage", "malloc", 8 * MiB, 0xA000, 8 * MiB, 64 * MiB),
        (0.3, "w0", "kernels", "malloc", 60 * MiB, 0, 8 * MiB, 64 * MiB),
        (0.3, "w0", "", "flush", 0, 0, 8 * MiB, 64 * MiB),
        (0.3, "w0", "kernels", "malloc", 60 * MiB, 0, 8 * MiB, 64 * MiB),
        (0.4, "w1", "free", "free", 8 * MiB, 0xA000, 0, 64 * MiB),
        (0.5, "w0", "kernels", "malloc", 60 * MiB, 0xA000, 60 * MiB, 64 * MiB),
        (0.6, "w0", "free", "free", 4 * MiB, 0xF000, 60 * MiB, 64 * MiB),  # older than the trace
    ]
    got = replay(rows, 96 * MiB)
    assert got.disagree == []
    assert got.reserved == [64 * MiB] * len(rows)
    assert got.cached[:3] == [0, 64 * MiB, 56 * MiB]
    assert got.cached[-1] == 4 * MiB  # the 60 MiB array in the merged block's first part


def test_a_replay_names_the_rows_the_model_gets_otherwise():
    """The same card refusal replayed under a cap twice as large: the model would have
    served it (a new 60 MiB block fits), so that row disagrees."""
    rows = [
        (0.0, "w0", "kernels", "malloc", 64 * MiB, 0xA000, 64 * MiB, 64 * MiB),
        (0.1, "w0", "kernels", "free", 64 * MiB, 0xA000, 0, 64 * MiB),
        (0.2, "w1", "prestage", "malloc", 8 * MiB, 0xA000, 8 * MiB, 64 * MiB),
        (0.3, "w0", "kernels", "malloc", 60 * MiB, 0, 8 * MiB, 64 * MiB),
    ]
    got = replay(rows, 192 * MiB)
    assert got.disagree == [3]
    assert got.reserved[-1] == 64 * MiB  # the refused array was never made


def test_the_holders_at_a_row_are_the_live_arrays_by_thread_and_stage():
    """Just before the refused row of the trace above: w1's prestage holds its 8 MiB, w0's
    64 MiB was freed; the refused request (address 0) and a free of an array older than
    the trace count for nobody."""
    rows = [
        (0.0, "w0", "kernels", "malloc", 64 * MiB, 0xA000, 64 * MiB, 64 * MiB),
        (0.1, "w0", "kernels", "free", 64 * MiB, 0xA000, 0, 64 * MiB),
        (0.2, "w1", "prestage", "malloc", 8 * MiB, 0xA000, 8 * MiB, 64 * MiB),
        (0.25, "w1", "prestage", "malloc", 2 * MiB, 0xB000, 10 * MiB, 64 * MiB),
        (0.26, "w0", "free", "free", 4 * MiB, 0xF000, 10 * MiB, 64 * MiB),
        (0.3, "w0", "kernels", "malloc", 60 * MiB, 0, 10 * MiB, 64 * MiB),
    ]
    assert holders(rows, 5) == {("w1", "prestage"): 10 * MiB}
    assert holders(rows, 1) == {("w0", "kernels"): 64 * MiB}
    assert holders(rows + [rows[5]], 7) == {("w1", "prestage"): 10 * MiB}
    # an address asked again before its free was seen holds the later array only
    again = (0.27, "w0", "kernels", "malloc", 1 * MiB, 0xB000, 9 * MiB, 64 * MiB)
    assert holders(rows[:5] + [again], 6) == {("w1", "prestage"): 8 * MiB, ("w0", "kernels"): 1 * MiB}


def test_what_the_pool_held_before_its_trace_is_the_first_rows_total_less_its_own_growth():
    """A trace that opens on a 64 MiB growth with 100 MiB in the pool held 36 before it;
    one that opens on a malloc served from the cache held its whole total."""
    grow = (0.0, "w0", "kernels", "grow", 64 * MiB, 0xA000, 36 * MiB, 100 * MiB)
    served = (0.0, "w0", "kernels", "malloc", 8 * MiB, 0xB000, 44 * MiB, 100 * MiB)
    assert held_before([grow, served]) == 36 * MiB
    assert held_before([served]) == 100 * MiB


def test_a_ledger_with_the_pool_refuses_and_names_what_the_cap_has_left():
    led = vram_ledger(0, 100 * MiB, 4 * MiB, allocator=CachingPool(96 * MiB))
    led.alloc(64 * MiB, "big").release()
    led.alloc(8 * MiB, "small")
    assert led.live == 8 * MiB and led.free == 32 * MiB  # 96 less the 64 MiB block
    with pytest.raises(VramExhausted) as e:
        led.alloc(60 * MiB, "more")
    assert e.value.free == 32 * MiB and e.value.requested == 60 * MiB
    assert [h["buffer"] for h in e.value.holders] == ["small"]


def test_the_model_puts_the_pool_under_a_cap_only():
    """Uncapped, a caching pool grows into the whole card and hands its cache out again,
    so the run is the exact ledger's; capped, the device's ledger allocates through a
    pool whose limit is the cap less what is resident (1 GiB on tiny)."""
    caching = tiny_profile(hardware={"vram_pool": "caching"})
    cfg = PipelineConfig().with_overrides(proofs=1, concurrency=1)
    wl = caching.workload()
    assert SimRuntime(caching, cfg, wl).vram[0].allocator is None
    capped = SimRuntime(caching, cfg.with_overrides(vram=6 * GiB), wl).vram[0].allocator
    assert isinstance(capped, CachingPool) and capped.limit == 5 * GiB
    _, s_exact = simulate(tiny_profile(), "single-lock", proofs=2, concurrency=2)
    _, s_caching = simulate(caching, "single-lock", proofs=2, concurrency=2)
    assert s_caching.makespan == s_exact.makespan and s_caching.completed == 2


def test_a_buffer_cut_into_arrays_splits_the_pool_otherwise():
    """The first test's bytes, but the 64 MiB buffer allocated as two 32 MiB arrays (its
    [buffer_arrays]): two blocks.  The 8 MiB array is cut from one of them, the other is
    wholly free again and goes back, and the 60 MiB that one array's block refused fits."""
    led = vram_ledger(0, 100 * MiB, 4 * MiB, allocator=CachingPool(96 * MiB))
    whole = led.alloc(64 * MiB, "big", parts=(0.5, 0.5))
    assert len(whole.chunk) == 2 and led.allocator.reserved == 64 * MiB
    whole.release()
    led.alloc(8 * MiB, "small")
    more = led.alloc(60 * MiB, "more")
    assert led.allocator.reserved == 32 * MiB + 60 * MiB and led.live == 68 * MiB
    more.release()


def test_the_arrays_before_the_one_refused_count_in_the_peak():
    """96 MiB cap, 40 MiB held: a 64 MiB buffer as two 32 MiB arrays gets its first array
    (72 MiB reserved) and not its second (104 would pass the cap).  The card's first array
    was live when the second failed, so the peak holds it; nothing stays booked."""
    led = vram_ledger(0, 100 * MiB, 4 * MiB, allocator=CachingPool(96 * MiB))
    led.alloc(40 * MiB, "held")
    with pytest.raises(VramExhausted):
        led.alloc(64 * MiB, "big", parts=(0.5, 0.5))
    assert led.peak == 4 * MiB + 40 * MiB + 32 * MiB
    assert led.live == 40 * MiB and led.allocator.reserved == 72 * MiB  # the block stays cached


def test_a_call_s_temporaries_go_back_before_the_flush_and_are_retried_whole():
    """125 MiB cap, 40 MiB held, and a 30 MiB block cached (wholly free).  An MSM's
    temporaries, 20 then 60 MiB: the 20 is cut from the cached block; the 60 would take
    the pool to 130 MiB.  Array by array (a staging batch and an index, each its own
    guarded allocation) the flush finds no block wholly free, the 20 sitting in the
    cached one, and the buffer is refused.  As one call (the prover's _guarded around an
    MSM) the refusal unwinds the call first: its 20 goes back, the flush then gives the
    30 MiB block back (40 reserved), and the retry fits both (120 of 125)."""
    for whole, fits in ((False, False), (True, True)):
        led = vram_ledger(0, 125 * MiB, 0, allocator=CachingPool(125 * MiB))
        led.alloc(40 * MiB, "held")
        led.alloc(30 * MiB, "earlier").release()
        assert led.allocator.reserved == 70 * MiB and led.allocator.cached == 30 * MiB
        if fits:
            a = led.alloc(80 * MiB, "msm", parts=(0.25, 0.75), whole=whole)
            assert led.allocator.reserved == 120 * MiB and led.live == 120 * MiB
            a.release()
        else:
            with pytest.raises(VramExhausted):
                led.alloc(80 * MiB, "msm", parts=(0.25, 0.75), whole=whole)
            assert led.live == 40 * MiB and led.allocator.reserved == 70 * MiB


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.booleans(),
            st.integers(1, 48),
            st.lists(st.integers(1, 9), min_size=1, max_size=5),
            st.booleans(),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_a_buffer_in_arrays_is_all_or_nothing_and_never_passes_the_cap(ops):
    """Random buffers cut into random arrays, allocated (array by array, or as one call's
    temporaries retried whole) and freed through a ledger with the pool: each is booked
    whole or not at all (a refusal gives its first arrays back), the pool's bytes stay
    within the cap and above what its arrays hold, and the peak is at least every total
    the ledger booked."""
    led = vram_ledger(0, 80 * MiB, 0, allocator=CachingPool(64 * MiB))
    held: list = []
    for alloc, mib, weights, whole in ops:
        if alloc or not held:
            parts = tuple(w / sum(weights) for w in weights)
            before = (led.used, led.allocator.reserved - led.allocator.cached)
            try:
                a = led.alloc(mib * MiB, "buf", parts=parts, whole=whole)
            except VramExhausted:
                assert (led.used, led.allocator.reserved - led.allocator.cached) == before
            else:
                assert len(a.chunk) == len(parts) and sum(c.size for c in a.chunk) >= mib * MiB
                held.append(a)
        else:
            held.pop(mib % len(held)).release()
        pool = led.allocator
        in_arrays = sum(c.size for a in held for c in a.chunk)
        assert in_arrays <= pool.reserved <= pool.limit
        assert pool.cached == pool.reserved - in_arrays
        assert led.peak >= led.used == sum(a.nbytes for a in held)


def test_a_profile_cuts_a_buffer_into_the_arrays_it_names():
    """[buffer_arrays] scratch = [1, 3]: the kernels' allocation of scratch carries the
    fractions (normalised) to the device pool, and the exact ledger still books it whole."""
    prof = tiny_profile(buffer_arrays={"scratch": [1, 3]})
    plan = prof.resolve(prof.workload().constraints).plan("kernels")
    steps = [s for s in plan.steps if s.buffer == "scratch" and s.op == "alloc"]
    assert [s.parts for s in steps] == [(0.25, 0.75)]
    assert cut(GiB, (0.25, 0.75)) == [GiB // 4, 3 * GiB // 4]
    _, exact = simulate(tiny_profile(), "single-lock", proofs=1)
    _, arrays = simulate(prof, "single-lock", proofs=1)
    assert arrays.makespan == exact.makespan and arrays.peak_vram == exact.peak_vram


def test_buffer_arrays_measured_at_sizes_use_the_nearest():
    """As calibrate writes them: fractions per measured size (an MSM's buckets do not grow
    with it, so the grain differs by size); a size between takes the nearest on a log scale."""
    prof = tiny_profile(buffer_arrays={"scratch": {"points": [[1 << 10, [1, 1]], [1 << 20, [1, 3]]]}})

    def parts(n: int) -> tuple[float, ...]:
        return next(s.parts for s in prof.resolve(n).plan("kernels").steps if s.buffer == "scratch")

    assert parts(1 << 11) == (0.5, 0.5)
    assert parts(1 << 19) == parts(1 << 24) == (0.25, 0.75)


@pytest.mark.parametrize(
    "table",
    [
        {"nothing": [1]},
        {"host_abc": [1, 1]},
        {"scratch": []},
        {"scratch": [1, -1]},
        {"scratch": "half"},
        {"scratch": {"points": [[1024, "half"]]}},
        {"scratch": {"points": [["x", [1]]]}},
        {"scratch": {"points": []}},
        {"scratch": {"law": "1"}},
    ],
)
def test_bad_buffer_arrays_are_a_one_line_error(table):
    with pytest.raises(UserError, match=r"\[buffer_arrays\]"):
        tiny_profile(buffer_arrays=table)


@pytest.mark.parametrize("value", ["magic", 3, ["caching"]])
def test_an_unknown_pool_is_a_one_line_error(value):
    with pytest.raises(UserError, match="vram_pool must be one of exact, caching"):
        tiny_profile(hardware={"vram_pool": value})


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 48)), min_size=1, max_size=60))
def test_the_pool_never_admits_what_the_cap_cannot_hold(ops):
    """Random allocations (MiB) and frees: the pool's reserved bytes stay within its
    limit and above what its arrays hold, and it never admits an allocation the exact
    ledger would refuse (caching can only cost room); `fits` foretells every malloc."""
    limit = 64 * MiB
    pool = CachingPool(limit)
    held: list = []
    for alloc, size in ops:
        if alloc or not held:
            will = pool.fits(size * MiB)
            got = pool.malloc(size * MiB)
            assert will == (got is not None)
            live = sum(c.size for c in held)
            if got is not None:
                assert live + got.size <= limit
                held.append(got)
        else:
            pool.free(held.pop(size % len(held)))
        live = sum(c.size for c in held)
        assert live <= pool.reserved <= limit
        assert pool.cached == pool.reserved - live
    for c in held:
        pool.free(c)
    pool.release_free_blocks()
    assert pool.reserved == 0
