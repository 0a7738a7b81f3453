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
#   bash experiments/leases/device_lease50.sh [END]
source "$(dirname "$0")/lease_lib.sh"
lease_start lease50 1 "${1:-540}"
lease_watch
export CONTENTION=2^22
lease_uncalibrated
echo "kernel: $(uname -r); python: $(python3 -V); profile: $PROFILE"
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
