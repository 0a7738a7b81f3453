"""A synthesis result handed from its worker process to the driver through shared memory.

Like passing a parcel through a hatch instead of reading its contents down a telephone
line: a partition's a, b, c and witness are about 0.5 GB at 2^22 constraints, and
pickling them through the process pool's pipe took 1.5 s there, on the driver's one
result thread that every worker's result must pass (measured on the H200, 2026-12-01:
the pipeline ran at that thread's pace, the GPU 10-16% busy).  Instead the worker writes
them into a file of the shared-memory file system and sends its name; the driver maps
the file, removes its name at once (the memory lives as long as the arrays that view
it, then goes back), and builds the same `Synthesized` on the mapping.

Where there is no shared-memory file system, or not enough room in it, the result is
sent the old way, pickled: same object, slower trip.

a, b and c lie first in the file, one after another from its first page, so that the
driver can page-lock them where they lie as it receives them (`receive(..., pin=...)`,
simgpu.gpu.transfer.pin_pages): the prestage then only queues their copies.
"""

from __future__ import annotations

import os
import queue
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simgpu.prover.address_space import map_populated
from simgpu.prover.circuits import CircuitSpec
from simgpu.prover.synthesis import Synthesized, synthesize

#: Where the handed-off results live (Linux's tmpfs of POSIX shared memory).
SHM_DIR = Path("/dev/shm")
#: Only use it with this much room to spare beside a result (other processes use it too).
HEADROOM = 1.25
#: In file order: a, b, c first, one run of pages from the mapping's start (see receive).
_ARRAYS = ("a", "b", "c", "aux")


@dataclass(frozen=True)
class Handoff:
    """What the pipe carries instead of the arrays: where they are and how they lie."""

    path: str
    layout: tuple[tuple[str, int, tuple[int, ...]], ...]  # (array, byte offset, shape), uint32
    spec: CircuitSpec
    partition_seed: int
    public_inputs: list[int]


def _room_for(nbytes: int) -> bool:
    try:
        return SHM_DIR.is_dir() and shutil.disk_usage(SHM_DIR).free > HEADROOM * nbytes
    except OSError:
        return False


def hand_off(synth: Synthesized, tag: str) -> Handoff | Synthesized:
    """In the worker: `synth`'s arrays written into shared memory (the file's name starts
    with `tag`, so whoever started the workers can clear what nobody received), or
    `synth` itself where shared memory cannot take it."""
    arrays = {name: np.ascontiguousarray(getattr(synth, name)) for name in _ARRAYS}
    total = sum(a.nbytes for a in arrays.values())
    if total == 0 or not _room_for(total):
        return synth
    path = SHM_DIR / f"{tag}-{uuid.uuid4().hex}"
    mm = np.memmap(path, dtype=np.uint8, mode="w+", shape=(total,))
    layout, offset = [], 0
    for name, arr in arrays.items():
        mm[offset : offset + arr.nbytes] = arr.view(np.uint8).reshape(-1)
        layout.append((name, offset, arr.shape))
        offset += arr.nbytes
    mm.flush()
    del mm
    return Handoff(str(path), tuple(layout), synth.spec, synth.partition_seed, synth.public_inputs)


def receive(result: Handoff | Synthesized, pin: Callable[[np.ndarray], Any] | None = None) -> Synthesized:
    """In the driver: the `Synthesized` a worker handed off (mapped, not copied).

    pin: page-locks a host region and returns its handle (or None where it cannot):
    called once on the bytes of a, b and c together, the handle kept as the result's
    `abc_pin`.  A pickled result is not pinned: its arrays are the pickle's own."""
    if isinstance(result, Synthesized):
        return result
    with open(result.path, "r+b") as f:
        buf = map_populated(f.fileno(), os.fstat(f.fileno()).st_size)
    os.unlink(result.path)  # the mapping stays while its arrays live; the name goes now
    arrays: dict[str, Any] = {}
    spans: dict[str, tuple[int, int]] = {}
    for name, offset, shape in result.layout:
        count = int(np.prod(shape)) * 4
        arrays[name] = buf[offset : offset + count].view(np.uint32).reshape(shape)
        spans[name] = (offset, offset + count)
    abc_pin = None
    abc_in_a_row = spans["a"][0] == 0 and spans["a"][1] == spans["b"][0] and spans["b"][1] == spans["c"][0]
    if pin is not None and abc_in_a_row:
        abc_pin = pin(buf[: spans["c"][1]])
    return Synthesized(
        spec=result.spec,
        partition_seed=result.partition_seed,
        public_inputs=result.public_inputs,
        aux=arrays["aux"],
        a=arrays["a"],
        b=arrays["b"],
        c=arrays["c"],
        abc_pin=abc_pin,
    )


_released: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
_releaser: threading.Thread | None = None
_releaser_lock = threading.Lock()


def _drop_forever() -> None:
    while True:
        arrays = _released.get()
        if len(arrays) == 1 and isinstance(arrays[0], threading.Event):
            arrays[0].set()  # settled(): everything queued before it is let go
            continue
        del arrays  # the last views: the mapping is unmapped here


def release_later(*arrays: Any) -> None:
    """Let go of arrays on the releaser thread instead of this one.  The last view of a
    received mapping unmaps it, and giving its pages back took 45-65 ms at 2^22 on
    the H200 (docs/data/h200-2026-12-02b): in prestage that is on a GPU worker's thread, under
    the GPU lock.  The caller must hold no other reference."""
    global _releaser
    with _releaser_lock:
        if _releaser is None:
            _releaser = threading.Thread(target=_drop_forever, name="handoff-releaser", daemon=True)
            _releaser.start()
    _released.put(arrays)


def settled() -> None:
    """Wait until the releaser has let go of everything handed to it before this call
    (its pins unlocked): for calibrate, which times the stage after prestage without the
    unlock that a pipeline's model adds on its own (simgpu.profile [pins])."""
    if _releaser is None:
        return
    done = threading.Event()
    _released.put((done,))
    done.wait()


def synthesize_handed_off(spec: CircuitSpec, partition_seed: int, tag: str) -> Handoff | Synthesized:
    """The synthesis stage as a pool worker runs it: synthesize, then hand the result off."""
    return hand_off(synthesize(spec, partition_seed), tag)


def synthesize_handed_off_timed(
    spec: CircuitSpec, partition_seed: int, tag: str
) -> tuple[Handoff | Synthesized, float, float, float]:
    """As synthesize_handed_off, with (result, seconds computing, seconds of the worker's
    share of the trip back, seconds of timing work that is no part of the trip).  The
    worker's share is done by every worker at once; the driver's share is what is left
    of the wall time.  Without shared memory the worker's share is pickling, timed on one
    pickle more than the pool makes: that extra copy is reported to be taken off."""
    t = time.perf_counter()
    synth = synthesize(spec, partition_seed)
    compute = time.perf_counter() - t
    t = time.perf_counter()
    out = hand_off(synth, tag)
    share = time.perf_counter() - t
    if isinstance(out, Synthesized):  # no shared memory here: the trip is a pickle
        from multiprocessing.reduction import ForkingPickler  # what the process pool pickles with

        t = time.perf_counter()
        ForkingPickler.dumps(out)
        share = time.perf_counter() - t
        return out, compute, share, share
    return out, compute, share, 0.0


def clear(tag: str) -> int:
    """Remove every handed-off result named with `tag` that nobody received (a run
    stopped with results in flight); returns how many."""
    n = 0
    for path in SHM_DIR.glob(f"{tag}-*"):
        try:
            path.unlink()
            n += 1
        except OSError:
            pass
    return n
