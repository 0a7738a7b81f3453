#!/usr/bin/env bash
# The fiftieth lease, after the forty-ninth (issue #19 item 5): b_g2_msm now books its
# staging whole before its first copy (groth16._G2Gather), as the model's plan books a
# phase's staging.  On the forty-ninth lease's H100 the capped group (I, J, K at 2^22,
# three GPU workers, 2176 MiB) ran out of memory in 21 of 42 runs, 19 of them after the
# b_g2_msm's gathered points were asked between the next worker's prestage and its H MSM
# staging (experiments/alloc_order.py --first-cycle).  The model gives, for each of I, J
# and K: with the forty-sixth lease's H100 profile 0.00 at 2112 and 2176 MiB and 1.00 at
# 2096 and below; with h200-cupy 0.075 at 2112 and 2176, 1.00 at 2080.
#   one call (540 s): the GPU tests in suite order, with the new one that reads CuPy's own
#   pool trace for the booked order (test_groth16_gpu.py); then I, J, K traced at 2176
#   MiB three times, at 2112 and at 2080 twice each: the card's outcome on both sides of
#   the model's edge (`python experiments/alloc_order.py --first-cycle` and
#   `experiments/gpu_validation.py predict` read them).
# Planned in the session that made the change; no machine came for it (docs/validation-log.md,
# "The forty-ninth lease").
# Carry .whl, out/cubins.txz and out/h100-cupy-key.toml; `bash experiments/leases/aside.sh
# out lean gpu` before the call, `in` after.
#
#   call 2 (540 s), on the same machine: the grid A-R at 2176 MiB with the booked prover
#   (every configuration's OOM outcome and peak VRAM, P and H among them) and I, J, K at
#   2096 MiB twice, just under the model's edge.
#   call 3 (540 s): calibrate on this VM (as the forty-sixth lease's call 2), then A-G with it.
#   call 4 (300 s): H-K-P and L-R with call 3's profile (carried back as out/h100-lease50-3.toml).
#   call 5 (240 s): I, J, K traced with call 3's profile at 2176 MiB five times, 2112 twice
#   (call 4's second run lost one of I's proofs at 2176).
# Call 1 ran as `device_lease50.sh 540` before call 2 was written; it is now call 1.
#
#   bash experiments/leases/device_lease50.sh 1|2|3|4|5 [END]
source "$(dirname "$0")/lease_lib.sh"
lease_start lease50 "${1:-1}" "${2:-540}"
lease_watch
export CONTENTION=2^22
[ "$CALL" = 3 ] || lease_uncalibrated
echo "kernel: $(uname -r); python: $(python3 -V); profile: $PROFILE"
if [ "$CALL" = 3 ]; then
  rm -f "$PROFILE"
  calibrate_spanned 380 --msm-capacity key --pairing-sizes 2^20
  grep -E "pins of|locks of|^missing" "$LOGS/calibrate.log"
  lease_validate "$(until_ "$END")" grid-A-G 2176 --only A B C D E F G
  lease_finish; exit
fi
if [ "$CALL" = 4 ]; then
  cp out/h100-lease50-3.toml "$PROFILE"
  lease_validate "$(until_ $((SECONDS + 150)))" grid-H-K-P 2176 --only H I J K P
  lease_validate "$(until_ "$END")" grid-L-R 2176 --only L M N O Q R
  lease_finish; exit
fi
if [ "$CALL" = 5 ]; then
  cp out/h100-lease50-3.toml "$PROFILE"
  for run in 2176-1 2176-2 2112-1 2176-3 2176-4 2112-2 2176-5; do
    lease_validate "$(until_ $((SECONDS + 40)))" "traced-$run" "${run%-*}" --only I J K --alloc-trace I J K
  done
  lease_finish; exit
fi
if [ "$CALL" = 2 ]; then
  lease_validate "$(until_ $((SECONDS + 110)))" booked-A-G 2176 --only A B C D E F G
  lease_validate "$(until_ $((SECONDS + 200)))" booked-H-K-P 2176 --only H I J K P
  for run in 2096-1 2096-2; do
    lease_validate "$(until_ $((SECONDS + 30)))" "booked-$run" "${run%-*}" --only I J K
  done
  lease_validate "$(until_ "$END")" booked-L-R 2176 --only L M N O Q R
  lease_finish; exit
fi
timeout 170 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_transfer_gpu.py \
  tests/test_kernels_gpu.py tests/test_groth16_gpu.py tests/test_pool_replay_gpu.py \
  > "$LOGS/pytest-gpu.log" 2>&1
echo "pytest -m gpu rc=$? at $SECONDS s"; tail -1 "$LOGS/pytest-gpu.log"
first=110  # the first validation run also loads the 2^22 keys (the forty-ninth's took over 60 s)
for run in 2176-1 2112-1 2080-1 2176-2 2112-2 2080-2 2176-3; do
  lease_validate "$(until_ $((SECONDS + first)))" "booked-$run" "${run%-*}" --only I J K --alloc-trace I J K
  first=45
done
lease_finish
