"""Scheduler code written once: the runtime protocol, the designs and the daemon.

Nothing here imports simpy, threading or cupy: the model and the real prover drive the
same generators.
"""
