"""Valid user designs assembled at random, for the property tests.

A `Recipe` picks, for one GPU worker's partition: which locks guard the GPU stages
(none, one around both, a `mem` lock for the pre-stage and a `compute` lock for the
kernels, or one lock around everything), whether the pre-stage runs at all, when the
pre-staged buffers are freed, and whether the CPU tail (b_g2_msm, epilogue) runs inline,
as a finalizer task, or with b_g2_msm spawned beside the epilogue's wait.  Every design
built from a recipe keeps the runtime contract (locks released and buffers freed on
every path, the partition completed or failed), so any run of it must end cleanly.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from simgpu.errors import SimgpuError
from simgpu.sched.designs import finish

LOCKING = ("none", "gpu", "mem+compute", "all")
FREE_AT = ("after_kernels", "after_tail")
TAIL = ("inline", "finalizer", "spawned_b_g2")


@dataclass(frozen=True)
class Recipe:
    locking: str
    prestage: bool
    free_at: str
    tail: str

    @property
    def name(self) -> str:
        pre = "prestage" if self.prestage else "no-prestage"
        return f"{self.locking}/{pre}/{self.free_at}/{self.tail}"


recipes = st.builds(
    Recipe,
    locking=st.sampled_from(LOCKING),
    prestage=st.booleans(),
    free_at=st.sampled_from(FREE_AT),
    tail=st.sampled_from(TAIL),
)


def build(recipe: Recipe):
    """The design generator `design(rt, worker, part)` a recipe describes."""

    def lock(rt, worker, name):
        return rt.lock(name, worker.device)

    def tail(rt, worker, part, buffers):
        if recipe.tail == "spawned_b_g2":
            b_g2 = rt.spawn(b_g2_only(rt, worker, part), f"{worker.name}.b_g2")
            yield b_g2
        else:
            yield rt.stage("b_g2_msm", part, worker.device)
        if recipe.free_at == "after_tail":
            rt.free(buffers)
        yield from finish(rt, worker, part)

    def b_g2_only(rt, worker, part):
        yield rt.stage("b_g2_msm", part, worker.device)

    def finalizer(rt, worker, part, buffers):
        try:
            yield from tail(rt, worker, part, buffers)
        except SimgpuError as e:
            part.fail(e)
        finally:
            rt.free(buffers)

    def design(rt, worker, part):
        held = []
        buffers = None
        try:
            if recipe.locking == "all":
                held.append(lock(rt, worker, "gpu"))
                yield held[-1].acquire()
            if recipe.locking in ("gpu", "mem+compute"):
                held.append(lock(rt, worker, "gpu" if recipe.locking == "gpu" else "mem"))
                yield held[-1].acquire()
            if recipe.prestage:
                buffers = yield rt.stage("prestage", part, worker.device)
            if recipe.locking == "mem+compute":
                held.pop().release()
                held.append(lock(rt, worker, "compute"))
                yield held[-1].acquire()
            yield rt.stage("kernels", part, worker.device, buffers=buffers)
            if recipe.locking in ("gpu", "mem+compute"):
                held.pop().release()
            if recipe.free_at == "after_kernels":
                rt.free(buffers)
                buffers = None
            if recipe.tail == "finalizer" and recipe.locking != "all":
                rt.spawn(finalizer(rt, worker, part, buffers), f"{worker.name}.fin")
                buffers = None  # the finalizer owns them now
            else:
                yield from tail(rt, worker, part, buffers)
                buffers = None
        finally:
            while held:
                held.pop().release()
            rt.free(buffers)

    design.__name__ = recipe.name
    return design
