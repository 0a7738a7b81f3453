#!/usr/bin/env bash
# One device call: calibrate the prover on this GPU, then validate predictions against
# real runs.  Logs and results go to $OUT.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
mkdir -p "$OUT" out
t0=$SECONDS
timeout 330 python3 -m simgpu.cli calibrate --out calibration/h200-cupy.toml --sizes "${SIZES:-2^14..2^22}" \
  --repeats 3 --b-g2-threads 4 2>&1 | tee "$OUT/calibrate.log" | tail -n 30
echo "=== calibrate done in $((SECONDS - t0)) s"
cp calibration/h200-cupy.toml "$OUT/" 2>/dev/null
timeout 240 python3 experiments/validation_sweep.py --profile calibration/h200-cupy.toml --constraints 2^20 \
  --partitions 4 --proofs 3 --partition-workers 8 --runs 5 2>&1 | tee "$OUT/sweep.log" | tail -n 30
cp docs/validation.md out/validation.json "$OUT/" 2>/dev/null
echo "=== all done in $((SECONDS - t0)) s"
