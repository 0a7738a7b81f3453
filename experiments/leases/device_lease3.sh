#!/usr/bin/env bash
# The third H200 lease of 2026-12-01 (issue #19): calls back to back on one machine.
#   bash experiments/leases/device_lease3.sh 1   # GPU tests after the layout move; where the pool's peak comes from
#   bash experiments/leases/device_lease3.sh 2   # calibrate (porep, b_g2_msm on the GPU); the validation grid, part 1
#   bash experiments/leases/device_lease3.sh 3   # the validation grid, part 2 (same machine as call 2)
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
PROBE="run --backend cupy --circuit porep --b-g2-on gpu --constraints 2^20 --partitions 4 -n 4 -j 3"
case "$1" in
1)
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  nproc; grep -m1 "model name" /proc/cpuinfo; python3 -c "import numpy, numba; print(numpy.__version__, numba.__version__)"
  step 240 gpu_tests python3 -m pytest -m gpu -q -p no:cacheprovider tests/
  TAIL=10 step 100 probe_serial2 python3 experiments/vram_peak_probe.py --json "$LOGS/probe-serial2.json" -- \
    $PROBE -d serial --gpu-workers 2 --json
  TAIL=10 step 80 probe_single1 python3 experiments/vram_peak_probe.py --json "$LOGS/probe-single1.json" -- \
    $PROBE -d single-lock --gpu-workers 1 --json
  ;;
2)
  step 200 calibrate python3 -m simgpu.cli calibrate --out "$PROFILE" --sizes 2^18..2^22 --repeats 2 --b-g2-on gpu \
    --b-g2-threads 8 --circuit porep --contention-size 2^20
  cp "$PROFILE" "$LOGS/" 2>/dev/null
  TAIL=4 step 90 probe_serial2_22 python3 experiments/vram_peak_probe.py --json "$LOGS/probe-serial2-22.json" -- \
    ${PROBE/2^20/2^22} -d serial --gpu-workers 2 --b-g2-threads 8 --json
  TAIL=30 step $((570 - SECONDS)) validation python3 experiments/gpu_validation.py measure --profile "$PROFILE" \
    --json "$LOGS/gpu-validation.json" ${GRID_1:-}
  cp "$PROFILE" out/ 2>/dev/null
  ;;
3)
  TAIL=30 step 560 validation python3 experiments/gpu_validation.py measure --profile "$PROFILE" \
    --json "$LOGS/gpu-validation.json" ${GRID_2:-}
  ;;
esac
tar czf "$OUT/call$1.tgz" -C out/lease "call$1"
