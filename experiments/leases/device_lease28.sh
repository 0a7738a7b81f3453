#!/usr/bin/env bash
# The twenty-eighth lease (issue #19, items 4 and 5), from what the twenty-seventh found
# (docs/validation.md, "What the twenty-seventh lease settled"):
#   call 1: calibrate with its contention runs (device pairings, pressure, the
#           interpreter lock) at 2^22, where the grid runs, instead of 2^20; then, on an
#           H200 (issue #19 item 5 asks for its re-calibration), the uncapped 2^22 group
#           A-G; on any other card the interpreter-lock test of split-finalizer's race:
#           K and I at a 0.5 ms switch interval, and K at Python's 5 ms, four runs each,
#           every allocation traced;
#   call 2: on an H200 H-R (the capped group at 2176 MiB) and a second pass of A-G;
#           elsewhere the grid A-R;
#   call 3: second passes of A-G and L-R, the capped group three times more;
#   call 4: the GPU test suite, a third pass of A-G, the capped group twice more.
#   call ab: with a profile carried in (no calibrate: the shipped h200-cupy, or the
#           twenty-seventh lease's H100 calibration), the A/B of the copier crews
#           handed from an ended thread to the next (simgpu.gpu.transfer, now the
#           default) against a new crew for every thread (SIMGPU_FRESH_COPIERS=1): K
#           five times each way, interleaved, every allocation traced; K four times at
#           a 0.5 ms switch interval; I and J twice each; the capped group once.
# The session that wrote this got one H100 call late, with about 450 s of device time:
# `ab 400` lost every run to the kernels' first compile (docs/data/h100-2026-12-05g), and
# K ran twice each way by hand after it.  Calls 1-4 have not run.
# Every run starts with the pools' caches given back (gpu_validation._fresh_pools).
# A call that finds a fresh machine (no profile) calibrates first and says so.
# The working tree must stay under the device's 64 MiB: `bash experiments/leases/aside.sh out`
# before a call (and `in` after), and carry .whl, out/cubins.txz (lease_lib.lease_cubins) and
# the profiles.
#
#   bash experiments/leases/device_lease28.sh 1|2|3|4|ab [END]
# END (default 585): the second of the call by which its last step must end.
source "$(dirname "$0")/lease_lib.sh"
lease_start lease28 "${1:?which call: 1 to 4, or ab}" "${2:-585}"
lease_watch
export CONTENTION=2^22
switch_test() {  # switch_test NAME SECONDS LABEL [ARGS...]: four runs of LABEL, allocations traced
  local name=$1 s=$2 label=$3; shift 3
  for k in 1 2 3 4; do
    lease_validate "$(until_ $((SECONDS + s)))" "$name-$k" 2176 --only "$label" --alloc-trace "$label" "$@"
  done
}
calibrate_if_fresh() {  # a call that finds a fresh machine (no profile) calibrates first
  [ -f "$PROFILE" ] || { echo "FRESH MACHINE: no $PROFILE, calibrating again"; calibrate_spanned 400 --msm-capacity key; }
}
case "$PROFILE" in *h200*) ON_H200=1 ;; *) ON_H200=0 ;; esac
if [ "$CALL" = ab ]; then
  [ -f "$PROFILE" ] || { echo "no $PROFILE: carry it in (out/ is not copied)"; exit 2; }
  # a fresh machine compiles the kernels in its first run's set-up (92 s on the
  # twenty-eighth lease, against 6 s cached): compile them first, in parallel
  lease_precompile 150
  # a fresh machine's first run at a size also makes its proving key and compiles the
  # numba synthesis: on the twenty-ninth lease every 2^22 run given 25-45 s was killed
  # until one finished (then 14 s each), so one untimed run goes first
  lease_validate "$(until_ $((SECONDS + 150)))" k-warm-up 2176 --only K
  for k in 1 2 3 4 5; do
    lease_validate "$(until_ $((SECONDS + 30)))" k-handed-$k 2176 --only K --alloc-trace K
    export SIMGPU_FRESH_COPIERS=1
    lease_validate "$(until_ $((SECONDS + 30)))" k-fresh-$k 2176 --only K --alloc-trace K
    unset SIMGPU_FRESH_COPIERS
  done
  switch_test k-si05 25 K --switch-interval 0.0005
  for k in 1 2; do lease_validate "$(until_ $((SECONDS + 45)))" ij-handed-$k 2176 --only I J --alloc-trace I J; done
  lease_validate "$(until_ 585)" capped-handed 2176 --only H I J K
elif [ "$CALL" = 1 ]; then
  calibrate_spanned 400 --msm-capacity key
  if [ "$ON_H200" = 1 ]; then
    lease_validate "$(until_ 585)" grid-A-G 2176 --only A B C D E F G
  else
    switch_test k-si05 25 K --switch-interval 0.0005
    switch_test i-si05 25 I --switch-interval 0.0005
    switch_test k-si5 25 K
  fi
elif [ "$CALL" = 2 ] && [ "$ON_H200" = 1 ]; then
  calibrate_if_fresh
  lease_validate "$(until_ 330)" grid-H-R 2176 --only H I J K L M N O P Q R
  lease_validate "$(until_ 585)" second-pass 2176 --only A B C D E F G
else
  calibrate_if_fresh
  if [ "$CALL" = 2 ]; then
    lease_validate "$(until_ 300)" grid-A-G 2176 --only A B C D E F G
    lease_validate "$(until_ 585)" grid-H-R 2176 --only H I J K L M N O P Q R
  elif [ "$CALL" = 3 ]; then
    lease_validate "$(until_ 250)" second-pass 2176 --only A B C D E F G
    lease_validate "$(until_ 400)" second-pass-2 2176 --only L M N O Q R
    for k in 2 3 4; do lease_validate "$(until_ 585)" capped-$k 2176 --only H I J K; done
  else
    timeout "$(until_ 200)" python3 -m pytest -q -m gpu -p no:cacheprovider > "$LOGS/pytest-gpu.log" 2>&1
    echo "pytest -m gpu rc=$? at $SECONDS s"; tail -3 "$LOGS/pytest-gpu.log"
    lease_validate "$(until_ 400)" third-pass 2176 --only A B C D E F G
    for k in 5 6; do lease_validate "$(until_ 585)" capped-$k 2176 --only H I J K; done
  fi
fi
lease_finish
