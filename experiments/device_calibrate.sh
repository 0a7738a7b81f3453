#!/usr/bin/env bash
# Calibrate the prover on this GPU, then validate predictions against real runs.  Each
# step takes 5-7 minutes on the H200, so on the device run them as two calls, back to
# back (the keys under out/keys stay while the machine is warm):
#   bash experiments/device_calibrate.sh calibrate
#   bash experiments/device_calibrate.sh sweep
# Logs and results go to $OUT.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
STEP=${1:-all}
mkdir -p "$OUT" out
t0=$SECONDS
if [ "$STEP" = calibrate ] || [ "$STEP" = all ]; then
  timeout 450 python3 -m simgpu.cli calibrate --out calibration/h200-cupy.toml --sizes "${SIZES:-2^14..2^22}" \
    --repeats 3 --b-g2-threads 4 --contention-size "${CONTENTION_SIZE:-2^20}" 2>&1 | tee "$OUT/calibrate.log" | tail -n 30
  echo "=== calibrate done in $((SECONDS - t0)) s"
  cp calibration/h200-cupy.toml "$OUT/" 2>/dev/null
fi
if [ "$STEP" = sweep ] || [ "$STEP" = all ]; then
  timeout 540 python3 experiments/validation_sweep.py --profile calibration/h200-cupy.toml --constraints 2^20 \
    --partitions 4 --proofs 3 --partition-workers 8 --runs 5 --out "$OUT/validation.md" \
    --json "$OUT/validation.json" 2>&1 | tee "$OUT/sweep.log" | tail -n 30
fi
echo "=== done in $((SECONDS - t0)) s"
