#!/usr/bin/env bash
# The thirty-fifth lease (issue #19, items 4 and 5), planned after the thirty-fourth:
#   call 1: device_lease34.sh's calibration (the interpreter lock now read beside a bursty
#           neighbour too) and anchored grid A-R;
#   call 2: the question the thirty-fourth's probe left (docs/validation-log.md): beside
#           12 and 15 syntheses of 16 cores a driver stage at 2^20 took 1.3-3.6x its time
#           alone, where calibrate's pressure, read beside 8, is linear.  The grid runs 8
#           synthesis workers, whose pipelines keep at most 9-11 cores busy; this runs L,
#           B and E with 12 and 15 (`--partition-workers`, anchored), which the model
#           predicts with the same law, then the 2^20 group once more for its spread.
# Predict the second call's groups with their own worker count:
#   python experiments/gpu_validation.py predict --profile $D/call1/h100-cupy-key.toml \
#       --json $D/call2/pw12.json --partition-workers 12 --out out/pw12.md --anchored
# Carry .whl and out/cubins.txz only; `bash experiments/leases/aside.sh out lean` before a
# call, `in` after.  A second call that finds a fresh machine calibrates first.
#
#   bash experiments/leases/device_lease35.sh 1|2 [END]
# END (default 560): the second of the call by which its last step must end.
source "$(dirname "$0")/lease_lib.sh"
lease_start lease35 "${1:?which call: 1 or 2}" "${2:-560}"
lease_watch
export CONTENTION=2^22
if [ "$CALL" = 1 ]; then
  calibrate_spanned 350 --msm-capacity key --pairing-sizes 2^20
  lease_validate "$(until_ 470)" grid-A-G 2176 --only A B C D E F G --anchor
  lease_validate "$(until_ "$END")" grid-H-R 2176 --only L M N O P Q R H I J K --anchor
else
  [ -f "$PROFILE" ] || { echo "FRESH MACHINE: no $PROFILE, calibrating again"; calibrate_spanned 350 --msm-capacity key --pairing-sizes 2^20; }
  lease_validate "$(until_ 200)" pw12 2176 --only L B E --partition-workers 12 --anchor
  lease_validate "$(until_ 380)" pw15 2176 --only L B E --partition-workers 15 --anchor
  lease_validate "$(until_ "$END")" again-L-O 2176 --only L M N O
fi
lease_finish
