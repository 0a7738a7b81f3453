"""The porep circuit family end to end: `simgpu run --circuit porep` proves and verifies on the
CPU backend, its estimated shape is the measured one, and a bad --circuit is one line, exit 2."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from simgpu.cli import app, main
from simgpu.prover.circuits import circuit_spec, r1cs_of
from simgpu.prover.cpu_device import CpuDevice
from simgpu.prover.groth16 import prep, prove, verify
from simgpu.prover.memory_plan import ProverShape
from simgpu.prover.prepared import QuerySplit
from simgpu.prover.setup import setup
from simgpu.prover.synthesis import synthesize


def test_porep_proofs_verify() -> None:
    spec = circuit_spec("porep", 1 << 10, seed=2)
    pk, vk = setup(spec, 7, workers=1)
    for seed in (1, 2):
        synth = synthesize(spec, seed)
        assert verify(vk, synth.public_inputs, prove(pk, synth, CpuDevice(stream_batch=128), threads=2))
    assert ProverShape.from_prepared(prep(synth, pk)).lengths["b1"] == len(pk.b_index)


def test_porep_estimate_is_the_mean_shape() -> None:
    """ProverShape.estimate against the mean over 8 witnesses of one circuit (a single
    witness's ones vary by several percent: its AND chains run long)."""
    spec = circuit_spec("porep", 1 << 13, seed=4)
    r1cs = r1cs_of(spec)
    index = {"l": None, "a": r1cs.density("A"), "b1": r1cs.density("B")}
    est = ProverShape.estimate(spec)
    ones = {q: 0.0 for q in index}
    tails = {q: 0.0 for q in index}
    for seed in range(8):
        synth = synthesize(spec, seed)
        inputs = synth.assignment_limbs()[: r1cs.num_inputs]
        for q, idx in index.items():
            split = QuerySplit.query(q, inputs, synth.aux, idx)
            assert split.length == est.lengths[q] or q == "a"
            ones[q] += len(split.ones) / 8
            tails[q] += len(split.tails) / 8
    assert abs(est.lengths["a"] - len(index["a"])) <= 0.001 * len(index["a"]) + 2
    for q in index:
        assert abs(est.ones[q] - ones[q]) <= 0.03 * ones[q]
        # the tails are the few field values (1% of the witness), fixed by the circuit
        assert abs(est.tails[q] - tails[q]) <= 0.1 * tails[q] + 2


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
