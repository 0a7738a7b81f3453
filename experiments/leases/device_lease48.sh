#!/usr/bin/env bash
# The forty-eighth lease, planned after the forty-seventh (issue #19, items 4 and 5):
#   call 1 (540 s): the GPU tests in the order `pytest -m gpu` runs them (the split-block
#           cap test now sizes its arrays past what earlier tests leave: not yet run on a
#           card); then I and J at 2176 MiB with every allocation of the pool traced: on
#           the forty-seventh lease's H200 I lost proofs in 2 of 3 runs and J in 3 of 3,
#           refused with 1470 MiB in arrays and 524-620 MiB cached that a flush could not
#           give back, where the model gives 0.07 (experiments/oom_replay.py reads the
#           trace against the model's pool).
#   call 2 (540 s): G (two-lock) and B traced kernel by kernel: G's prestage runs 22-31%
#           longer in the model than on the card beside the other worker's kernels, and
#           b_g2_msm 8-11% longer on the card beside them (experiments/stream_timeline.py
#           says what each waited behind on the stream); then I, J again untraced.
#   As run (an H100 came; docs/data/h100-2026-12-06s/README.md): call 1 as above; call 2
#   as above, but its runs were packed over by a second lease_finish; call 3 given inline:
#   G and B traced, I and J traced six times more, the capped group once.
# No calibrate: the shipped h200-cupy (the forty-seventh lease's) sets the plans on an
# H200, the forty-sixth lease's profile (carried as out/h100-cupy-key.toml) on an H100.
# Carry .whl, out/cubins.txz (and out/h100-cupy-key.toml); `bash experiments/leases/aside.sh
# out lean gpu` before each call, `in` after.
#
#   bash experiments/leases/device_lease48.sh 1|2 [END]
source "$(dirname "$0")/lease_lib.sh"
lease_start lease48 "${1:?which call: 1 or 2}" "${2:-540}"
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
    lease_validate "$(until_ $((SECONDS + 150)))" alloc-IJ-1 2176 --only I J --alloc-trace I J
    lease_validate "$(until_ "$END")" alloc-IJ-2 2176 --only I J --alloc-trace I J
    ;;
  2)
    lease_validate "$(until_ $((SECONDS + 120)))" traced-G 2176 --only G --kernel-trace G
    lease_validate "$(until_ $((SECONDS + 120)))" traced-B 2176 --only B --kernel-trace B
    lease_validate "$(until_ "$END")" grid-IJK 2176 --only I J K
    ;;
esac
lease_finish
