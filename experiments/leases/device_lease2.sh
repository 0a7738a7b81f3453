#!/usr/bin/env bash
# The second H200 lease of 2026-12-01 (issue #19), after synthesis results moved to shared
# memory: calibrate with b_g2_msm on the GPU (bellperson's choice), then the GPU-bound
# validation configurations at 2^22 that the remaining device time allows.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
LOGS=out/lease/call5
mkdir -p "$OUT" "$LOGS"
PROFILE=out/h200-cupy.toml
t0=$SECONDS
timeout 140 python3 -m simgpu.cli calibrate --out "$PROFILE" --sizes 2^18..2^22 --repeats 2 --b-g2-on gpu \
  --b-g2-threads 8 --circuit porep --contention-size 2^20 > "$LOGS/calibrate.log" 2>&1
echo "calibrate rc=$? in $((SECONDS - t0)) s"; tail -n 4 "$LOGS/calibrate.log"; cp "$PROFILE" "$LOGS/"
timeout $((255 - SECONDS)) python3 experiments/gpu_validation.py measure --profile "$PROFILE" \
  --json "$LOGS/gpu-validation.json" --only A B D E F > "$LOGS/validation.log" 2>&1
echo "validation rc=$? at $((SECONDS - t0)) s"; tail -n 14 "$LOGS/validation.log"
tar czf "$OUT/call5.tgz" -C out/lease call5
