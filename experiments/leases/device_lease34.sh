#!/usr/bin/env bash
# The thirty-fourth lease (issue #19, item 4), one call on whatever machine comes:
# device_lease33.sh's calibration and anchored grid, with the interpreter lock read as
# hand-overs (simgpu.calibrate.lock.measure_gil: each driver stage's asks for the lock,
# counted beside a thread of pure Python, and the wait it makes others' asks meet, timed
# by a probe that asks at random moments), now at 2^20 as well as at 2^22.  At 2^20 the
# thirty-third lease's driver stages ran 11-29% longer under load than the model gave
# (b_g2_msm, prep, the epilogue), with the anchors at 0.98-1.12x: the refit with the
# lock's uses (`refit_uses --gil`) is read against this grid afterwards.
#   calibrate (contention at 2^22, the stages' readings at 2^20 too), then A-G, then
#   H-R, each run anchored, as far as the call's time allows.
# Carry .whl and out/cubins.txz only; `bash experiments/leases/aside.sh out` before the
# call, `in` after.
#
#   bash experiments/leases/device_lease34.sh [END]
# END (default 560): the second of the call by which its last step must end.
source "$(dirname "$0")/lease_lib.sh"
lease_start lease34 1 "${1:-560}"
lease_watch
export CONTENTION=2^22
calibrate_spanned 350 --msm-capacity key --pairing-sizes 2^20
lease_validate "$(until_ 470)" grid-A-G 2176 --only A B C D E F G --anchor
lease_validate "$(until_ "$END")" grid-H-R 2176 --only L M N O P Q R H I J K --anchor
lease_finish
