"""The real Groth16 prover over BLS12-381 (GPU kernels through CuPy, CPU backend) and the
runtime that drives it with the shared scheduler code."""

#: Cores one b_g2_msm is split over unless told otherwise.  A profile's b_g2_msm times
#: hold for the split it was calibrated with ([calibration] b_g2_threads).
B_G2_THREADS = 4
