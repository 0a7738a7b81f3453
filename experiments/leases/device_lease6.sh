#!/usr/bin/env bash
# The sixth H200 lease of 2026-12-01 (issue #19), after calibrate learned to measure the
# pressure busy cores put on each other (measure_pressure: each driver stage alone and
# beside a continuous load of syntheses, fitted into the `pressure` resource), with the
# fifth lease's trips back and six repeats a size.  Outputs go straight under $OUT, so
# that a call cut short still brings back what it wrote.
# Calls back to back on one machine:
#   bash experiments/leases/device_lease6.sh 1   # calibrate; the validation grid at 2^22, whole card
#   bash experiments/leases/device_lease6.sh 2   # the rest of the grid (caps at 2112 MiB, 2^20, 2^21)
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
LOGS=$OUT/lease6/call$1
mkdir -p "$OUT" "$LOGS" out
PROFILE=out/h200-cupy.toml  # kept on the machine between the calls
case "$1" in
1)
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc
  lscpu | grep -E "^(Thread|Core|Socket|NUMA node\(s\)|Model name)"
  timeout 380 python3 -m simgpu.cli calibrate --out "$PROFILE" --sizes 2^18..2^22 --repeats 6 --b-g2-on gpu \
    --b-g2-threads 8 --circuit porep --contention-size 2^20 > "$LOGS/calibrate.log" 2>&1
  echo "calibrate rc=$? at $SECONDS s"; grep -E "beside|trip|wrote" "$LOGS/calibrate.log"; cp "$PROFILE" "$LOGS/"
  timeout $((585 - SECONDS)) python3 experiments/gpu_validation.py measure --profile "$PROFILE" \
    --json "$LOGS/gpu-validation.json" --only A B C D E F G > "$LOGS/validation.log" 2>&1
  echo "validation rc=$? at $SECONDS s"; tail -n 14 "$LOGS/validation.log"
  ;;
2)
  timeout 330 python3 experiments/gpu_validation.py measure --profile "$PROFILE" --tight-mib 22=2112 \
    --json "$LOGS/gpu-validation.json" --only H I J K L M N O P Q R > "$LOGS/validation.log" 2>&1
  echo "validation rc=$? at $SECONDS s"; tail -n 12 "$LOGS/validation.log"
  ;;
esac
