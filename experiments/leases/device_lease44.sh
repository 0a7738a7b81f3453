#!/usr/bin/env bash
# The forty-fourth lease (issue #19, item 4), planned after the forty-third's traces:
# the device stood idle through 92-100% of every cudaHostRegister in the pipeline (the
# driver takes no launch while it page-locks, and does one lock at a time), where
# calibrate's probe had read a share of 0.16.  The probe now launches with a quarter
# millisecond queued, and times four locks at once (simgpu.calibrate.pins).
#   call 2 (560 s): the pins' GPU test; calibrate (the pinned prover); H-K.
#   call 3 (560 s): A-G on that profile, I-K again, and B with the staged prover traced
#           with Python sampled (`--abc-upload staged --kernel-trace --py-sample 0.001`):
#           what idles the device as results land where nothing is page-locked (13-15
#           ms a result on the forty-first lease).
#   call 5 (520 s, after the burst step's fix; since 2026-12-06 17:00 calibrate also times
#           a lock beside its load, [pins] lock_pressure): the pins' GPU tests, calibrate (380 s), then
#           A-G and I-K on that profile: the probe and the grid on one lease.
# A fresh machine on call 3 calibrates first.  Carry .whl and out/cubins.txz;
# `bash experiments/leases/aside.sh out lean gpu` before each call, `in` after.
#
#   bash experiments/leases/device_lease44.sh 2|3|5 [END]
source "$(dirname "$0")/lease_lib.sh"
lease_start lease44 "${1:?which call: 2, 3 or 5}" "${2:-560}"
lease_watch
export CONTENTION=2^22
case "$CALL" in
  2)
    timeout 120 python3 -m pytest -q -m gpu tests/test_transfer_gpu.py -k "pins or lock" > "$LOGS/pytest-pins.log" 2>&1
    echo "pins test rc=$? at $SECONDS s"; tail -1 "$LOGS/pytest-pins.log"
    rm -f "$PROFILE"
    calibrate_spanned 330 --msm-capacity key --pairing-sizes 2^20
    grep -E "pins of|locks of" "$LOGS/calibrate.log"
    lease_validate "$(until_ "$END")" grid-H-K 2176 --only H I J K
    ;;
  3)
    [ -f "$PROFILE" ] || calibrate_spanned 330 --msm-capacity key --pairing-sizes 2^20
    lease_validate "$(until_ $((SECONDS + 100)))" traced-B-staged 2176 --only B --abc-upload staged \
      --kernel-trace B --py-sample 0.001
    lease_validate "$(until_ $((SECONDS + 260)))" grid-A-G 2176 --only A B C D E F G
    lease_validate "$(until_ "$END")" grid-IJK 2176 --only I J K
    ;;
  5)
    timeout 120 python3 -m pytest -q -m gpu tests/test_transfer_gpu.py -k "pins or lock" > "$LOGS/pytest-pins.log" 2>&1
    echo "pins test rc=$? at $SECONDS s"; tail -1 "$LOGS/pytest-pins.log"
    rm -f "$PROFILE"
    calibrate_spanned 380 --msm-capacity key --pairing-sizes 2^20
    grep -E "pins of|locks of|^missing" "$LOGS/calibrate.log"
    lease_validate "$(until_ $((SECONDS + 100)))" grid-A-G 2176 --only A B C D E F G
    lease_validate "$(until_ "$END")" grid-IJK 2176 --only I J K
    ;;
esac
lease_finish
