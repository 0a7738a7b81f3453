"""Trusted setup and the binary key file: round trip, memory mapping, corruption."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, G2Point

from simgpu.errors import UserError
from simgpu.gpu.encoding import g1_from_limbs, ints_to_limbs, limbs_to_ints, random_fr, scalar_of
from simgpu.prover.circuits import CircuitSpec, r1cs_of
from simgpu.prover.cpu_device import CpuDevice, fixed_base_mul
from simgpu.prover.groth16 import prove, verify
from simgpu.prover.keys import ALIGN, MAGIC, load_keys, read_header, save_keys, verify_sections
from simgpu.prover.setup import ToxicWaste, batch_inverse, key_id_of, lagrange_at, setup
from simgpu.prover.synthesis import synthesize

SPEC = CircuitSpec(log_constraints=6, public_inputs=3, b_density=0.3, seed=8)


@pytest.fixture(scope="module")
def pair():
    return setup(SPEC, seed=5, workers=1)


@pytest.fixture()
def keyfile(tmp_path: Path, pair) -> Path:
    path = tmp_path / "k.sgk"
    save_keys(path, *pair, setup_seed=5)
    return path


ARRAYS = ("a", "a_index", "b_g1", "b_g2", "b_index", "l", "h")


def test_key_sizes_follow_the_circuit(pair) -> None:
    pk, vk = pair
    r1cs = r1cs_of(SPEC)
    n = SPEC.domain_size
    assert pk.h.shape == (n - 1, 24) and pk.l.shape == (r1cs.num_aux, 24)
    assert pk.a.shape == (len(r1cs.density("A")), 24)
    assert pk.b_g1.shape == (len(r1cs.density("B")), 24) and pk.b_g2.shape == (len(r1cs.density("B")), 192)
    assert vk.num_inputs == 4 == pk.num_inputs
    assert pk.key_id == key_id_of(SPEC, 5) != key_id_of(SPEC, 6)


def test_setup_is_deterministic_and_points_are_valid(pair) -> None:
    pk, vk = pair
    pk2, vk2 = setup(SPEC, seed=5, workers=1)
    for name in ARRAYS:
        assert np.array_equal(getattr(pk, name), getattr(pk2, name))
    assert vk2.ic == vk.ic and vk2.gamma_g2 == vk.gamma_g2
    pts = g1_from_limbs(pk.h[:5], checked=True)  # on the curve and in the subgroup
    assert all(p.is_in_subgroup() for p in pts)
    # H query: consecutive entries differ by the factor tau
    tw = ToxicWaste.from_seed(5)
    assert pts[1] == pts[0] * scalar_of(tw.tau)


def test_lagrange_basis_and_batch_inverse() -> None:
    from simgpu.gpu.bls12_381 import R_ORDER, root_of_unity

    vals = [3, 5, R_ORDER - 2, 2**200]
    assert [v * i % R_ORDER for v, i in zip(vals, batch_inverse(vals), strict=True)] == [1] * 4
    n, tau = 8, 123456789
    lag = lagrange_at(tau, n, n)
    assert sum(lag) % R_ORDER == 1  # the basis sums to the constant 1
    w = root_of_unity(3)
    assert sum(pow(w, j, R_ORDER) * lag[j] for j in range(n)) % R_ORDER == tau  # ... and to X


def test_fixed_base_mul_matches_scalar_mul() -> None:
    sc = random_fr(5, np.random.default_rng(0))
    ints = limbs_to_ints(sc)
    g1 = fixed_base_mul("g1", G1Point(), sc, workers=1)
    assert g1_from_limbs(g1) == [G1Point() * scalar_of(v) for v in ints]
    g2 = fixed_base_mul("g2", G2Point(), sc, workers=1)
    assert [G2Point.from_xy_bytes_unchecked_le(bytes(row)) for row in g2] == [
        G2Point() * scalar_of(v) for v in ints
    ]
    zero = fixed_base_mul("g1", G1Point(), ints_to_limbs([0]), workers=1)
    assert not zero.any()  # infinity is all zeros


def test_fixed_base_mul_over_processes() -> None:
    sc = random_fr(4100, np.random.default_rng(1))
    assert np.array_equal(
        fixed_base_mul("g1", G1Point(), sc, workers=2), fixed_base_mul("g1", G1Point(), sc, workers=1)
    )


def test_round_trip_memory_mapped(keyfile: Path, pair) -> None:
    pk, vk = pair
    pk2, vk2 = load_keys(keyfile)
    for name in ARRAYS:
        arr = getattr(pk2, name)
        assert isinstance(arr, np.memmap) and not arr.flags.writeable
        assert np.array_equal(arr, getattr(pk, name))
    assert (pk2.alpha_g1, pk2.beta_g1, pk2.delta_g1) == (pk.alpha_g1, pk.beta_g1, pk.delta_g1)
    assert (pk2.beta_g2, pk2.delta_g2) == (pk.beta_g2, pk.delta_g2)
    assert pk2.spec == SPEC and pk2.key_id == pk.key_id
    assert (vk2.alpha_g1, vk2.beta_g2, vk2.gamma_g2, vk2.delta_g2) == (
        vk.alpha_g1,
        vk.beta_g2,
        vk.gamma_g2,
        vk.delta_g2,
    )
    assert vk2.ic == vk.ic
    header = read_header(keyfile)
    assert header["setup_seed"] == 5 and header["domain_size"] == 64
    assert all(m["offset"] % ALIGN == 0 for m in header["sections"])
    assert verify_sections(keyfile) == []
    # A proof made with the memory-mapped key verifies with the loaded vk.
    synth = synthesize(SPEC, 3)
    assert verify(vk2, synth.public_inputs, prove(pk2, synth, CpuDevice(stream_batch=16)))


def test_load_without_mmap(keyfile: Path, pair) -> None:
    pk2, _ = load_keys(keyfile, mmap=False)
    assert not isinstance(pk2.h, np.memmap) and np.array_equal(pk2.h, pair[0].h)


def test_corrupt_header_is_refused(keyfile: Path) -> None:
    raw = bytearray(keyfile.read_bytes())
    bad = keyfile.with_name("bad.sgk")
    bad.write_bytes(bytes(raw[:48]) + raw[48:60].replace(b"{", b"[") + bytes(raw[60:]))
    with pytest.raises(UserError, match="checksum"):
        load_keys(bad)
    flipped = bytearray(raw)
    flipped[100] ^= 1
    bad.write_bytes(bytes(flipped))
    with pytest.raises(UserError, match="checksum"):
        read_header(bad)
    bad.write_bytes(b"NOTAKEY!" + bytes(raw[8:]))
    with pytest.raises(UserError, match="magic"):
        load_keys(bad)
    bad.write_bytes(MAGIC + struct.pack("<I", 99) + bytes(raw[12:]))
    with pytest.raises(UserError, match="version"):
        load_keys(bad)
    header = read_header(keyfile)
    last = header["sections"][-1]
    bad.write_bytes(bytes(raw[: last["offset"]]))  # truncated inside the data
    with pytest.raises(UserError, match="past the end"):
        load_keys(bad)
    bad.write_bytes(bytes(raw[:20]))
    with pytest.raises(UserError):
        load_keys(bad)


def test_corrupt_section_is_found_on_request(keyfile: Path) -> None:
    header = read_header(keyfile)
    off = next(m["offset"] for m in header["sections"] if m["name"] == "l")
    raw = bytearray(keyfile.read_bytes())
    raw[off + 7] ^= 0xFF
    keyfile.write_bytes(bytes(raw))
    assert verify_sections(keyfile) == ["l"]


def test_header_is_documented_json(keyfile: Path) -> None:
    raw = keyfile.read_bytes()
    (hlen,) = struct.unpack_from("<I", raw, 12)
    header = json.loads(raw[48 : 48 + hlen])
    names = [m["name"] for m in header["sections"]]
    assert names == [
        *("pk_g1", "pk_g2", "a", "a_index", "b_g1", "b_g2", "b_index", "l", "h"),
        *("vk_g1", "vk_g2", "ic"),
    ]
    assert header["spec"] == SPEC.to_dict()
