"""A design that runs out of VRAM on purpose, the same way in both runtimes."""

from weakref import WeakKeyDictionary

from simgpu.sched.designs import finalize

_EVENTS: WeakKeyDictionary = WeakKeyDictionary()


def _events(rt, proof):
    per_rt = _EVENTS.setdefault(rt, {})
    if proof not in per_rt:
        per_rt[proof] = {"staged": rt.event(), "tried": rt.event(), "freed": rt.event()}
    return per_rt[proof]


def kernels_beside_a_prestage(rt, worker, part):
    """Partition 0 pre-stages and keeps its buffers until partition 1 has tried its
    kernels: on a card that fits one partition's kernels but not that plus another's
    pre-stage, partition 1 runs out of VRAM.  Its retry waits until partition 0 has freed
    its buffers, and succeeds.  No locks: the events order the two partitions."""
    ev = _events(rt, part.proof.id)
    if part.index == 0:
        buffers = yield rt.stage("prestage", part, worker.device)
        ev["staged"].succeed()
        yield ev["tried"]
        try:
            yield rt.stage("kernels", part, worker.device, buffers=buffers)
        finally:
            rt.free(buffers)
            ev["freed"].succeed()
    else:
        yield ev["freed"] if part.attempts > 1 else ev["staged"]
        buffers = yield rt.stage("prestage", part, worker.device)
        try:
            yield rt.stage("kernels", part, worker.device, buffers=buffers)
        finally:
            rt.free(buffers)
            if not ev["tried"].triggered:
                ev["tried"].succeed()
    yield from finalize(rt, worker, part)
