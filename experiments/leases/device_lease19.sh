#!/usr/bin/env bash
# The nineteenth H200 lease (issue #19): the daemon now admits partitions in turn
# (simgpu.sched.daemon: one admitter, proofs as they arrived, each one's partitions by
# index), where on threads they raced to the synthesis pool, interleaved the proofs on
# the GPU and left the card idle 0.15-0.5 s a run while the next proofs were synthesised
# from cold (the seventeenth lease's C, E, N, R).  The model always admitted in that
# order, so these calls measure the real daemon with the rule it was modelled with, on
# one machine with a fresh calibration (calibrate now writes buffers to the byte):
#   call 1: calibrate; the grid's 2^22 uncapped group A-G (B, D, E three times);
#   call 2: H-R (the capped group at 2176 MiB), then H-K twice more;
#   call 3: H-K at 2100 and 2250 MiB and twice more at 2176, then a second pass of the
#           uncapped configurations, for the run-to-run spread.
# A call that finds a fresh machine (no profile) calibrates first and says so: a profile
# is validated only on the machine that measured it.
# The working tree must stay under the device's 64 MiB: with the wheels in .whl (62 MiB)
# move docs/data/h200-* aside for the calls, and back after.
#
#   bash experiments/leases/device_lease19.sh 1|2|3
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
LOGS=$OUT/lease19-${1:?which call: 1, 2 or 3}
mkdir -p "$LOGS" out
PROFILE=out/h200-cupy.toml
source "$(dirname "$0")/lease_lib.sh"
lease_machine
if [ "$1" = 1 ] || [ ! -f "$PROFILE" ]; then
  [ "$1" = 1 ] || echo "FRESH MACHINE: no $PROFILE, calibrating again"
  lease_calibrate 330
fi
left() { echo $(( $1 - SECONDS )); }
if [ "$1" = 1 ]; then
  lease_validate "$(left 585)" grid-A-G 2176 --only A B C D E F G
elif [ "$1" = 2 ]; then
  lease_validate "$(left 400)" grid-H-R 2176 --only H I J K L M N O P Q R
  for k in 1 2; do lease_validate "$(left $((400 + 90 * k)))" "capped-$k" 2176 --only H I J K; done
else
  lease_validate "$(left 90)" cap2100 2100 --only H I J K
  lease_validate "$(left 180)" cap2250 2250 --only H I J K
  for k in 3 4; do lease_validate "$(left $((180 + 90 * (k - 2))))" "capped-$k" 2176 --only H I J K; done
  lease_validate "$(left 585)" second-pass 2176 --only A C E F G L N O Q R
fi
(cd "$LOGS" && tar -cf texts.tar ./*.log && rm ./*.log)
