#!/usr/bin/env bash
# One device call: GPU tests of the prover and the kernels, the prover benchmark, a real
# run.  Each step has its own time limit; logs go to $OUT.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
mkdir -p "$OUT" out
step() { local limit=$1 name=$2; shift 2; echo "=== $name (limit ${limit}s)"; local t0=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; local rc=$?
  echo "=== $name: rc=$rc in $((SECONDS - t0)) s"; tail -n 25 "$OUT/$name.log"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
step 170 gpu_prover python3 -m pytest -m gpu -q -x tests/test_groth16_gpu.py
step 140 gpu_kernels python3 -m pytest -m gpu -q tests/test_kernels_gpu.py
step 200 bench_prover python3 benchmarks/bench_prover.py --min-log 16 --max-log "${MAX_LOG:-20}" --repeat 3 --threads 8
cp docs/benchmarks.md out/bench_prover.json "$OUT/" 2>/dev/null
step 60 run_two_lock python3 -m simgpu.cli run --design two-lock --constraints 2^18 --partitions 4 --proofs 2 -j 2 --gpu-workers 2 --partition-workers 8
