#!/usr/bin/env bash
# The twenty-seventh lease (issue #19, items 4 and 5): device_lease24.sh's plan once more,
# the first with calibrate's device pairings taking the GPU worker's inputs ready
# (measure.ReadyCopies), and the pairings also at 2^22 (experiments/device_queue_at.py),
# where the pipeline's b_g2_msm misses by 8-10% in F and G, and each stage's pressure
# read pair by pair (fit.pressure_ratio; the pairs kept in the profile).
#   call 1: calibrate --msm-capacity key, then the uncapped 2^22 group A-G;
#   call 2: H-R with the capped group at 2176 MiB, a second pass of A, C, F, G;
#   call 3: a second pass of D and L-R, the capped group twice;
#   call 4: the device pairings at 2^22, a third pass of A-G, the capped group twice
#           more (the second with I, J and K's allocations traced), then the GPU test
#           suite;
#   call 5 (if device time is left): F and G traced kernel by kernel.
# Each run now starts with the pools' caches given back (gpu_validation._fresh_pools):
# whether the capped group still loses its runs a pass at a time is this lease's to say.
# A call that finds a fresh machine (no profile) calibrates first and says so.
# The working tree must stay under the device's 64 MiB: move docs/data/h*-2026-* aside.
#
#   bash experiments/leases/device_lease27.sh 1|2|3|4|5 [END]
# END (default 585): the second of the call by which its last step must end.
source "$(dirname "$0")/lease_lib.sh"
lease_start lease27 "${1:?which call: 1 to 5}" "${2:-585}"
lease_watch
if [ "$CALL" = 1 ]; then
  calibrate_spanned 300 --msm-capacity key
  lease_validate "$(until_ 585)" grid-A-G 2176 --only A B C D E F G && touch out/lease27-A-G-done
else
  [ -f "$PROFILE" ] || { echo "FRESH MACHINE: no $PROFILE, calibrating again"; calibrate_spanned 300 --msm-capacity key; }
  if [ "$CALL" = 2 ]; then
    [ -f out/lease27-A-G-done ] || lease_validate "$(until_ 250)" grid-A-G 2176 --only A B C D E F G
    lease_validate "$(until_ 430)" grid-H-R 2176 --only H I J K L M N O P Q R
    lease_validate "$(until_ 585)" second-pass 2176 --only A C F G
  elif [ "$CALL" = 3 ]; then
    lease_validate "$(until_ 300)" second-pass-2 2176 --only D L M N O Q R
    lease_validate "$(until_ 440)" capped-2 2176 --only H I J K
    lease_validate "$(until_ 585)" capped-3 2176 --only H I J K
  elif [ "$CALL" = 5 ]; then
    # F and G, where b_g2_msm misses most, traced kernel by kernel (CUPTI through the
    # image's PyTorch, if it has one): how the device served the two workers' stages
    if python3 -c "import torch.profiler" 2>/dev/null; then
      lease_validate "$(until_ 300)" traced 2176 --only F G --kernel-trace F G
    else
      echo "no torch.profiler on this machine: no kernel traces"
    fi
  else
    timeout "$(until_ 150)" python3 experiments/device_queue_at.py --size 2^22 \
      --json "$LOGS/queue-22.json" > "$LOGS/queue-22.log" 2>&1
    echo "queue-22 rc=$? at $SECONDS s"; tail -20 "$LOGS/queue-22.log"
    lease_validate "$(until_ 280)" third-pass 2176 --only A B C D E F G
    lease_validate "$(until_ 340)" capped-4 2176 --only H I J K
    # the capped group's allocations traced once, to replay a loss through the model's pool
    lease_validate "$(until_ 400)" capped-5 2176 --only H I J K --alloc-trace I J K
    timeout "$(until_ 585)" python3 -m pytest -q -m gpu -p no:cacheprovider > "$LOGS/pytest-gpu.log" 2>&1
    echo "pytest -m gpu rc=$? at $SECONDS s"; tail -3 "$LOGS/pytest-gpu.log"
  fi
fi
lease_finish
