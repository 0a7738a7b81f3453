"""The model's caching pool (simgpu.devicepool) against CuPy's own, on the card: random
allocations and frees, some under a cap tight enough to refuse, traced by CupyDevice's
hook (AllocTrace) and replayed through the model row by row.  Run in a fresh process,
so that no array of an earlier test sits in the pool's blocks."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from simgpu.devicepool import replay
from simgpu.prover.cupy_device import cupy_device_available

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cupy_device_available(), reason="needs CuPy and a CUDA device"),
]

MiB = 1 << 20

_SCRIPT = r"""
import json, sys
import numpy as np
from simgpu.errors import VramExhausted
from simgpu.prover.cupy_device import CupyDevice
from simgpu.prover.device import AllocTrace

seed, cap_mib = int(sys.argv[1]), int(sys.argv[2])
dev = CupyDevice()
dev.flush()
base = int(dev.pool.total_bytes())
dev.set_vram_limit(base + cap_mib * (1 << 20) if cap_mib else None)
dev.alloc_trace = AllocTrace()
rng = np.random.default_rng(seed)
held, refused = [], 0
with dev.peak_scope("kernels"):
    for _ in range(400):
        if held and rng.random() < 0.45:
            dev.free(held.pop(int(rng.integers(len(held)))))
            continue
        words = int(rng.integers(256, 8 << 20))  # 1 KiB to 32 MiB of uint32
        try:
            held.append(dev.alloc("x", (words,), np.uint32))
        except VramExhausted:
            refused += 1
print(json.dumps({"base": base, "refused": refused, "rows": dev.alloc_trace.rows}))
"""


def _traced(seed: int, cap_mib: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(seed), str(cap_mib)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("cap_mib", [0, 256])
def test_the_model_pool_holds_what_cupys_pool_holds_row_by_row(cap_mib: int) -> None:
    """Every row: the model's reserved bytes are the card pool's total less what it held
    before, and every allocation is served or refused as on the card.  Uncapped the pool
    only splits, merges and grows; at 256 MiB it also refuses, flushes and gives back."""
    got = _traced(seed=7 + cap_mib, cap_mib=cap_mib)
    rows, base = got["rows"], got["base"]
    assert sum(r[3] == "malloc" for r in rows) > 150  # the trace saw the allocations
    model = replay(rows, cap_mib * MiB if cap_mib else 1 << 62)
    assert model.disagree == []
    # A "grow" row comes before its malloc row: the card has the new block, the model not yet.
    at = [i for i, r in enumerate(rows) if r[3] != "grow"]
    assert [model.reserved[i] for i in at] == [rows[i][7] - base for i in at]
    assert [model.cached[i] for i in at] == [rows[i][7] - rows[i][6] for i in at]
    if cap_mib:
        assert got["refused"] > 0  # the cap was met, and the model met it at the same rows


_FRESH = r"""
import json, sys, types
sys.path.insert(0, "experiments")
import numpy as np
import gpu_validation
from simgpu.prover.cupy_device import CupyDevice

dev = CupyDevice()
kept = dev.alloc("kept", (1 << 20,), np.uint32)
for words in (3 << 20, 5 << 20, 7 << 20):  # freed: left in the cache, as a run leaves it
    dev.free(dev.alloc("x", (words,), np.uint32))
ex = types.SimpleNamespace(backends=[dev])
first = gpu_validation._fresh_pools(ex)
print(json.dumps({"first": first, "after": gpu_validation._fresh_pools(ex), "kept": kept.nbytes}))
"""


def test_every_validation_run_starts_with_the_last_runs_cache_given_back() -> None:
    """gpu_validation reuses one prover for a group's runs: each run starts with what the
    last left cached given back, and the record says how much that was."""
    out = subprocess.run(
        [sys.executable, "-c", _FRESH], capture_output=True, text=True, timeout=300, check=True
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    (first,), (after,) = got["first"], got["after"]
    assert first["cached"] >= (3 + 5 + 7) * 4 * MiB  # the freed arrays' blocks
    assert first["in_arrays"] >= got["kept"]  # what is still held stays
    assert after == {"device": 0, "in_arrays": first["in_arrays"], "cached": 0}
