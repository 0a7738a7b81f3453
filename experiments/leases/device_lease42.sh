#!/usr/bin/env bash
# The forty-second lease, device_lease41.sh's plan cut to the device time left after six
# calls that got no machine (1319 s):
#   call 1 (~330 s): the GPU tests in the order that failed twice (transfer, kernels,
#           groth16, pool_replay; conftest now runs there), the cap test's fill of the
#           pool's split blocks on a card for the first time; then P (2^20, two-lock,
#           three GPU workers at 1087 MiB) with every allocation of the pool traced: the
#           model, even replayed with the card's own stage spans
#           (experiments/oom_replay.py), runs out of VRAM in every run where the card
#           ran out in 2 of 6.  The trace says what was live at each h_msm request.
#   call 2 (560 s): on an H200, calibrate h200-cupy-key.toml (issue #19 item 5) and run
#           A-G anchored; on an H100, B traced kernel by kernel, pinned and staged, and P
#           traced again.
# Without a calibrate on this machine the runs take their prover settings and tight caps
# from the thirty-ninth lease's pinned H100 profile, carried as out/l39-h100-cupy-key.toml
# (`cp docs/data/h100-2026-12-06m/call1/h100-cupy-key.toml out/l39-h100-cupy-key.toml`).
# Carry .whl, out/cubins.txz and that profile; `bash experiments/leases/aside.sh out lean
# gpu` before call 1, `out lean` before call 2, `in` after each.
#
#   bash experiments/leases/device_lease42.sh 1|2 [END]
source "$(dirname "$0")/lease_lib.sh"
lease_start lease42 "${1:?which call: 1 or 2}" "${2:-560}"
lease_watch
export CONTENTION=2^22
[ -f "$PROFILE" ] || cp out/l39-h100-cupy-key.toml "$PROFILE"
CAPS="2176,20=1087"  # lease_validate writes 22=$CAPS: the 39th lease's caps at 2^22 and 2^20
case "$CALL" in
  1)
    timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_transfer_gpu.py \
      tests/test_kernels_gpu.py tests/test_groth16_gpu.py tests/test_pool_replay_gpu.py \
      > "$LOGS/pytest-gpu.log" 2>&1
    echo "pytest -m gpu rc=$? at $SECONDS s"; tail -3 "$LOGS/pytest-gpu.log"
    lease_validate "$(until_ $((SECONDS + 100)))" alloc-P-1 "$CAPS" --only P --alloc-trace P
    lease_validate "$(until_ "$END")" alloc-P-2 "$CAPS" --only P --alloc-trace P
    ;;
  2)
    case "$PROFILE" in
      *h200*)
        rm -f "$PROFILE"
        calibrate_spanned 330 --msm-capacity key --pairing-sizes 2^20
        lease_validate "$(until_ "$END")" grid-A-G 2176 --only A B C D E F G --anchor
        ;;
      *)
        lease_validate "$(until_ $((SECONDS + 90)))" traced-B 2176 --only B --kernel-trace B
        lease_validate "$(until_ $((SECONDS + 90)))" traced-B-staged 2176 --only B --kernel-trace B --abc-upload staged
        lease_validate "$(until_ $((SECONDS + 60)))" alloc-P-3 "$CAPS" --only P --alloc-trace P
        lease_validate "$(until_ "$END")" grid-H-K "$CAPS" --only H I J K
        ;;
    esac
    ;;
esac
lease_finish
