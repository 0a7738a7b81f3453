"""The SimPy model: SimRuntime, contention, Monte Carlo."""

from simgpu.model.sim import SimRuntime

__all__ = ["SimRuntime"]
