#!/usr/bin/env bash
# The fourth H200 lease of 2026-12-01 (issue #19), after calibrate learned to measure how
# the device shares its work (measure_device_queue) and runs stopped inheriting an
# earlier run's VRAM peak.  Calls back to back on one machine:
#   bash experiments/leases/device_lease4.sh 1   # calibrate; the validation grid at 2^22, whole card
#   bash experiments/leases/device_lease4.sh 2   # the rest of the grid: VRAM caps, 2^20, 2^21
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
LOGS=out/lease4/call$1
mkdir -p "$OUT" "$LOGS" out
PROFILE=out/h200-cupy.toml
case "$1" in
1)
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc
  timeout 330 python3 -m simgpu.cli calibrate --out "$PROFILE" --sizes 2^18..2^22 --repeats 2 --b-g2-on gpu \
    --b-g2-threads 8 --circuit porep --contention-size 2^20 > "$LOGS/calibrate.log" 2>&1
  echo "calibrate rc=$? at $SECONDS s"; grep -E "beside|wrote" "$LOGS/calibrate.log"; cp "$PROFILE" "$LOGS/"
  timeout $((585 - SECONDS)) python3 experiments/gpu_validation.py measure --profile "$PROFILE" \
    --json "$LOGS/gpu-validation.json" --only A B C D E F G > "$LOGS/validation.log" 2>&1
  echo "validation rc=$? at $SECONDS s"; tail -n 16 "$LOGS/validation.log"
  ;;
2)
  timeout 570 python3 experiments/gpu_validation.py measure --profile "$PROFILE" \
    --json "$LOGS/gpu-validation.json" --only H I J K L M N O P Q R > "$LOGS/validation.log" 2>&1
  echo "validation rc=$? at $SECONDS s"; tail -n 16 "$LOGS/validation.log"
  ;;
esac
tar czf "$OUT/lease4-call$1.tgz" -C out/lease4 "call$1"
