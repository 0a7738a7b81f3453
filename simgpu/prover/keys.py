"""Groth16 proving and verifying keys, and their binary file format.

A key pair is made once by `simgpu.prover.setup.setup` and reused: `save_keys` writes both
keys to one file, `load_keys` memory-maps it back (numpy.memmap), so a 2^22 key of a few
GB costs no parse time and pages in as the prover streams it.

File format, version 1 (all integers little-endian):

=======  ======  ===========================================================
offset   size    field
=======  ======  ===========================================================
0        8       magic ``b"SGPUG16K"``
8        4       format version, u32 (= 1)
12       4       header length H in bytes, u32
16       32      SHA-256 of the H header bytes
48       H       header: UTF-8 JSON (below)
...              zero padding up to the first section
=======  ======  ===========================================================

The header holds ``format`` ("simgpu-groth16-keys"), ``key_id``, ``setup_seed``, the
circuit ``spec`` (CircuitSpec.to_dict()), ``domain_size`` N, ``num_inputs`` (ONE
included), ``num_aux``, and ``sections``: a list of ``{"name", "dtype", "shape",
"offset", "nbytes"}``.  Every section starts on a 4096-byte boundary (so a memmap is
page-aligned) and is a C-order array of that numpy dtype and shape:

==============  ============  ===========  ============================================
section         dtype         shape        contents
==============  ============  ===========  ============================================
pk_g1           <u4           (3, 24)      alpha, beta, delta in G1
pk_g2           u1            (2, 192)     beta, delta in G2
a               <u4           (ka, 24)     A query: [u_i(tau)]_1 for i in a_index
a_index         <u4           (ka,)        variables with an A entry, ascending
b_g1            <u4           (kb, 24)     B query in G1: [v_i(tau)]_1 for i in b_index
b_g2            u1            (kb, 192)    B query in G2: [v_i(tau)]_2
b_index         <u4           (kb,)        variables with a B entry, ascending
l               <u4           (m, 24)      [(beta u_i + alpha v_i + w_i)/delta]_1, aux i
h               <u4           (N-1, 24)    [tau^i Z(tau)/delta]_1, i < N-1
vk_g1           <u4           (1, 24)      alpha in G1
vk_g2           u1            (3, 192)     beta, gamma, delta in G2
ic              <u4           (l+1, 24)    [(beta u_i + alpha v_i + w_i)/gamma]_1, inputs
==============  ============  ===========  ============================================

G1 points are affine (x, y), each coordinate 12 32-bit words in standard (not
Montgomery) form, least significant first; the point at infinity is all zeros
(`simgpu.gpu.encoding`).  G2 points are 192 bytes in arkworks' xy little-endian layout.

Only the header is checksummed: the sections are gigabytes that a prover pages in
lazily; hashing them at load would defeat the memory map.  `verify_sections` hashes
them on request against the per-section SHA-256 kept in the header.
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

from simgpu.errors import UserError
from simgpu.gpu.encoding import G2_BYTES, g1_from_limbs, g1_to_limbs, g2_from_bytes, g2_to_bytes
from simgpu.prover.circuits import CircuitSpec

MAGIC = b"SGPUG16K"
VERSION = 1
FORMAT = "simgpu-groth16-keys"
ALIGN = 4096
_PREFIX = struct.Struct("<8sII32s")  # magic, version, header length, header SHA-256


@dataclass
class ProvingKey:
    """The prover's half of a Groth16 key pair for one circuit (see the module docstring
    for each query).  Arrays may be memory-mapped from a key file."""

    spec: CircuitSpec
    key_id: str
    domain_size: int
    num_inputs: int
    num_aux: int
    alpha_g1: G1Point
    beta_g1: G1Point
    delta_g1: G1Point
    beta_g2: G2Point
    delta_g2: G2Point
    a: np.ndarray
    a_index: np.ndarray
    b_g1: np.ndarray
    b_g2: np.ndarray
    b_index: np.ndarray
    l: np.ndarray  # noqa: E741 - the L query's name in every Groth16 text
    h: np.ndarray

    def query(self, name: str) -> np.ndarray:
        """The G1 bases of query `name` (h, l, a, b1) as uint32 (n, 24)."""
        return {"h": self.h, "l": self.l, "a": self.a, "b1": self.b_g1}[name]

    def query_length(self, name: str) -> int:
        return int(self.query(name).shape[0])

    def nbytes(self) -> int:
        arrays = (self.a, self.a_index, self.b_g1, self.b_g2, self.b_index, self.l, self.h)
        return sum(int(x.nbytes) for x in arrays)


@dataclass
class VerifyingKey:
    """The verifier's half: alpha, beta, gamma, delta and one IC point per input (ONE first)."""

    alpha_g1: G1Point
    beta_g2: G2Point
    gamma_g2: G2Point
    delta_g2: G2Point
    ic: list[G1Point]

    @property
    def num_inputs(self) -> int:
        return len(self.ic)


def _sections(pk: ProvingKey, vk: VerifyingKey) -> list[tuple[str, np.ndarray]]:
    g2 = lambda pts: np.frombuffer(g2_to_bytes(pts), np.uint8).reshape(-1, G2_BYTES)  # noqa: E731
    return [
        ("pk_g1", g1_to_limbs([pk.alpha_g1, pk.beta_g1, pk.delta_g1])),
        ("pk_g2", g2([pk.beta_g2, pk.delta_g2])),
        ("a", pk.a),
        ("a_index", pk.a_index),
        ("b_g1", pk.b_g1),
        ("b_g2", pk.b_g2),
        ("b_index", pk.b_index),
        ("l", pk.l),
        ("h", pk.h),
        ("vk_g1", g1_to_limbs([vk.alpha_g1])),
        ("vk_g2", g2([vk.beta_g2, vk.gamma_g2, vk.delta_g2])),
        ("ic", g1_to_limbs(vk.ic)),
    ]


def _bytes(arr: np.ndarray) -> np.ndarray:
    """The raw bytes of a C-contiguous array, as a flat uint8 view (no copy)."""
    return np.ascontiguousarray(arr).reshape(-1).view(np.uint8)


def _align(x: int) -> int:
    return (x + ALIGN - 1) // ALIGN * ALIGN


def save_keys(path: str | Path, pk: ProvingKey, vk: VerifyingKey, *, setup_seed: int | None = None) -> None:
    """Write pk and vk to `path` in the format above (atomically: temp file + rename)."""
    path = Path(path)
    arrays = [(name, np.ascontiguousarray(arr)) for name, arr in _sections(pk, vk)]
    for name, arr in arrays:
        if arr.dtype not in (np.dtype("<u4"), np.dtype("u1")):
            raise ValueError(f"section {name}: unexpected dtype {arr.dtype}")
    meta = []
    for name, arr in arrays:
        meta.append(
            {
                "name": name,
                "dtype": arr.dtype.str,
                "shape": list(arr.shape),
                "nbytes": int(arr.nbytes),
                "sha256": hashlib.sha256(_bytes(arr)).hexdigest(),
            }
        )
    header = {
        "format": FORMAT,
        "key_id": pk.key_id,
        "setup_seed": setup_seed,
        "spec": pk.spec.to_dict(),
        "domain_size": pk.domain_size,
        "num_inputs": pk.num_inputs,
        "num_aux": pk.num_aux,
        "sections": meta,
    }
    # Offsets depend on the header's length, which depends on the offsets' digits: fix the
    # point by laying out twice with a generous first guess.
    first = _PREFIX.size + len(json.dumps(header)) + 64 * len(meta) + 256
    offset = _align(first)
    for m in meta:
        m["offset"] = offset
        offset = _align(offset + m["nbytes"])
    raw = json.dumps(header, sort_keys=True).encode()
    if _PREFIX.size + len(raw) > meta[0]["offset"]:
        raise AssertionError("key header outgrew its reserved space")
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(_PREFIX.pack(MAGIC, VERSION, len(raw), hashlib.sha256(raw).digest()))
        f.write(raw)
        for m, (_, arr) in zip(meta, arrays, strict=True):
            f.seek(m["offset"])
            f.write(_bytes(arr))
        f.truncate(_align(f.tell()))
    tmp.replace(path)


def read_header(path: str | Path) -> dict:
    """The JSON header of a key file, after checking magic, version and checksum."""
    path = Path(path)
    with open(path, "rb") as f:
        prefix = f.read(_PREFIX.size)
        if len(prefix) < _PREFIX.size:
            raise UserError(f"{path}: not a simgpu key file (too short)")
        magic, version, hlen, digest = _PREFIX.unpack(prefix)
        if magic != MAGIC:
            raise UserError(f"{path}: not a simgpu key file (bad magic)")
        if version != VERSION:
            raise UserError(f"{path}: key format version {version}, this simgpu reads {VERSION}")
        raw = f.read(hlen)
    if len(raw) != hlen or hashlib.sha256(raw).digest() != digest:
        raise UserError(f"{path}: key header checksum mismatch (corrupt or truncated file)")
    header = json.loads(raw)
    if header.get("format") != FORMAT:
        raise UserError(f"{path}: unexpected key format {header.get('format')!r}")
    size = path.stat().st_size
    for m in header["sections"]:
        if m["offset"] + m["nbytes"] > size:
            raise UserError(f"{path}: section {m['name']} runs past the end of the file")
    return header


def _load_sections(path: Path, header: dict, mmap: bool) -> dict[str, np.ndarray]:
    out = {}
    for m in header["sections"]:
        dtype, shape = np.dtype(m["dtype"]), tuple(m["shape"])
        if m["nbytes"] == 0:
            out[m["name"]] = np.zeros(shape, dtype)
        elif mmap:
            out[m["name"]] = np.memmap(path, dtype=dtype, mode="r", offset=m["offset"], shape=shape)
        else:
            count = int(np.prod(shape))
            out[m["name"]] = np.fromfile(path, dtype=dtype, count=count, offset=m["offset"]).reshape(shape)
    return out


def load_keys(path: str | Path, *, mmap: bool = True) -> tuple[ProvingKey, VerifyingKey]:
    """Read a key file; with mmap the query arrays are read-only numpy.memmap views."""
    path = Path(path)
    header = read_header(path)
    s = _load_sections(path, header, mmap)
    pk_g1 = g1_from_limbs(np.asarray(s["pk_g1"]))
    pk_g2 = g2_from_bytes(np.asarray(s["pk_g2"]).tobytes())
    vk_g2 = g2_from_bytes(np.asarray(s["vk_g2"]).tobytes())
    pk = ProvingKey(
        spec=CircuitSpec.from_dict(header["spec"]),
        key_id=header["key_id"],
        domain_size=int(header["domain_size"]),
        num_inputs=int(header["num_inputs"]),
        num_aux=int(header["num_aux"]),
        alpha_g1=pk_g1[0],
        beta_g1=pk_g1[1],
        delta_g1=pk_g1[2],
        beta_g2=pk_g2[0],
        delta_g2=pk_g2[1],
        a=s["a"],
        a_index=s["a_index"],
        b_g1=s["b_g1"],
        b_g2=s["b_g2"],
        b_index=s["b_index"],
        l=s["l"],
        h=s["h"],
    )
    vk = VerifyingKey(
        alpha_g1=g1_from_limbs(np.asarray(s["vk_g1"]))[0],
        beta_g2=vk_g2[0],
        gamma_g2=vk_g2[1],
        delta_g2=vk_g2[2],
        ic=g1_from_limbs(np.asarray(s["ic"])),
    )
    return pk, vk


def verify_sections(path: str | Path) -> list[str]:
    """Names of the sections whose SHA-256 does not match the header (reads everything)."""
    path = Path(path)
    header = read_header(path)
    s = _load_sections(path, header, mmap=True)
    bad = []
    for m in header["sections"]:
        if hashlib.sha256(_bytes(s[m["name"]])).hexdigest() != m["sha256"]:
            bad.append(m["name"])
    return bad
