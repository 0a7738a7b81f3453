#!/usr/bin/env bash
# The thirtieth lease (issue #19, items 4 and 5): device_lease28.sh's calls 1-4 folded into
# three for one session's 1800 s of device time (docs/validation.md, "What the
# twenty-seventh lease settled", its last paragraph):
#   call 1: calibrate with its contention runs (device pairings, pressure, the
#           interpreter lock) at 2^22, where the grid runs, then the uncapped 2^22
#           group A-G;
#   call 2: the GPU test suite (not run since the copier crews are handed on), then H-R
#           (the capped group at 2176 MiB and the 2^20/2^21 groups);
#   call 3: a second pass of A-G for the run-to-run spread, then the capped group as
#           many times as the call's time allows.
# The session that wrote it lost 6 of its 30 minutes to machines that did not start, so
# call 2 comes before call 3 in what it settles.
# Since the thirtieth lease calibrate also times the driver's stages beside results
# coming back (measure_handoff, docs/validation.md "Results coming back and the
# driver's stages"): read the grid against the calibration's `handoff` sensitivities.
# Every run starts with the pools' caches given back (gpu_validation._fresh_pools).  A call
# that finds a fresh machine (no profile) calibrates first and says so.  Carry .whl,
# out/cubins.txz and, on call 1 only, nothing else: a carried profile would replace the
# one call 1 wrote.  `bash experiments/leases/aside.sh out` before a call, `in` after.
#
#   bash experiments/leases/device_lease30.sh 1|2|3 [END]
# END (default 585): the second of the call by which its last step must end.
source "$(dirname "$0")/lease_lib.sh"
lease_start lease30 "${1:?which call: 1 to 3}" "${2:-585}"
lease_watch
export CONTENTION=2^22
calibrate_if_fresh() {
  [ -f "$PROFILE" ] || { echo "FRESH MACHINE: no $PROFILE, calibrating again"; calibrate_spanned 400 --msm-capacity key; }
}
if [ "$CALL" = 1 ]; then
  calibrate_spanned 400 --msm-capacity key
  lease_validate "$(until_ 585)" grid-A-G 2176 --only A B C D E F G
elif [ "$CALL" = 2 ]; then
  calibrate_if_fresh
  timeout "$(until_ 200)" python3 -m pytest -q -m gpu -p no:cacheprovider > "$LOGS/pytest-gpu.log" 2>&1
  echo "pytest -m gpu rc=$? at $SECONDS s"; tail -3 "$LOGS/pytest-gpu.log"
  lease_validate "$(until_ 585)" grid-H-R 2176 --only H I J K L M N O P Q R
else
  calibrate_if_fresh
  lease_validate "$(until_ 250)" second-pass 2176 --only A B C D E F G
  k=2
  while [ "$(until_ "$END")" -gt 60 ]; do
    lease_validate "$(until_ "$END")" capped-$k 2176 --only H I J K; k=$((k + 1))
  done
fi
lease_finish
