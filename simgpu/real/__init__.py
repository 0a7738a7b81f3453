"""The real Groth16 prover over BLS12-381 (GPU kernels through CuPy, CPU backend) and the
runtime that drives it with the shared scheduler code."""
