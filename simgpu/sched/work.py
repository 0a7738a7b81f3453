"""The units of work the daemon moves around: proofs, partitions, GPU workers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(eq=False)
class Proof:
    """One proof request (a sector's PoRep C2): `partitions` independent circuits."""

    id: int
    partitions: int
    constraints: int
    submitted_at: float = 0.0
    started: bool = False  # submitted to the daemon (the run may stop before it is)
    finished_at: float | None = None
    failed: bool = False
    reason: str = ""

    @property
    def label(self) -> str:
        return f"proof {self.id}"


@dataclass(eq=False)
class Partition:
    """One Groth16 circuit of a proof, from synthesis to its 192-byte proof.

    `host` is the handle on its data in host RAM (synthesis output onward) until freed;
    `done` is the event the partition's owner waits on: it succeeds with the partition
    proof or fails with the reason.
    """

    proof: Proof
    index: int
    constraints: int
    done: Any = None
    host: Any = None
    attempts: int = 0

    @property
    def label(self) -> str:
        return f"proof {self.proof.id} partition {self.index}"

    def complete(self, result: Any = None) -> None:
        """The partition's proof is ready (unless it already ended: the first end wins)."""
        self.done.settle(result)

    def fail(self, error: BaseException) -> None:
        """The partition cannot complete; `error` says why (unless it already ended)."""
        self.done.settle(error=error)


@dataclass(frozen=True)
class Worker:
    """A GPU worker: a loop on one device that takes partitions from the GPU queue."""

    device: int
    index: int

    @property
    def name(self) -> str:
        return f"gpu{self.device}.w{self.index}"
