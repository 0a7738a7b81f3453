#!/usr/bin/env bash
# The fifty-first lease, planned after the fiftieth (issue #19 item 5 on an H200: the
# target row in docs/validation.md still reads the forty-seventh lease's grid, on the
# prover before b_g2_msm booked its staging whole).  No H200 has come since the
# forty-seventh; the fiftieth's H100 read the booked prover (docs/validation-log.md).
# On an H200, calibrate and validate on the one machine, as the forty-seventh did:
#   call 1 (560 s): calibrate (380 s), then A-G.
#   call 2 (560 s): the GPU tests in suite order, then H-K-P and L-R.
#   call 3 (what is left, END as the budget allows): H-K-P, L-R and A-G again (the
#           repeats that give the run-to-run spread).
#   call 2b (instead of 2 and 3 where only two calls fit): the grid's second half, then
#           its repeats, without the GPU tests.
# On an H100 the calls are the same, with an H100 profile (out/h100-cupy-key.toml): call 1
# calibrates this VM, and a later call on a fresh machine reads call 1's profile carried
# back as out/h100-cupy-key.toml.  (Until 2026-12-07 an H100's call 1 ran I, J, K traced
# at 2176 MiB: the capped race, read on the fiftieth and fifty-second leases.)  What the
# H100 adds now is calibrate's at-once spread beside the pipeline's on one VM.
# Calibrate now keeps every call of its k syntheses at once: `experiments/stage_noise.py
# --profile <call 1's profile> <the grid's runs>` sets their spread beside the pipeline's
# (the fifty-second lease: the host stages spread 1.5-3x wider under load than alone).
# Carry .whl and out/cubins.txz; carry out/h100-cupy-key.toml only to a fresh H100 after
# call 1 (a carried file replaces the one call 1 calibrated on the warm machine).  `bash
# experiments/leases/aside.sh out lean gpu` before each call, `in` after.
#
#   bash experiments/leases/device_lease51.sh 1|2|2b|3 [END]
source "$(dirname "$0")/lease_lib.sh"
lease_start lease51 "${1:?which call: 1, 2, 2b or 3}" "${2:-560}"
lease_watch
export CONTENTION=2^22
echo "kernel: $(uname -r); python: $(python3 -V); profile: $PROFILE"
case "$PROFILE:$CALL" in
  *:1)
    rm -f "$PROFILE"
    calibrate_spanned 380 --msm-capacity key --pairing-sizes 2^20
    lease_validate "$(until_ "$END")" grid-A-G 2176 --only A B C D E F G
    ;;
  *:2)
    lease_uncalibrated  # call 1's profile, kept on the machine; on a fresh one, h200-cupy as shipped
    timeout 170 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_transfer_gpu.py \
      tests/test_kernels_gpu.py tests/test_groth16_gpu.py tests/test_pool_replay_gpu.py \
      > "$LOGS/pytest-gpu.log" 2>&1
    echo "pytest -m gpu rc=$? at $SECONDS s"; tail -1 "$LOGS/pytest-gpu.log"
    lease_validate "$(until_ $((SECONDS + 200)))" grid-H-K-P 2176 --only H I J K P
    lease_validate "$(until_ "$END")" grid-L-R 2176 --only L M N O Q R
    ;;
  *:2b)
    # call 2 where the budget has room for two calls only (2026-12-07: 660 s spent on
    # refused starts): the GPU tests passed on the fiftieth lease's H100 with this prover,
    # so the grid's second half and its repeats come first
    lease_uncalibrated
    lease_validate "$(until_ $((SECONDS + 100)))" grid-H-K-P 2176 --only H I J K P
    lease_validate "$(until_ $((SECONDS + 90)))" grid-L-R 2176 --only L M N O Q R
    lease_validate "$(until_ $((SECONDS + 60)))" grid-H-K-P-2 2176 --only H I J K P
    lease_validate "$(until_ $((SECONDS + 50)))" grid-L-R-2 2176 --only L M N O Q R
    lease_validate "$(until_ $((SECONDS + 60)))" grid-H-K-P-3 2176 --only H I J K P
    lease_validate "$(until_ "$END")" grid-A-G-2 2176 --only A B C D E F G
    ;;
  *:3)
    lease_uncalibrated
    lease_validate "$(until_ $((SECONDS + 120)))" grid-H-K-P-2 2176 --only H I J K P
    lease_validate "$(until_ $((SECONDS + 100)))" grid-L-R-2 2176 --only L M N O Q R
    lease_validate "$(until_ "$END")" grid-A-G-2 2176 --only A B C D E F G
    ;;
  *) echo "no call $CALL on this card" ;;
esac
lease_finish
