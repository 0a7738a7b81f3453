#!/usr/bin/env bash
# The forty-ninth lease, planned after the forty-eighth (issue #19 item 5, the capped
# group's race; docs/validation-log.md, "The forty-eighth lease"):
#   call 1 (540 s): the GPU tests in suite order (a VramExhausted now carries CuPy's
#           cached bytes: not yet run on a card); A (one GPU worker) and D (serial) three times each, every pool
#           allocation traced: the b_g2_msm's host time from its first staging array to
#           its second (the gathered points) with no other GPU worker's copies queued
#           ahead of its first (experiments/alloc_order.py --first-cycle reads I and J;
#           the calls of A and D are read with --stage b_g2_msm --bytes of that array).
#           Then I, J, K twice each, traced: the first cycle's order beside the outcome
#           on this card.
#   call 2 (540 s): I and J with the allocations and the kernels traced together
#           (--alloc-trace and --kernel-trace): what the b_g2_msm's thread waited for
#           between its two arrays in the runs where it came late (42-61 ms on the
#           forty-eighth lease's H100); then the capped group once more.
# No calibrate: the shipped h200-cupy sets the plans on an H200, the forty-sixth lease's
# profile (carried as out/h100-cupy-key.toml) on an H100.  One lease_finish a call: a
# second packs over the first's runs (the forty-eighth lease lost a call so).
# Carry .whl, out/cubins.txz (and out/h100-cupy-key.toml); `bash experiments/leases/aside.sh
# out lean gpu` before each call, `in` after.
#
#   bash experiments/leases/device_lease49.sh 1|2 [END]
source "$(dirname "$0")/lease_lib.sh"
lease_start lease49 "${1:?which call: 1 or 2}" "${2:-540}"
lease_watch
export CONTENTION=2^22
lease_uncalibrated
echo "kernel: $(uname -r); python: $(python3 -V); profile: $PROFILE"
case "$CALL" in
  1)
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_transfer_gpu.py \
      tests/test_kernels_gpu.py tests/test_groth16_gpu.py tests/test_pool_replay_gpu.py \
      > "$LOGS/pytest-gpu.log" 2>&1
    echo "pytest -m gpu rc=$? at $SECONDS s"; tail -1 "$LOGS/pytest-gpu.log"
    for i in 1 2 3; do
      lease_validate "$(until_ $((SECONDS + 60)))" alloc-AD-$i 2176 --only A D --alloc-trace A D
    done
    for i in 1 2; do
      lease_validate "$(until_ $((SECONDS + 70)))" alloc-IJK-$i 2176 --only I J K --alloc-trace I J K
    done
    ;;
  2)
    for i in 1 2 3; do
      lease_validate "$(until_ $((SECONDS + 90)))" both-IJ-$i 2176 --only I J --alloc-trace I J --kernel-trace I J
    done
    lease_validate "$(until_ "$END")" grid-IJK 2176 --only I J K
    ;;
esac
lease_finish
