#!/usr/bin/env bash
# The next H200 lease (issue #19), ready to run: calibrate (its memory plan now writes each
# MSM's footprint as staging then temporaries, so no offline split is needed), the grid
# with its capped group at 2176 MiB and a second pass, and the upper edge of the
# two-lock-reserve cap window, which the ninth lease put between 2500 and 2650 MiB and the
# model between 2400 and 2500: J at 2500, 2575 and 2650 MiB with every allocation and free
# of CuPy's pool recorded (--alloc-trace), for replaying through the model's caching pool
# (simgpu.devicepool.replay); then pytest -m gpu.
# Outputs go straight under $OUT.  Calls back to back on one machine:
#   bash experiments/leases/device_lease10.sh 1   # calibrate; the grid at 2^22 on the whole card (A-G)
#   bash experiments/leases/device_lease10.sh 2   # the capped group at 2176 MiB, 2^20, 2^21 (H-R)
#   bash experiments/leases/device_lease10.sh 3   # J traced at 2500, 2575, 2650 MiB; a second pass
#   bash experiments/leases/device_lease10.sh 4   # pytest -m gpu
# The device returns at most eight files a call, 16 MiB each: call 3 writes six, its traced
# records compressed.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
LOGS=$OUT/lease10/call$1
mkdir -p "$LOGS" out
PROFILE=out/h200-cupy.toml  # kept on the machine between the calls
source "$(dirname "$0")/lease_lib.sh"
case "$1" in
1)
  lease_machine
  lease_calibrate 420
  lease_validate $((585 - SECONDS)) gpu-validation 2176 --only A B C D E F G
  ;;
2) lease_validate 420 gpu-validation 2176 --only H I J K L M N O P Q R ;;
3) for cap in 2500 2575 2650; do
     lease_validate 70 "reserve-$cap" "$cap" --only J --alloc-trace J
     cat "$LOGS/reserve-$cap.log" >> "$LOGS/reserve.log" && rm "$LOGS/reserve-$cap.log"
     gzip -f "$LOGS/reserve-$cap.json"
   done
   lease_validate $((540 - SECONDS)) second-pass 2176 --only A C F G L M N O Q R ;;
4) timeout 560 python3 -m pytest -m gpu -q -p no:cacheprovider tests > "$LOGS/pytest-gpu.log" 2>&1
   echo "pytest rc=$? at $SECONDS s"; tail -n 15 "$LOGS/pytest-gpu.log" ;;
esac
