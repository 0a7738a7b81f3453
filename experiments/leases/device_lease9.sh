#!/usr/bin/env bash
# The next H200 lease (issue #19), ready to run: calibrate as the eighth lease did, which
# now also records each driver stage beside a thread of pure Python (measure_gil: not
# fitted until checked here: `experiments/refit_uses.py --gil` on this lease's profile,
# then `gpu_validation.py predict` with and without); the grid with its capped group at
# 2176 MiB and a second pass; the model's prediction that two-lock-reserve with three
# workers fails every proof at 2300 MiB though it completes at 2176 (J at 2300: call 3);
# and pytest -m gpu.  Outputs go straight under $OUT.  Calls back to back on one machine:
#   bash experiments/leases/device_lease9.sh 1   # calibrate; the grid at 2^22 on the whole card (A-G)
#   bash experiments/leases/device_lease9.sh 2   # the capped group at 2176 MiB, 2^20, 2^21 (H-R)
#   bash experiments/leases/device_lease9.sh 3   # a second pass of every configuration run once; J at 2300 MiB
#   bash experiments/leases/device_lease9.sh 4   # pytest -m gpu
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
LOGS=$OUT/lease9/call$1
mkdir -p "$LOGS" out
PROFILE=out/h200-cupy.toml  # kept on the machine between the calls
source "$(dirname "$0")/lease_lib.sh"
case "$1" in
1)
  lease_machine
  lease_calibrate 420
  lease_validate $((585 - SECONDS)) gpu-validation 2176 --only A B C D E F G
  ;;
2) lease_validate 400 gpu-validation 2176 --only H I J K L M N O P Q R ;;
3) lease_validate 300 second-pass 2176 --only A C F G H I J K L M N O P Q R
   lease_validate 120 reserve-2300 2300 --only J ;;
4) timeout 560 python3 -m pytest -m gpu -q -p no:cacheprovider tests > "$LOGS/pytest-gpu.log" 2>&1
   echo "pytest rc=$? at $SECONDS s"; tail -n 15 "$LOGS/pytest-gpu.log" ;;
esac
