"""Drive the kernels' own code on the CPU: build tests/host_harness/harness.cpp with g++
against simgpu/gpu and the generated constants header, and expose it through
the same backend interfaces the GPU drivers use (simgpu.gpu.ntt / simgpu.gpu.msm),
with numpy arrays standing in for device arrays."""

from __future__ import annotations

import hashlib
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simgpu.gpu.cuda import KERNEL_DIR, constants_header

HERE = Path(__file__).resolve().parent


def compiler() -> str | None:
    return shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")


def build() -> Path:
    """Compile the harness (cached by the hash of every source it includes)."""
    cxx = compiler()
    if cxx is None:
        raise RuntimeError("no C++ compiler")
    srcs = sorted(KERNEL_DIR.glob("*.cu*")) + [HERE / "harness.cpp"]
    h = hashlib.sha256(constants_header().encode())
    for s in srcs:
        h.update(s.read_bytes())
    out_dir = Path(tempfile.gettempdir()) / f"simgpu_harness_{h.hexdigest()[:16]}"
    exe = out_dir / "harness"
    if exe.exists():
        return exe
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "constants.cuh").write_text(constants_header())
    tmp = out_dir / f"harness.{id(out_dir)}.tmp"
    cmd = [cxx, "-O2", "-std=c++17", "-w", f"-I{KERNEL_DIR}", f"-I{out_dir}", "-x", "c++",
           str(HERE / "harness.cpp"), "-o", str(tmp)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    tmp.replace(exe)
    return exe


class Harness:
    def __init__(self) -> None:
        self.proc = subprocess.Popen([str(build())], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def call(self, op: int, scalars: Sequence[int], arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        arrs = [np.ascontiguousarray(a, dtype=np.uint32).reshape(-1) for a in arrays]
        msg = [struct.pack("<II", op, len(scalars)), struct.pack(f"<{len(scalars)}I", *scalars)]
        msg.append(struct.pack("<I", len(arrs)))
        for a in arrs:
            msg.append(struct.pack("<I", a.size))
            msg.append(a.tobytes())
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(b"".join(msg))
        self.proc.stdin.flush()
        out = []
        for a, orig in zip(arrs, arrays, strict=True):
            raw = self.proc.stdout.read(4 * a.size)
            if len(raw) != 4 * a.size:
                raise RuntimeError(f"harness died (op {op})")
            out.append(np.frombuffer(raw, dtype=np.uint32).reshape(np.shape(orig)).copy())
        return out

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin
            self.proc.stdin.write(struct.pack("<I", 0))
            self.proc.stdin.close()
            self.proc.wait(timeout=10)


class HostNttBackend:
    """simgpu.gpu.ntt.NttLauncher on the harness: numpy arrays, kernels run on the CPU."""

    xp = np

    def __init__(self, h: Harness) -> None:
        self.h = h

    def upload(self, limbs: np.ndarray) -> np.ndarray:
        return np.array(limbs, dtype=np.uint32)

    def _batch(self, vecs: Sequence[np.ndarray]) -> np.ndarray:
        return np.concatenate([v.reshape(-1) for v in vecs])

    def _scatter(self, vecs: Sequence[np.ndarray], data: np.ndarray) -> None:
        n = vecs[0].size
        for i, v in enumerate(vecs):
            v.reshape(-1)[:] = data[i * n : (i + 1) * n]

    def ntt_pass(self, vecs, dif, log_n, log_s, k, tile_log, inverse, tw, tw_log, pre, post):
        empty = np.zeros(0, dtype=np.uint32)
        sc = [int(dif), log_n, log_s, k, tile_log, int(inverse), tw_log,
              pre.mode if pre else 0, int(pre.bitrev) if pre else 0,
              post.mode if post else 0, int(post.bitrev) if post else 0, len(vecs)]  # fmt: skip
        arrays = [self._batch(vecs), tw, pre.lo if pre else empty, pre.hi if pre else empty,
                  post.lo if post else empty, post.hi if post else empty]  # fmt: skip
        out = self.h.call(3, sc, arrays)
        self._scatter(vecs, out[0])

    def bitrev(self, vecs, log_n, cst):
        from simgpu.gpu.ntt import BITREV_TILE_MIN_LOG

        use = cst is not None
        op = 16 if log_n >= BITREV_TILE_MIN_LOG else 4  # the kernel the GPU launcher picks
        out = self.h.call(op, [log_n, len(vecs), int(use)],
                          [self._batch(vecs), cst if use else np.zeros(8, np.uint32)])  # fmt: skip
        self._scatter(vecs, out[0])

    def mul_const(self, x, cst):
        x[...] = self.h.call(5, [x.size // 8, 0], [x, cst])[0]

    def pointwise(self, a, b, c, zinv):
        a[...] = self.h.call(6, [a.size // 8], [a, b, c, zinv])[0]

    def twiddles(self, count, lo, hi):
        return self.h.call(7, [count], [np.zeros((count, 8), np.uint32), lo, hi])[0]


class HostMsmBackend:
    """simgpu.gpu.msm.MsmLauncher on the harness.  Every allocation goes through alloc(),
    which keeps a running total and its peak: the host check of the footprint model."""

    xp = np

    def __init__(self, h: Harness) -> None:
        self.h = h
        self.current = 0
        self.peak = 0

    def _track(self, a: np.ndarray) -> np.ndarray:
        import weakref

        size = a.nbytes
        self.current += size
        self.peak = max(self.peak, self.current)

        def release(s: int = size) -> None:
            self.current -= s

        weakref.finalize(a, release)
        return a

    def alloc(self, shape: Any, zero: bool = False) -> np.ndarray:
        return self._track(np.zeros(shape, dtype=np.uint32))

    def upload(self, limbs: np.ndarray) -> np.ndarray:
        return self._track(np.array(limbs, dtype=np.uint32))

    def to_host(self, a: np.ndarray) -> np.ndarray:
        return np.array(a)

    def read_int(self, a: np.ndarray) -> int:
        return int(a)

    def digits(self, scalars, n, c, nwin, counts, sorted_, overflow, scatter):
        out = self.h.call(8, [n, c, nwin, int(scatter)], [scalars, counts, sorted_, overflow])
        counts[...] = out[1]
        sorted_[...] = out[2]
        overflow[...] = out[3]

    def accumulate(self, bases, sorted_, bucket_off, rank, nb, t, nthreads, out, group=None):
        code = group.code if group else 1
        r = self.h.call(10, [nb, t, nthreads, code], [bases, sorted_, bucket_off, rank, out])
        out[...] = r[4]

    def ranges(self, bucket_off, rank, nb, t, start, end):
        r = self.h.call(14, [nb, t], [bucket_off, rank, start, end])
        start[...] = r[2]
        end[...] = r[3]

    def reduce(self, src, src_start, src_end, piece_off, nb, t, npieces, out, group=None):
        code = group.code if group else 1
        r = self.h.call(11, [nb, t, npieces, code], [src, src_start, src_end, piece_off, out])
        out[...] = r[4]

    def bucket_sums(self, sums, start, end, b, seg, nseg, total, out, group=None):
        code = group.code if group else 1
        r = self.h.call(12, [b, seg, nseg, total, code], [sums, start, end, out])
        out[...] = r[3]

    def seg_offsets(self, segs, seg, nseg, total, group=None):
        code = group.code if group else 1
        segs[...] = self.h.call(15, [seg, nseg, total, code], [segs])[0]

    def fixed_base(self, scalars, n, table, chunk, nthreads, out, tmp):
        r = self.h.call(13, [n, chunk, nthreads], [scalars, table, out, tmp])
        out[...] = r[2]
        tmp[...] = r[3]

    def fp_mul_const(self, x, count, cst):
        x[...] = self.h.call(5, [count, 1], [x, cst])[0]

    def field(self, which: int, op: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        count = a.shape[0]
        return self.h.call(1, [which, op, count], [a, b, np.zeros_like(a)])[2]

    def g1(self, op: int, a: np.ndarray, b: np.ndarray, k: int = 0) -> np.ndarray:
        count = a.shape[0]
        return self.h.call(2, [op, count, k, 1], [a, b, np.zeros((count, 48), np.uint32)])[2]

    def g2(self, op: int, a: np.ndarray, b: np.ndarray, k: int = 0) -> np.ndarray:
        """G2 curve ops on XYZZ rows (count, 96) and affine (count, 48) or XYZZ b rows."""
        count = a.shape[0]
        return self.h.call(2, [op, count, k, 2], [a, b, np.zeros((count, 96), np.uint32)])[2]

    def fp2(self, op: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Fp2 ops (0 mul, 1 add, 2 sub, 3 sqr, 4 neg) on rows of 24 words."""
        count = a.shape[0]
        return self.h.call(9, [op, count], [a, b, np.zeros_like(a)])[2]
