#!/usr/bin/env bash
# The forty-third lease (issue #19, items 4 and 5), planned after the forty-first:
#   call 1 (~330 s): A and B traced kernel by kernel with every driver thread's Python
#           sampled (`--kernel-trace --py-sample 0.001`): what holds the device idle,
#           13-21 ms a synthesis result, while a proof's results come back together
#           (experiments/arrival_stall.py; validation-log.md, "The forty-first lease");
#           then I, J and K with the pool traced (`--alloc-trace`): the pinned prover's
#           capped race at 2^22, which the model never loses (0.00) where the card lost
#           6, 3 and 5 runs of 8.
#   call 2 (560 s): on an H200, calibrate h200-cupy-key.toml and run A-G anchored
#           (item 5); on an H100, calibrate (the GPU stages' handoff bound, read 0.0016
#           and 0.039 on the last two leases, against 0.038 from the traces) and H-K.
# The runs of call 1 take their prover settings and tight caps from the forty-first
# lease's pinned H100 profile, carried as out/l41-h100-cupy-key.toml
# (`cp docs/data/h100-2026-12-06o/call3/h100-cupy-key.toml out/l41-h100-cupy-key.toml`).
# Carry .whl, out/cubins.txz and that profile; `bash experiments/leases/aside.sh out lean`
# before each call, `in` after.  Read:
#   python experiments/arrival_stall.py $D/call1/traced-A.json.gz $D/call1/traced-B.json.gz
#   python experiments/py_sampler.py ...  (what each thread ran in the idle stretches)
#   python experiments/pool_replay.py $D/call1/alloc-IJK.json.gz
#   python experiments/alloc_order.py $D/call1/alloc-IJK.json.gz --stage kernels --cycles
#
#   bash experiments/leases/device_lease43.sh 1|2 [END]
source "$(dirname "$0")/lease_lib.sh"
lease_start lease43 "${1:?which call: 1 or 2}" "${2:-560}"
lease_watch
export CONTENTION=2^22
[ -f "$PROFILE" ] || cp out/l41-h100-cupy-key.toml "$PROFILE"
case "$CALL" in
  1)
    lease_validate "$(until_ $((SECONDS + 120)))" traced-A 2176 --only A --kernel-trace A --py-sample 0.001
    lease_validate "$(until_ $((SECONDS + 90)))" traced-B 2176 --only B --kernel-trace B --py-sample 0.001
    lease_validate "$(until_ "$END")" alloc-IJK 2176 --only I J K --alloc-trace I J K
    ;;
  2)
    rm -f "$PROFILE"
    calibrate_spanned 330 --msm-capacity key --pairing-sizes 2^20
    case "$PROFILE" in
      *h200*) lease_validate "$(until_ "$END")" grid-A-G 2176 --only A B C D E F G --anchor ;;
      *) lease_validate "$(until_ "$END")" grid-H-K 2176 --only H I J K ;;
    esac
    ;;
esac
lease_finish
