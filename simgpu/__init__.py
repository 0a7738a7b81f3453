"""simgpu: predict how a GPU proving pipeline shares a GPU, then check it on a real prover."""

__version__ = "0.1.0"
