#!/usr/bin/env bash
# The eighth H200 lease (2026-12-01, issue #19): calibrate with the k syntheses at once
# started together (a barrier, every pool worker up first) and the pressure read from
# the fastest of six calls each way; then the grid, the capped group at 2176 MiB (at
# 2112 MiB the seventh lease found single-lock, two-lock-reserve and split-finalizer
# each running out of memory in one run of three: a race), and a second pass of it.
# Outputs go straight under $OUT.  Calls back to back on one machine:
#   bash experiments/device_lease8.sh 1   # calibrate; the grid at 2^22 on the whole card (A-G)
#   bash experiments/device_lease8.sh 2   # the capped group at 2176 MiB, 2^20, 2^21 (H-R)
#   bash experiments/device_lease8.sh 3   # a second run of every configuration run once
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
LOGS=$OUT/lease8/call$1
mkdir -p "$LOGS" out
PROFILE=out/h200-cupy.toml  # kept on the machine between the calls
validate() {  # validate LIMIT NAME ARGS...: one part of experiments/gpu_validation.py's grid
  local limit=$1 name=$2; shift 2
  timeout "$limit" python3 experiments/gpu_validation.py measure --profile "$PROFILE" --tight-mib 22=2176 \
    --json "$LOGS/$name.json" "$@" > "$LOGS/$name.log" 2>&1
  echo "$name rc=$? at $SECONDS s"; grep -E "s/proof" "$LOGS/$name.log" | cut -c1-120
}
case "$1" in
1)
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc
  lscpu | grep -E "^(Model name|NUMA node\(s\))"
  timeout 400 python3 -m simgpu.cli calibrate --out "$PROFILE" --sizes 2^18..2^22 --repeats 6 --b-g2-on gpu \
    --b-g2-threads 8 --circuit porep --contention-size 2^20 > "$LOGS/calibrate.log" 2>&1
  echo "calibrate rc=$? at $SECONDS s"; grep -E "at once|beside|trip|wrote" "$LOGS/calibrate.log"; cp "$PROFILE" "$LOGS/"
  validate $((585 - SECONDS)) gpu-validation --only A B C D E F G
  ;;
2) validate 400 gpu-validation --only H I J K L M N O P Q R ;;
3) validate 300 second-pass --only A C F G H I J K L M N O P Q R ;;
esac
