#!/usr/bin/env bash
# The twenty-third lease (issue #19, item 4): each thread packs its uploads with its own
# crew of copiers (simgpu.gpu.transfer).  With one crew for the process, b_g2_msm's
# uploads queued behind the next worker's prestage, which the pipeline starts with it
# (docs/validation-log.md, "the host stretch").  This lease times that A/B, then calibrates
# and validates the prover with the change:
#   call 1: the host's reference loop for 10 s; experiments/copier_ab.py at 2^20 and 2^22;
#           calibrate --msm-capacity key; the grid's uncapped 2^22 group A-G;
#   call 2: H-R with the capped group at 2176 MiB; a second pass of A-G.
# A call that finds a fresh machine (no profile) calibrates first and says so.
# The working tree must stay under the device's 64 MiB: with the wheels in .whl (62 MiB)
# move docs/data/h200-* aside for the calls, and back after.
#
#   bash experiments/leases/device_lease23.sh 1|2 [END]
# END (default 585): the second of the call by which its last step must end.
source "$(dirname "$0")/lease_lib.sh"
lease_start lease23 "${1:?which call: 1 or 2}" "${2:-585}"
host_probe 10
if [ "$CALL" = 1 ]; then
  lim=$(until_ 150)
  time_left "$lim" copier_ab && { timeout "$lim" python3 experiments/copier_ab.py --sizes 2^20 2^22 --repeats 8 \
    --json "$LOGS/copier-ab.json" > "$LOGS/copier-ab.log" 2>&1; echo "copier_ab rc=$? at $SECONDS s"; tail -12 "$LOGS/copier-ab.log"; }
  lease_calibrate "$(until_ 420)" --msm-capacity key
  lease_validate "$(until_ 585)" grid-A-G 2176 --only A B C D E F G
else
  [ -f "$PROFILE" ] || { echo "FRESH MACHINE: no $PROFILE, calibrating again"; lease_calibrate 300 --msm-capacity key; }
  lease_validate "$(until_ 330)" grid-H-R 2176 --only H I J K L M N O P Q R
  lease_validate "$(until_ 585)" second-pass 2176 --only A B C D E F G
fi
(cd "$LOGS" && tar -cf runs.tar ./*.json ./*.toml 2>/dev/null; rm -f ./*.json ./*.toml)
(cd "$LOGS" && tar -cf texts.tar ./*.log && rm ./*.log)
ls -la "$LOGS"
