#!/usr/bin/env bash
# The fiftieth lease, after the forty-ninth (issue #19 item 5): b_g2_msm now books its
# staging whole before its first copy (groth16._G2Gather), as the model's plan books a
# phase's staging.  On the forty-ninth lease's H100 the capped group (I, J, K at 2^22,
# three GPU workers, 2176 MiB) ran out of memory in 27 of 39 runs, in 24 of them after the
# b_g2_msm's gathered points were asked between the next worker's prestage and its H MSM
# staging (experiments/alloc_order.py --first-cycle).  The model, with the forty-sixth
# lease's H100 profile, gives 0.00 at 2112 and 2176 MiB and 1.00 at 2096 and below.
#   one call (420 s): the GPU tests of the prover (the G2 MSM's booked arrays have not run
#   on a card); then I, J, K traced at 2176 MiB three times, at 2112 twice and at 2080
#   twice: the card's outcome on both sides of the model's edge.
# Carry .whl, out/cubins.txz and out/h100-cupy-key.toml; `bash experiments/leases/aside.sh
# out lean gpu` before the call, `in` after.
#
#   bash experiments/leases/device_lease50.sh [END]
source "$(dirname "$0")/lease_lib.sh"
lease_start lease50 1 "${1:-420}"
lease_watch
export CONTENTION=2^22
lease_uncalibrated
echo "kernel: $(uname -r); python: $(python3 -V); profile: $PROFILE"
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_groth16_gpu.py \
  tests/test_pool_replay_gpu.py > "$LOGS/pytest-gpu.log" 2>&1
echo "pytest -m gpu rc=$? at $SECONDS s"; tail -1 "$LOGS/pytest-gpu.log"
for i in 1 2 3; do
  lease_validate "$(until_ $((SECONDS + 60)))" booked-2176-$i 2176 --only I J K --alloc-trace I J K
done
for cap in 2112 2080; do
  for i in 1 2; do
    lease_validate "$(until_ $((SECONDS + 45)))" booked-$cap-$i "$cap" --only I J K --alloc-trace I J K
  done
done
lease_finish
