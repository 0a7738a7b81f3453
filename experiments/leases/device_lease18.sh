#!/usr/bin/env bash
# The eighteenth H200 lease (issue #19): the capped group's OOM after the model's buffers
# were made exact to the byte (docs/validation-log.md, the seventeenth lease).  The seventeenth lease's
# traces showed the card's pool growing the same eighteen blocks in every run, and the
# model growing others: its H-query batch law was 672 B short of the card's 384 MiB, and
# its L and A stagings one array of 389.7 and 387.4 MiB where the card allocates the
# 384 MiB batch and the gathered tails apart.  calibrate now writes both exactly
# (simgpu.calibrate.fit.buffer_law, simgpu.calibrate.arrays), so the calls re-calibrate
# and then measure what the model is checked against, on the same machine.
#   call 1: calibrate; the capped group H-K at 2176 MiB, three passes;
#   call 2: the grid A-R (every proof verified), the capped group at 2176 MiB included;
#   call 3: the capped group at 2176 MiB twice more, at 2100 and 2250 MiB once.
# The working tree must stay under the device's 64 MiB: with the wheels in .whl (62 MiB)
# move docs/data/h200-* aside for the calls, and back after.
#
#   bash experiments/leases/device_lease18.sh 1|2|3
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
LOGS=$OUT/lease18-${1:?which call: 1, 2 or 3}
mkdir -p "$LOGS" out
PROFILE=out/h200-cupy.toml
source "$(dirname "$0")/lease_lib.sh"
if [ "$1" = 1 ]; then
  lease_machine
  lease_calibrate 330
  grep -E "^(h_msm_staging|l_msm_staging|a_msm_staging|b1_msm_staging) " "$PROFILE"
  for k in 1 2 3; do lease_validate $(( (590 - SECONDS) / (4 - k) )) "capped-$k" 2176 --only H I J K; done
elif [ "$1" = 2 ]; then
  lease_validate 560 grid 2176 --only A B C D E F G H I J K L M N O P Q R
else
  for k in 4 5; do lease_validate 110 "capped-$k" 2176 --only H I J K; done
  lease_validate 110 cap2100 2100 --only H I J K
  lease_validate $((570 - SECONDS)) cap2250 2250 --only H I J K
fi
(cd "$LOGS" && tar -cf texts.tar ./*.log && rm ./*.log)
