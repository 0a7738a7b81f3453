"""The SimPy model: SimRuntime, contention, Monte Carlo."""

from simgpu.model.sim import RunResult, SimRuntime

__all__ = ["RunResult", "SimRuntime"]
