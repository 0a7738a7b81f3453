#!/usr/bin/env bash
# The thirty-second lease (issue #19, items 4 and 5): device_lease30.sh's three calls, its
# calibration reading what each stage meets at 2^20 too (`--pairing-sizes 2^20`: the
# pressure pairs, the device's pairings and results coming back, as at 2^22), so that a
# stage's shares follow its size (docs/validation-log.md, the thirty-first lease: one
# pairing read at 2^22 set the prestage's share at 2^20, 51-138% slow there).  About 40 s
# more of calibrate at 2^20.
#   call 1: calibrate (contention at 2^22, the stages' readings at 2^20 too), then the
#           uncapped 2^22 group A-G;
#   call 2: H-R (the capped group at 2176 MiB and the 2^20/2^21 groups), then the 2^20
#           group once more;
#   call 3: a second pass of A-G for the run-to-run spread, then the capped group as
#           many times as the call's time allows.
# Carry .whl and out/cubins.txz only; `bash experiments/leases/aside.sh out` before a
# call, `in` after.  A call that finds a fresh machine (no profile) calibrates first.
#
#   bash experiments/leases/device_lease32.sh 1|2|3 [END]
# END (default 585): the second of the call by which its last step must end.
source "$(dirname "$0")/lease_lib.sh"
lease_start lease32 "${1:?which call: 1 to 3}" "${2:-585}"
lease_watch
export CONTENTION=2^22
calibrate_if_fresh() {
  [ -f "$PROFILE" ] || { echo "FRESH MACHINE: no $PROFILE, calibrating again"; calibrate_spanned 440 --msm-capacity key --pairing-sizes 2^20; }
}
if [ "$CALL" = 1 ]; then
  calibrate_spanned 440 --msm-capacity key --pairing-sizes 2^20
  lease_validate "$(until_ 585)" grid-A-G 2176 --only A B C D E F G
elif [ "$CALL" = 2 ]; then
  calibrate_if_fresh
  lease_validate "$(until_ 400)" grid-H-R 2176 --only H I J K L M N O P Q R
  lease_validate "$(until_ "$END")" again-L-P 2176 --only L M N O P
else
  calibrate_if_fresh
  lease_validate "$(until_ 250)" second-pass 2176 --only A B C D E F G
  k=2
  while [ "$(until_ "$END")" -gt 60 ]; do
    lease_validate "$(until_ "$END")" capped-$k 2176 --only H I J K; k=$((k + 1))
  done
fi
lease_finish
