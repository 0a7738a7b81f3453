#!/usr/bin/env bash
# The forty-first lease (issue #19, items 4 and 5), planned after the fortieth:
#   call 1 (~250 s): the GPU tests in the order that failed twice (transfer, kernels,
#           groth16, pool_replay; conftest now runs there), with the cap test's fill of
#           the pool's split blocks run on a card for the first time; then
#           pin_barrier.py's seven cases again.
#   call 2 (560 s): calibrate the pinned prover (as device_lease38.sh), A-G anchored,
#           H-K.
#   call 3 (~400 s): B traced kernel by kernel, pinned and staged (`--kernel-trace`:
#           how far ahead the threads launch, experiments/queue_drain.py, and what
#           b_g2_msm meets beside the next kernels, item 4's largest miss), then L-R.
#   On an H200 (ask `nvidia-h200`), the same calls calibrate h200-cupy-key.toml: item 5.
# Predict:
#   python experiments/gpu_validation.py predict --profile $D/call2/<card>-cupy-key.toml \
#       --json $D/call2/grid-A-G.json --more-json $D/call2/grid-H-K.json $D/call3/grid-L-R.json \
#       $D/call3/traced-B.json --out out/l41.md --host-watch $D/call*/host.csv.gz \
#       --calibrate-span $(cat $D/call2/calibrate.span)
#   python experiments/queue_drain.py $D/call3/traced-B*.json
# Carry .whl and out/cubins.txz; `bash experiments/leases/aside.sh out lean gpu` before
# call 1, `out lean` before the others, `in` after each.
#
#   bash experiments/leases/device_lease41.sh 1|2|3 [END]
source "$(dirname "$0")/lease_lib.sh"
lease_start lease41 "${1:?which call: 1, 2 or 3}" "${2:-560}"
lease_watch
export CONTENTION=2^22
case "$CALL" in
  1)
    timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_transfer_gpu.py \
      tests/test_kernels_gpu.py tests/test_groth16_gpu.py tests/test_pool_replay_gpu.py \
      > "$LOGS/pytest-gpu.log" 2>&1
    echo "pytest -m gpu rc=$? at $SECONDS s"; tail -3 "$LOGS/pytest-gpu.log"
    timeout "$(until_ "$END")" python3 experiments/pin_barrier.py 2^22 --repeats 5 \
      --out "$LOGS/pin-barrier.json" > "$LOGS/pin-barrier.log" 2>&1
    echo "pin_barrier rc=$? at $SECONDS s"; tail -32 "$LOGS/pin-barrier.log"
    ;;
  2)
    calibrate_spanned 330 --msm-capacity key --pairing-sizes 2^20
    grep -H -A4 "^\[pins\]" "$PROFILE" || echo "NO [pins]: were the pins measured? (calibrate.log)"
    lease_validate "$(until_ $((SECONDS + 120)))" grid-A-G 2176 --only A B C D E F G --anchor
    lease_validate "$(until_ "$END")" grid-H-K 2176 --only H I J K
    ;;
  3)
    [ -f "$PROFILE" ] || { echo "FRESH MACHINE: no $PROFILE, calibrating again"; calibrate_spanned 330 --msm-capacity key --pairing-sizes 2^20; }
    lease_validate "$(until_ $((SECONDS + 60)))" traced-B 2176 --only B --kernel-trace B
    lease_validate "$(until_ $((SECONDS + 60)))" traced-B-staged 2176 --only B --kernel-trace B --abc-upload staged
    lease_validate "$(until_ "$END")" grid-L-R 2176 --only L M N O P Q R
    ;;
esac
lease_finish
