"""The Groth16 prover over BLS12-381, in the pipeline's stages.

circuits (synthetic R1CS) -> synthesis (witness, a, b, c) -> groth16 (prep, prestage,
kernels, b_g2_msm, epilogue, verify) on a `device` (the GPU through CuPy, or the CPU
for small circuits), with keys from `setup`, the G2 MSM in `g2pool`'s processes, and
the memory plan (`memory_plan`) that says which buffers each stage holds.
"""

#: Cores one b_g2_msm is split over unless told otherwise.  A profile's b_g2_msm times
#: hold for the split it was calibrated with ([calibration] b_g2_threads).
B_G2_THREADS = 4
