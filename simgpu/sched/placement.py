"""Placement: which GPU a partition that is ready for the GPU goes to.

The daemon's policy is `[gpus] placement` (`--placement`).  The same policy object runs
in the model and in the real runtime, so a prediction and a run place alike.

* ``shared-queue`` (the default, and what cuzk does): every GPU worker of every device
  takes the next partition off the one GPU queue, so a partition goes to whichever
  worker asks first (waiting workers are served in the order they asked).  Nothing
  looks at memory.

The other policies route each partition through a dispatcher task.  It takes the ready
partitions in queue order, one at a time (no partition overtakes another), and hands
each to one idle GPU worker of the device the policy chose; while the policy chooses
none it waits for the next worker to finish a partition, and asks again.

* ``round-robin``: the k-th partition placed goes to device k mod devices, waiting for
  a worker of that device if none is idle.  Nothing looks at memory.
* ``best-fit`` (the least-available GPU that fits): among the devices with an idle
  worker, the one whose *available* VRAM is the least that still holds the partition's
  estimated peak; ties go to the lowest device index.  Packing the small room first
  keeps the large room of a bigger card for when it is needed.
* ``most-free``: the same test, but the device with the most available VRAM (ties: the
  lowest index): it spreads partitions over the devices.

What "fits" means, for best-fit and most-free: the partition's *need* is its estimated
peak through pre-stage and kernels (`rt.vram_estimate(part, "prestage", "kernels")`);
a device's *available* VRAM is the lesser of its free VRAM now (`rt.vram_free`) and its
capacity (`rt.vram_capacity`, less what is resident) less the needs of the partitions
already placed on it whose worker is not done with them (the design has not returned).
The second term counts partitions that were placed but have not allocated yet; the
first counts what the ledger holds for other reasons (a finalizer's device work, a
leak).  A partition fits a device when its need is at most that device's available VRAM.

When no device fits: the dispatcher waits while some worker is still busy (its
partition ending is what can make room).  When every worker is idle nothing in flight
can make room, so waiting would be for ever: the partition is then placed anyway on the
idle device with the most available VRAM (ties: the lowest index), and the VRAM ledger
decides: it runs out of memory there if it really does not fit (a peak estimate can be
generous, and memory held by a finalizer after its worker moved on is not waited for).

The dispatcher holds the partition it is placing: with a bounded GPU queue
(`max_gpu_queue_depth`) one partition more than the bound waits for a GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from simgpu.config import PLACEMENTS

#: The stages whose peak is a partition's need (what a design holds on the device).
PEAK_STAGES = ("prestage", "kernels")


@dataclass(frozen=True)
class DeviceView:
    """One device as the dispatcher sees it while it places a partition."""

    device: int
    idle: int  # GPU workers of this device waiting for a partition
    free: int  # bytes free on the device now (rt.vram_free)
    capacity: int  # bytes a design may plan with (rt.vram_capacity: capacity less resident)
    committed: int  # needs of the partitions placed here whose worker is not done with them

    @property
    def available(self) -> int:
        """What a new partition may count on: see the module docstring."""
        return min(self.free, self.capacity - self.committed)


class Placement:
    """A placement policy; one instance per run (a policy may keep state, e.g. its turn)."""

    name: str = ""
    #: True: a dispatcher routes each partition (`choose`); False: one shared queue.
    dispatches: bool = True

    def choose(self, need: int, devices: Sequence[DeviceView]) -> int | None:
        """The device for a partition needing `need` bytes, one with an idle worker; or
        None to wait for the next worker to finish a partition."""
        raise NotImplementedError(f"placement {self.name} routes through one shared queue")

    def overflow(self, need: int, devices: Sequence[DeviceView]) -> int:
        """Every worker is idle and `choose` chose none: the idle device with the most
        available VRAM (ties: the lowest index), where the ledger decides."""
        return min((d for d in devices if d.idle), key=lambda d: (-d.available, d.device)).device


class SharedQueue(Placement):
    """Every worker takes the next partition off one queue: whichever asks first."""

    name = "shared-queue"
    dispatches = False


class RoundRobin(Placement):
    """The k-th partition placed goes to device k mod devices (waiting for its worker)."""

    name = "round-robin"

    def __init__(self) -> None:
        self.turn = 0

    def choose(self, need: int, devices: Sequence[DeviceView]) -> int | None:
        device = devices[self.turn % len(devices)]
        if not device.idle:
            return None
        self.turn += 1
        return device.device


def _fitting(need: int, devices: Sequence[DeviceView]) -> list[DeviceView]:
    return [d for d in devices if d.idle and need <= d.available]


class BestFit(Placement):
    """The device with an idle worker whose available VRAM is the least that fits."""

    name = "best-fit"

    def choose(self, need: int, devices: Sequence[DeviceView]) -> int | None:
        fits = _fitting(need, devices)
        return min(fits, key=lambda d: (d.available, d.device)).device if fits else None


class MostFree(Placement):
    """The device with an idle worker whose available VRAM is the most, if it fits."""

    name = "most-free"

    def choose(self, need: int, devices: Sequence[DeviceView]) -> int | None:
        fits = _fitting(need, devices)
        return min(fits, key=lambda d: (-d.available, d.device)).device if fits else None


POLICIES: dict[str, Callable[[], Placement]] = {
    p.name: p for p in (SharedQueue, RoundRobin, BestFit, MostFree)
}
# The configuration validates the names; every one must have its policy here.
if tuple(POLICIES) != PLACEMENTS:
    raise ImportError(f"placement policies {tuple(POLICIES)} differ from the configuration's {PLACEMENTS}")


def make_placement(name: str) -> Placement:
    """A fresh policy for one run (the name is validated by PipelineConfig)."""
    return POLICIES[name]()
