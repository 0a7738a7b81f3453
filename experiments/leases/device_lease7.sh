#!/usr/bin/env bash
# The seventh H200 lease (2026-12-01, issue #19): calibrate as the sixth lease did, now
# also timing the kernels and b_g2_msm beside one prestage (fit_device_queue reads the
# copies' demand from that), and the grid again with the prover that no longer gives
# CuPy's cached blocks back before every compute_h under a cap (CupyDevice.flush; each
# run records its flushes).  Outputs go straight under $OUT, so that a call cut short
# still brings back what it wrote.  Calls back to back on one machine:
#   bash experiments/leases/device_lease7.sh 1   # calibrate; the grid at 2^22 on the whole card (A-G)
#   bash experiments/leases/device_lease7.sh 2   # the rest of the grid (caps at 2112 MiB, 2^20, 2^21)
#   bash experiments/leases/device_lease7.sh 3   # pytest -m gpu
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
LOGS=$OUT/lease7/call$1
mkdir -p "$LOGS" out
PROFILE=out/h200-cupy.toml  # kept on the machine between the calls
validate() {  # validate LIMIT ARGS...: one part of experiments/gpu_validation.py's grid
  local limit=$1; shift
  timeout "$limit" python3 experiments/gpu_validation.py measure --profile "$PROFILE" \
    --json "$LOGS/gpu-validation.json" "$@" > "$LOGS/validation.log" 2>&1
  echo "validation rc=$? at $SECONDS s"; tail -n 14 "$LOGS/validation.log"
}
case "$1" in
1)
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc
  lscpu | grep -E "^(Thread|Core|Socket|NUMA node\(s\)|Model name)"
  timeout 380 python3 -m simgpu.cli calibrate --out "$PROFILE" --sizes 2^18..2^22 --repeats 6 --b-g2-on gpu \
    --b-g2-threads 8 --circuit porep --contention-size 2^20 > "$LOGS/calibrate.log" 2>&1
  echo "calibrate rc=$? at $SECONDS s"; grep -E "beside|trip|wrote" "$LOGS/calibrate.log"; cp "$PROFILE" "$LOGS/"
  validate $((585 - SECONDS)) --only A B C D E F G
  ;;
2) validate 560 --tight-mib 22=2112 --only H I J K L M N O P Q R ;;
3) timeout 560 python3 -m pytest -m gpu -q -p no:cacheprovider tests > "$LOGS/pytest-gpu.log" 2>&1
  echo "pytest rc=$? at $SECONDS s"; tail -n 15 "$LOGS/pytest-gpu.log" ;;
esac
