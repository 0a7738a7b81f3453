#!/usr/bin/env bash
# The thirty-third lease (issue #19, items 4 and 5), one call on whatever machine comes:
# device_lease32.sh's calibration, whose stage times are now pooled over every call of
# each driver stage alone (simgpu.calibrate.fit.pooled_alone), then the grid with an
# anchor before each run (gpu_validation.py measure --anchor: every driver stage of one
# partition alone, as calibrate calls it), to read how far the grid's host moved from
# calibrate's (docs/validation-log.md, the thirty-second lease: 10-13% at 2^22, which
# neither the all-core factor nor one thread's loop read).
#   calibrate (contention at 2^22, the stages' readings at 2^20 too), then A-G, then
#   H-R, each run anchored, as far as the call's time allows.
# Carry .whl and out/cubins.txz only; `bash experiments/leases/aside.sh out` before the
# call, `in` after.
#
#   bash experiments/leases/device_lease33.sh [END]
# END (default 560): the second of the call by which its last step must end.
source "$(dirname "$0")/lease_lib.sh"
lease_start lease33 1 "${1:-560}"
lease_watch
export CONTENTION=2^22
calibrate_spanned 350 --msm-capacity key --pairing-sizes 2^20
lease_validate "$(until_ 470)" grid-A-G 2176 --only A B C D E F G --anchor
lease_validate "$(until_ "$END")" grid-H-R 2176 --only L M N O P Q R H I J K --anchor
lease_finish
