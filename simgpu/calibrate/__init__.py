"""`simgpu calibrate`: measure the real prover on this machine and write a profile.

measure (time the stages through the prover) -> fit (laws, noise, contention terms) ->
build (the profile document) -> refit (again, from the stored measurements).
"""
