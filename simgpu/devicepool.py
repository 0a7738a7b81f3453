"""A caching device allocator, as CuPy's memory pool is one: where a capped card's bytes go
that no array holds.

Think of a cloakroom that buys its rails whole and cuts them to size.  A coat takes the
shortest free stretch of rail it fits on (best fit); what is left of that stretch stays
free beside it, on the same rail.  A rail goes back to the shop only when nothing hangs
on it at all, and only when the cloakroom runs out of room for a new one.  Under a cap
the room counted is every rail bought, so a coat can be turned away though the free
stretches, added up, are longer than it: they are on rails that something else still
hangs on.

That is CuPy's pool (`cupy.cuda.MemoryPool` on one stream): an allocation is served
from the smallest cached chunk at least its size, split when larger; a freed chunk merges
with the free chunks beside it in its block; a new block (cudaMalloc) is made only when
no cached chunk fits.  At its limit CuPy's malloc fails at once; the prover then gives
back the blocks that are wholly free (`free_all_blocks`, its flush:
simgpu.prover.cupy_device) and tries once more, and that pair is what `malloc` here is.
The ledger beside it (simgpu.ledger) keeps counting live bytes (what a peak reports);
this pool decides whether an allocation fits, and what the card has left (`reserved`
against the cap).  The model's runtime gives a capped device's ledger one
(simgpu.model.sim).  `replay` runs a real pool's trace (simgpu.prover.device.AllocTrace)
through it, row by row, to check it against the card.

A buffer of the profile reaches the pool as the arrays the prover cuts it into (its
``[buffer_arrays]``: `malloc_parts`), since the grain is what decides how blocks split:
the same bytes in fewer, larger arrays fragment differently.

Extension point: another allocator (an exact one: cudaMalloc per buffer; a pool with a
release threshold) is a class with the methods the ledger calls, `malloc_parts` (with
its `whole` keyword: whether a refusal retries the buffer's arrays together),
`free_parts` and `reserved`, named by a profile's ``[hardware] vram_pool``.
"""

from __future__ import annotations

from dataclasses import dataclass

#: CuPy rounds every allocation up to this many bytes.
UNIT = 512


@dataclass(eq=False, slots=True)
class Chunk:
    """A stretch of one block: `offset` and `size` in bytes, free or holding an array."""

    block: int
    offset: int
    size: int
    free: bool = False


class CachingPool:
    """Blocks bought whole and cut to size (see the module docstring).  `limit`: the
    bytes the pool may reserve in all (the cap less what is resident)."""

    def __init__(self, limit: int) -> None:
        self.limit = int(limit)
        self.reserved = 0  # bytes in blocks, free stretches included
        self._blocks: dict[int, list[Chunk]] = {}  # block -> its chunks by offset
        self._next_block = 0

    @property
    def cached(self) -> int:
        """Reserved bytes no array holds."""
        return sum(c.size for chunks in self._blocks.values() for c in chunks if c.free)

    def malloc(self, nbytes: int) -> Chunk | None:
        """A chunk for `nbytes`, or None where the cap leaves no room even after the
        wholly free blocks are given back."""
        size = _rounded(nbytes)
        chunk = self._serve(size)
        if chunk is None:
            self.release_free_blocks()
            chunk = self._serve(size)
        return chunk

    def _serve(self, size: int) -> Chunk | None:
        """CuPy's own malloc at its limit: the best-fitting free chunk, else a new block
        if the cap has room for it, else None at once (no flush)."""
        chunk = self._best_fit(size)
        if chunk is None:
            if self.reserved + size > self.limit:
                return None
            chunk = Chunk(self._next_block, 0, size, free=True)
            self._blocks[self._next_block] = [chunk]
            self._next_block += 1
            self.reserved += size
        return self._take(chunk, size)

    def fits(self, nbytes: int, release: bool = True) -> bool:
        """Whether `malloc(nbytes)` would succeed, changing nothing; with `release`
        False, whether it would without giving back the wholly free blocks (CuPy's own
        malloc, which at its limit fails at once: the giving back is the prover's flush)."""
        size = _rounded(nbytes)
        if self._best_fit(size) is not None or self.reserved + size <= self.limit:
            return True
        if not release:
            return False
        wholly_free = sum(self._blocks[b][0].size for b in self._wholly_free())
        return self.reserved - wholly_free + size <= self.limit

    def malloc_parts(
        self, nbytes: int, parts: tuple[float, ...] = (), *, whole: bool = False
    ) -> tuple[tuple[Chunk, ...] | None, int]:
        """`nbytes` as the arrays `parts` cuts it into (fractions, in allocation order; one
        array when empty): (a chunk each, the bytes), or, where one does not fit, (None,
        the bytes of the arrays served before it), those given back again: the prover's
        arrays before the one refused were live for a moment, and a peak counts them.

        How a refusal is retried follows the prover (simgpu.prover.cupy_device._guarded).
        Each array on its own (`whole` False: buffers the prover allocates one call at a
        time, a staging batch, an index) is tried, the cache flushed, and tried again.
        `whole` True: the arrays are one repeatable call's temporaries (an MSM's), so a
        refusal anywhere unwinds the call, its arrays served so far go back, then the
        flush, then the call once more, whole.  The order matters: the flush gives back
        only blocks nothing is in, and the call's own first arrays may be all that keeps
        a block from being wholly free (the forty-first lease's P, docs/validation-log.md).
        On a refusal the bytes returned are the most either attempt had served."""
        sizes = cut(nbytes, parts)
        reached = 0
        for attempt in range(2 if whole else 1):
            got: list[Chunk] = []
            for size in sizes:
                chunk = self._serve(_rounded(size)) if whole else self.malloc(size)
                if chunk is None:
                    break
                got.append(chunk)
            else:
                return tuple(got), int(nbytes)
            reached = max(reached, sum(sizes[: len(got)]))
            for c in reversed(got):
                self.free(c)
            if whole and attempt == 0:
                self.release_free_blocks()
        return None, reached

    def free_parts(self, chunks: tuple[Chunk, ...]) -> None:
        """Give back the chunks of one malloc_parts, in the order they were taken."""
        for c in chunks:
            self.free(c)

    def free(self, chunk: Chunk) -> None:
        """Give `chunk` back to its block, merged with the free chunks beside it."""
        chunks = self._blocks[chunk.block]
        i = chunks.index(chunk)
        chunk.free = True
        if i + 1 < len(chunks) and chunks[i + 1].free:
            chunk.size += chunks.pop(i + 1).size
        if i > 0 and chunks[i - 1].free:
            chunks[i - 1].size += chunks.pop(i).size

    def release_free_blocks(self) -> int:
        """Give back every block nothing is allocated in (free_all_blocks); the bytes."""
        freed = sum(self._blocks.pop(b)[0].size for b in self._wholly_free())
        self.reserved -= freed
        return freed

    def _wholly_free(self) -> list[int]:
        """The blocks nothing is allocated in."""
        return [b for b, chunks in self._blocks.items() if len(chunks) == 1 and chunks[0].free]

    def _best_fit(self, size: int) -> Chunk | None:
        """The smallest free chunk of at least `size` bytes (the oldest block first)."""
        best = None
        for chunks in self._blocks.values():
            for c in chunks:
                if c.free and c.size >= size and (best is None or c.size < best.size):
                    best = c
        return best

    def _take(self, chunk: Chunk, size: int) -> Chunk:
        """Allocate the first `size` bytes of free `chunk`; the rest stays free."""
        chunk.free = False
        if chunk.size > size:
            chunks = self._blocks[chunk.block]
            rest = Chunk(chunk.block, chunk.offset + size, chunk.size - size, free=True)
            chunks.insert(chunks.index(chunk) + 1, rest)
            chunk.size = size
        return chunk


def _rounded(nbytes: int) -> int:
    """The bytes CuPy's pool hands out for `nbytes`: a multiple of UNIT, at least one."""
    return max(UNIT, -(-int(nbytes) // UNIT) * UNIT)


def cut(nbytes: int, parts: tuple[float, ...] = ()) -> list[int]:
    """`nbytes` in the sizes `parts` (fractions summing to 1) cuts it into; the last takes
    the rounding, so they add up to `nbytes`."""
    if len(parts) < 2:
        return [int(nbytes)]
    sizes = [int(round(f * nbytes)) for f in parts[:-1]]
    return [*sizes, int(nbytes) - sum(sizes)]


@dataclass(slots=True)
class Replayed:
    """A model pool's state after each row of a replayed trace (`reserved[i]`, `cached[i]`),
    and the allocation rows whose outcome it gets otherwise than the real pool did
    (`disagree`: the model refused what the card served, or served what it refused)."""

    reserved: list[int]
    cached: list[int]
    disagree: list[int]


def held_before(rows: list) -> int:
    """What a real pool held before its trace began (the key's resident arrays): the
    first row's total less what that row itself added.  A trace's cap less this is the
    `limit` to replay it under."""
    first = rows[0]
    return int(first[7]) - (int(first[4]) if first[3] == "grow" else 0)


def holders(rows: list, upto: int) -> dict[tuple[str, str], int]:
    """Who holds the arrays a real trace has live just before row `upto`: bytes per
    (thread, stage), by the stage that asked for each array.  Arrays older than the trace
    are not in it (`held_before` counts them), and an address allocated again before its
    free was seen counts once, as `replay` reads it."""
    live: dict[int, tuple[str, str, int]] = {}
    for row in rows[:upto]:
        op, ptr = row[3], int(row[5])
        if op == "malloc" and ptr:
            live[ptr] = (row[1], row[2], int(row[4]))
        elif op == "free":
            live.pop(ptr, None)
    out: dict[tuple[str, str], int] = {}
    for thread, stage, nbytes in live.values():
        out[thread, stage] = out.get((thread, stage), 0) + nbytes
    return out


def replay(rows: list, limit: int, pool: type = CachingPool) -> Replayed:
    """Replay a device pool's real trace (simgpu.prover.device.AllocTrace rows: op, bytes
    and address at 3-5) through a model pool capped at `limit`, to compare the two row by
    row.  A malloc row at address 0 is an allocation the real pool refused; a "flush" row
    is the prover giving the cache back.  A free of an address the trace never allocated
    (an array older than the trace) is skipped, and an address allocated again before its
    free was seen (a free the thread-local hook missed) is freed first."""
    model = pool(limit)
    live: dict[int, Chunk] = {}
    out = Replayed([], [], [])
    for i, row in enumerate(rows):
        op, nbytes, ptr = row[3], int(row[4]), int(row[5])
        if op == "malloc":
            if ptr in live:
                model.free(live.pop(ptr))
            if ptr:  # the card served it
                chunk = model.malloc(nbytes)
                if chunk is None:
                    out.disagree.append(i)
                else:
                    live[ptr] = chunk
            elif model.fits(nbytes, release=False):  # the card refused it (at once, as CuPy does)
                out.disagree.append(i)
        elif op == "free" and ptr in live:
            model.free(live.pop(ptr))
        elif op == "flush":
            model.release_free_blocks()
        out.reserved.append(model.reserved)
        out.cached.append(model.cached)
    return out


#: ``[hardware] vram_pool`` values: "exact" (no pool: a buffer's bytes and nothing more,
#: as cudaMalloc per buffer) and the caching pools.
POOLS = {"caching": CachingPool}
