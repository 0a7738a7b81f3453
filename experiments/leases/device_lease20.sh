#!/usr/bin/env bash
# The twentieth H200 lease (issue #19, item 5: the OOM outcome right at every cap).
# On the nineteenth lease the capped group (H-K at 2176 MiB) ran out of memory in 8 of
# 11 passes of I, J and K, and every one of 17 runs traced obeyed one rule: a run
# completes exactly when its first b_g2_msm's G2 temporaries are the largest of the run,
# since they follow each partition's witness and a later, larger MSM cannot reuse the
# first's pool block.  The prover can now size that MSM by the key (`--msm-capacity key`:
# the circuit's expected count and six standard deviations of room, the same arrays for
# every partition; simgpu.prover.memory_plan.key_capacity).  These calls calibrate that
# prover and validate it on one machine:
#   call 1: calibrate with --msm-capacity key; the grid's 2^22 uncapped group A-G;
#   call 2: H-R with the capped group at 2176 MiB, then H-K four times more, the last
#           two with every allocation traced (is the race gone, and what does the model
#           say now that every partition has the same buffers?);
#   call 3: H-K at 2100 and 2250 MiB, then a second pass of the uncapped configurations
#           for the run-to-run spread, then `pytest -m gpu`.
# A call that finds a fresh machine (no profile) calibrates first and says so.
# The working tree must stay under the device's 64 MiB: with the wheels in .whl (62 MiB)
# move docs/data/h200-* aside for the calls, and back after.
#
#   bash experiments/leases/device_lease20.sh 1|2|3
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
LOGS=$OUT/lease20-${1:?which call: 1, 2 or 3}
mkdir -p "$LOGS" out
PROFILE=out/h200-cupy-key.toml
source "$(dirname "$0")/lease_lib.sh"
lease_machine
lease_calibrate_once "$1" 330 --msm-capacity key
if [ "$1" = 1 ]; then
  lease_validate "$(left 585)" grid-A-G 2176 --only A B C D E F G
elif [ "$1" = 2 ]; then
  lease_validate "$(left 330)" grid-H-R 2176 --only H I J K L M N O P Q R
  for k in 1 2; do lease_validate "$(left $((330 + 60 * k)))" "capped-$k" 2176 --only H I J K; done
  for k in 1 2; do
    lease_validate "$(left $((450 + 65 * k)))" "alloc-$k" 2176 --only H I J K --alloc-trace H I J K
    gzip -f "$LOGS/alloc-$k.json"
  done
else
  lease_validate "$(left 90)" cap2100 2100 --only H I J K
  lease_validate "$(left 180)" cap2250 2250 --only H I J K
  lease_validate "$(left 450)" second-pass 2176 --only A C E F G L N O Q R
  timeout "$(left 585)" python3 -m pytest -q -m gpu > "$LOGS/pytest-gpu.log" 2>&1
  echo "pytest -m gpu rc=$? at $SECONDS s"; tail -1 "$LOGS/pytest-gpu.log"
fi
(cd "$LOGS" && tar -cf texts.tar ./*.log && rm ./*.log)
