#!/usr/bin/env bash
# The fifth H200 lease of 2026-12-01 (issues #19 and #15), after calibrate learned to
# measure the synthesis results' trips back (measure_trips) and with six repeats a size
# (the driver's stages are bimodal on these machines: prestage at 2^22 ran 92-105 or
# 130-155 ms from call to call, the epilogue 17 or 30-35 ms; two repeats caught one mode).
# Calls back to back on one machine:
#   bash experiments/leases/device_lease5.sh 1   # calibrate; the validation grid at 2^22, whole card
#   bash experiments/leases/device_lease5.sh 2   # the rest of the grid (caps at 2112 MiB, 2^20, 2^21); the log importer's check
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
LOGS=out/lease5/call$1
mkdir -p "$OUT" "$LOGS" out
PROFILE=out/h200-cupy.toml
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
  timeout $((560 - SECONDS)) python3 experiments/fromlog_check.py --backend cupy --base "$PROFILE" --circuit porep \
    --b-g2-on gpu --b-g2-threads 8 --proofs 12 --out "$LOGS/fromlog" > "$LOGS/fromlog.log" 2>&1
  echo "fromlog rc=$? at $SECONDS s"; tail -n 8 "$LOGS/fromlog.log"
  ;;
esac
tar czf "$OUT/lease5-call$1.tgz" -C out/lease5 "call$1"
