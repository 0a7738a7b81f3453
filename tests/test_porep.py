"""The porep circuit family end to end: `simgpu run --circuit porep` proves and verifies on the
CPU backend, its estimated shape is the measured one, and a bad --circuit is one line, exit 2."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from simgpu.cli import app, main
from simgpu.prover.circuits import circuit_spec
from simgpu.prover.cpu_device import CpuDevice
from simgpu.prover.groth16 import prep, prove, verify
from simgpu.prover.memory_plan import ProverShape
from simgpu.prover.setup import setup
from simgpu.prover.synthesis import synthesize


def test_porep_proofs_verify_and_match_the_estimate() -> None:
    spec = circuit_spec("porep", 1 << 10, seed=2)
    pk, vk = setup(spec, 7, workers=1)
    est = ProverShape.estimate(spec)
    for seed in (1, 2):
        synth = synthesize(spec, seed)
        assert verify(vk, synth.public_inputs, prove(pk, synth, CpuDevice(stream_batch=128), threads=2))
        real = ProverShape.from_prepared(prep(synth, pk))
        for q in ("h", "l", "a", "b1"):
            assert abs(est.lengths[q] - real.lengths[q]) <= 0.01 * real.lengths[q] + 2
        for q in ("l", "a", "b1"):
            # tails are the few field values (1% of the witness): a few of them either way
            assert abs(est.tails[q] - real.tails[q]) <= 0.1 * real.tails[q] + 3
            assert abs(est.ones[q] - real.ones[q]) <= 0.15 * real.ones[q] + 2  # one witness: binomial noise


def test_simgpu_run_circuit_porep(tmp_path) -> None:
    r = CliRunner().invoke(
        app,
        ["run", "--backend", "cpu", "--circuit", "porep", "--constraints", "2^8", "--keys-dir", str(tmp_path)]
        + ["--json"],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["verification"] == {"partitions_verified": 4, "partitions_rejected": 0, "proofs_verified": 2}


def test_unknown_circuit_is_one_line_and_exit_2(capsys) -> None:
    assert main(["run", "--backend", "cpu", "--circuit", "sha", "--constraints", "2^6"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown circuit 'sha'" in err[0]
