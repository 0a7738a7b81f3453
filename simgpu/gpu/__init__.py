"""BLS12-381 on the GPU: field constants and encodings, CUDA plumbing, the NTT family and
the Pippenger MSM in G1 and G2, each driver (ntt.py, msm.py) beside its kernels (ntt.cu, msm.cu),
and what each kernel allocates (footprint)."""
