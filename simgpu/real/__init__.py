"""RealRuntime: the shared scheduler code on threads, driving the real prover (executor),
and `real_run`, a whole run with every proof verified."""
