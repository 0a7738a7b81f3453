"""What prep hands the device stages: a partition's a, b, c and its split scalars.

Like a sorted mail tray: prep reads the witness once and files every scalar of the L, A
and B queries by value (zeros dropped, ones to be batch-added, the rest, the "tails", to
Pippenger), so the device stages and the memory plan (simgpu.prover.memory_plan, which
counts them) read the same trays.  The prep stage itself is simgpu.prover.groth16.prep.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from simgpu.prover import native
from simgpu.prover.circuits import CircuitSpec
from simgpu.prover.handoff import release_later


@dataclass
class QuerySplit:
    """The scalars of one MSM query split by value, positions relative to the query."""

    name: str
    length: int
    ones: np.ndarray  # int64, ascending: scalar == 1 (batch addition)
    tails: np.ndarray  # int64, ascending: scalar not in {0, 1} (Pippenger)
    tail_scalars: np.ndarray  # uint32 (len(tails), 8), standard form

    @classmethod
    def of(cls, name: str, scalars: np.ndarray) -> QuerySplit:
        """The split of a query's scalars given in full, in numpy (the reference of `query`)."""
        scalars = np.asarray(scalars, dtype=np.uint32)
        high_zero = ~scalars[:, 1:].any(axis=1)
        zero = high_zero & (scalars[:, 0] == 0)
        one = high_zero & (scalars[:, 0] == 1)
        tails = np.flatnonzero(~(zero | one))
        return cls(name, len(scalars), np.flatnonzero(one), tails, scalars[tails])

    @classmethod
    def query(cls, name: str, inputs: np.ndarray, aux: np.ndarray, index: np.ndarray | None) -> QuerySplit:
        """The split of the query whose scalars are z[index] (index None: every aux variable)
        for z = (inputs, aux), in one compiled pass that reads z through the index (no
        gathered copy of the query) and holds the interpreter lock only to start."""
        dense = index is None
        idx = np.zeros(0, np.uint32) if dense else np.ascontiguousarray(index, dtype=np.uint32)
        ones, tails, tail_scalars = native.split_query(inputs, aux, idx, dense)
        return cls(name, len(aux) if dense else len(idx), ones, tails, tail_scalars)

    @property
    def zeros(self) -> int:
        return self.length - len(self.ones) - len(self.tails)

    def batch(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ones, tails) positions inside rows [start, stop), relative to start, as int32,
        and the tails' scalars."""
        o0, o1 = np.searchsorted(self.ones, [start, stop])
        t0, t1 = np.searchsorted(self.tails, [start, stop])
        return (
            (self.ones[o0:o1] - start).astype(np.int32),
            (self.tails[t0:t1] - start).astype(np.int32),
            self.tail_scalars[t0:t1],
        )

    def count(self, start: int, stop: int) -> int:
        """How many rows of [start, stop) have a non-zero scalar (ones and tails): what
        `batch` returns, counted without building it."""
        o0, o1 = np.searchsorted(self.ones, [start, stop])
        t0, t1 = np.searchsorted(self.tails, [start, stop])
        return int(o1 - o0 + t1 - t0)

    def batch_maxima(self, batch: int) -> tuple[int, int]:
        """The largest number of ones and of tails in any batch of `batch` rows."""
        edges = np.arange(0, self.length + batch, batch)
        m1 = np.diff(np.searchsorted(self.ones, edges)).max(initial=0)
        m2 = np.diff(np.searchsorted(self.tails, edges)).max(initial=0)
        return int(m1), int(m2)

    def nbytes(self) -> int:
        return int(self.ones.nbytes + self.tails.nbytes + self.tail_scalars.nbytes)


@dataclass
class Prepared:
    """A partition ready for the device: the a, b, c vectors (until prestage uploads them)
    and the split scalars of the L, A and B queries (B serves both B1 and B2)."""

    spec: CircuitSpec
    partition_seed: int
    public_inputs: list[int]
    domain_size: int
    a: np.ndarray | None
    b: np.ndarray | None
    c: np.ndarray | None
    split_l: QuerySplit
    split_a: QuerySplit
    split_b: QuerySplit
    aux_bytes: int = 0
    #: the page-lock of a, b, c where they lie (Synthesized.abc_pin), let go with them
    abc_pin: Any = None

    def split(self, query: str) -> QuerySplit:
        """The split of a G1 query: l, a, or b1 (the B query's split)."""
        return {"l": self.split_l, "a": self.split_a, "b1": self.split_b, "b": self.split_b}[query]

    def release_host_abc(self) -> None:
        """Drop the host a, b, c (prestage does, once their copies are queued), on the
        releaser thread: they may be the last views of a received mapping, and their pin
        waits there for the copies before it unlocks them."""
        abc = (self.a, self.b, self.c, self.abc_pin)
        self.a = self.b = self.c = self.abc_pin = None
        release_later(*abc)

    @property
    def b_density(self) -> float:
        """Share of the variables in the B query."""
        return self.split_b.length / (len(self.public_inputs) + 1 + self.split_l.length)

    def host_bytes(self) -> dict[str, int]:
        abc = sum(int(x.nbytes) for x in (self.a, self.b, self.c) if x is not None)
        prep = self.split_l.nbytes() + self.split_a.nbytes() + self.split_b.nbytes()
        return {"abc": abc, "prep": prep}
