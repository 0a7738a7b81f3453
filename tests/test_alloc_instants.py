"""experiments/alloc_instants.py: a stage plan's bookings moved to the card's instants."""

from __future__ import annotations

from conftest import load_experiment

from simgpu.profile import resolve as R

load_experiment("gpu_validation")  # what alloc_instants imports from beside it
exp = load_experiment("alloc_instants")


def phase(name: str, seconds: float = 1.0) -> R.ResolvedPhase:
    return R.ResolvedPhase(name=name, seconds=seconds, transient=(), release=(), uses={})


def kernels_steps() -> list[R.Step]:
    return [
        R.Step(R.WORK, phase=phase("ntt"), stage="kernels"),
        R.Step(R.FREE, "vram", "d_bc"),
        R.Step(R.ALLOC, "vram", "h_msm_staging", 96),
        R.Step(R.STAGE, "vram", nbytes=96, stage="kernels"),
        R.Step(R.ALLOC, "vram", "h_msm", 399),
        R.Step(R.WORK, phase=phase("h_msm"), stage="kernels"),
    ]


def test_a_kernels_plan_books_its_msm_at_launch():
    got = exp.at_launch(kernels_steps())
    order = [(s.op, s.buffer or (s.phase.name if s.phase else "")) for s in got]
    assert order == [
        ("free", "d_bc"),
        ("alloc", "h_msm_staging"),
        ("alloc", "h_msm"),
        ("work", "ntt"),
        ("stage", ""),
        ("work", "h_msm"),
    ]


def test_b_g2_msm_temporaries_come_part_way_into_its_work():
    steps = [
        R.Step(R.ALLOC, "vram", "b_g2_msm_staging", 77),
        R.Step(R.STAGE, "vram", nbytes=77, stage="b_g2_msm"),
        R.Step(R.ALLOC, "vram", "b_g2_msm", 282),
        R.Step(R.WORK, phase=phase("b_g2_msm", 0.1), stage="b_g2_msm"),
    ]
    got = exp.b_g2_later(steps, 0.16)
    assert [s.op for s in got] == [R.ALLOC, R.STAGE, R.WORK, R.ALLOC, R.WORK]
    assert abs(got[2].phase.seconds - 0.016) < 1e-12 and abs(got[4].phase.seconds - 0.084) < 1e-12
