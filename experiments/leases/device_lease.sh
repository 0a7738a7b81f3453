#!/usr/bin/env bash
# The H200 lease of 2026-12-01 (issue #19): calls back to back on one machine, so that the
# calibration and the validation share a host (and the key cache under out/keys).
#   bash experiments/leases/device_lease.sh 1   # GPU tests, calibrate (porep, b_g2_msm on 8 cores), b_g2 CPU vs GPU
#   bash experiments/leases/device_lease.sh 2   # the GPU-bound validation grid (experiments/gpu_validation.py)
#   bash experiments/leases/device_lease.sh 3   # the log importer on the GPU prover (experiments/fromlog_check.py)
# Every step has its own time limit; each call packs its logs into one archive under $OUT.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
LOGS=out/lease/call$1
mkdir -p "$OUT" "$LOGS" out
step() { local limit=$1 name=$2; shift 2; echo "=== $name (limit ${limit}s)"; local t0=$SECONDS
  timeout "$limit" "$@" > "$LOGS/$name.log" 2>&1; local rc=$?
  echo "=== $name: rc=$rc in $((SECONDS - t0)) s"; tail -n "${TAIL:-12}" "$LOGS/$name.log"; }
PROFILE=out/h200-cupy.toml
case "$1" in
1)
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  nproc; grep -m1 "model name" /proc/cpuinfo
  step 230 gpu_tests python3 -m pytest -m gpu -q -p no:cacheprovider tests/
  step 330 calibrate python3 -m simgpu.cli calibrate --out "$PROFILE" --sizes 2^16..2^22 --repeats 3 \
    --b-g2-threads 8 --circuit porep --contention-size 2^20
  cp "$PROFILE" "$LOGS/" 2>/dev/null
  step 80 b_g2_compare python3 experiments/b_g2_compare.py --constraints 2^22 --circuit porep --threads 8 \
    --json "$LOGS/b_g2_compare.json"
  ;;
2)
  TAIL=40 step 560 validation python3 experiments/gpu_validation.py measure --profile "$PROFILE" \
    --json "$LOGS/gpu-validation.json"
  ;;
3)
  TAIL=30 step 280 fromlog python3 experiments/fromlog_check.py --backend cupy --base "$PROFILE" \
    --circuit porep --b-g2-threads 8 --partition-workers 8 --out "$LOGS/fromlog"
  ;;
esac
tar czf "$OUT/call$1.tgz" -C out/lease "call$1"
