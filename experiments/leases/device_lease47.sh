#!/usr/bin/env bash
# The forty-seventh lease (2026-12-06), planned by the card that comes:
# On an H200 (issue #19 item 5: h200-cupy re-calibrated for the prover as it stands, the
# pins and the mapping in steps since the twenty-sixth lease's):
#   call 1 (560 s): calibrate (380 s, [pins] with lock_pressure), then A-G.
#   call 2 (560 s): the GPU tests of the executor and prover (the collector's freeze has
#           not run on a card), the capped group H-K at 2176 MiB and P at the model's
#           cap, then L-R (2^20, and 2^21 off the ladder).
#   call 3 (what is left): A-G again (repeats), then A-G with the collector as usual
#           (SIMGPU_GC_AS_USUAL) beside A-G frozen.
#   As run (an H200 came; docs/data/h200-2026-12-06r/README.md): calls 1 and 2 as above,
#   then three calls given inline with lease_lib.sh's steps, the grid being faster than
#   planned: H-K, P, L-R a second and third time, A-G as usual then frozen twice.
# On an H100 (issue #19 item 4, the stalls left): call 1 is device_lease46.sh 3 (B traced
#   with the collector's passes noted; A-G frozen, as usual, frozen again), on the
#   forty-sixth lease's profile carried as out/h100-cupy-key.toml; call 2: the GPU tests, then the
#   capped group's J again (3 of 3 lost where the model gives 0.00).
# Carry .whl, out/cubins.txz (and out/h100-cupy-key.toml); `bash experiments/leases/aside.sh
# out lean gpu` before each call, `in` after.
#
#   bash experiments/leases/device_lease47.sh 1|2|3 [END]
if [ "${1:-}" = 1 ] && nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | grep -q H100; then
  exec bash "$(dirname "$0")/device_lease46.sh" 3 "${2:-560}"  # an H100's call 1: the collector's A/B
fi
source "$(dirname "$0")/lease_lib.sh"
lease_start lease47 "${1:?which call: 1, 2 or 3}" "${2:-560}"
lease_watch
export CONTENTION=2^22
echo "kernel: $(uname -r); python: $(python3 -V); profile: $PROFILE"
gpu_tests() {  # gpu_tests LIMIT: the prover's and executor's GPU tests
  time_left "$1" pytest || return 1
  timeout "$1" python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_groth16_gpu.py \
    tests/test_transfer_gpu.py > "$LOGS/pytest-gpu.log" 2>&1
  echo "pytest -m gpu rc=$? at $SECONDS s"; tail -1 "$LOGS/pytest-gpu.log"
}
case "$PROFILE:$CALL" in
  *h200*:1)
    rm -f "$PROFILE"
    calibrate_spanned 380 --msm-capacity key --pairing-sizes 2^20
    grep -E "pins of|locks of|^missing" "$LOGS/calibrate.log"
    lease_validate "$(until_ "$END")" grid-A-G 2176 --only A B C D E F G
    ;;
  *h200*:2)
    gpu_tests 100
    lease_validate "$(until_ $((SECONDS + 200)))" grid-H-K-P 2176 --only H I J K P
    lease_validate "$(until_ "$END")" grid-L-R 2176 --only L M N O Q R
    ;;
  *h200*:3)
    lease_validate "$(until_ $((SECONDS + 130)))" grid-A-G-2 2176 --only A B C D E F G
    SIMGPU_GC_AS_USUAL=1 lease_validate "$(until_ "$END")" grid-A-G-usual 2176 --only A B C D E F G
    ;;
  *:2)
    gpu_tests 100
    lease_validate "$(until_ $((SECONDS + 120)))" grid-J 2176 --only J --alloc-trace J
    SIMGPU_GC_AS_USUAL=1 lease_validate "$(until_ $((SECONDS + 100)))" grid-A-G-usual2 2176 --only A B C D E F G
    lease_validate "$(until_ "$END")" grid-A-G-frozen3 2176 --only A B C D E F G
    ;;
esac
lease_finish
