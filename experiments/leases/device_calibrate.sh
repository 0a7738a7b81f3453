#!/usr/bin/env bash
# Calibrate the prover on this GPU, then validate predictions against real runs.  Each
# step takes 5-7 minutes on the H200, so on the device run them as two calls, back to
# back (the keys under out/keys stay while the machine is warm):
#   bash experiments/leases/device_calibrate.sh calibrate
#   bash experiments/leases/device_calibrate.sh sweep
# Logs and results go to $OUT.  Calibrate and validate on one machine: the H200 machines
# are virtual machines on hosts whose CPUs differ (b_g2_msm took 3.3 s at 2^20 on one,
# 2.2 s on another).  PROFILE=out/h200-cupy.toml keeps the profile under an ignored path,
# which a warm machine keeps between the two calls, where a tracked file would be
# replaced by the working tree's copy.
set -u
PROFILE=${PROFILE:-simgpu/profile/profiles/h200-cupy.toml}
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
STEP=${1:-all}
mkdir -p "$OUT" out
t0=$SECONDS
if [ "$STEP" = calibrate ] || [ "$STEP" = all ]; then
  timeout 450 python3 -m simgpu.cli calibrate --out "$PROFILE" --sizes "${SIZES:-2^14..2^22}" \
    --repeats 3 --b-g2-threads 4 --contention-size "${CONTENTION_SIZE:-2^20}" 2>&1 | tee "$OUT/calibrate.log" | tail -n 30
  echo "=== calibrate done in $((SECONDS - t0)) s"
  cp "$PROFILE" "$OUT/h200-cupy.toml" 2>/dev/null
fi
if [ "$STEP" = sweep ] || [ "$STEP" = all ]; then
  timeout 540 python3 experiments/validation_sweep.py --profile "$PROFILE" --constraints 2^20 \
    --partitions 4 --proofs 3 --partition-workers 8 --runs 5 --out "$OUT/validation.md" \
    --json "$OUT/validation.json" 2>&1 | tee "$OUT/sweep.log" | tail -n 30
fi
echo "=== done in $((SECONDS - t0)) s"
