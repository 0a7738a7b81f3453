#!/usr/bin/env bash
# The twenty-second H200 lease (issue #19, item 5): the twenty-first lease's plan again,
# on a host that holds its speed.  The key-sized prover (--msm-capacity key) calls the
# capped group's OOM outcome; the twenty-first lease's host moved 1.84x during calibrate,
# so its throughput was not a test.  This lease probes the host first, calibrates, and
# calibrates again if calibrate warns that the host moved (docs/validation-log.md):
#   call 1: the host's reference loop for 20 s; calibrate --msm-capacity key; again if it
#           warns of host drift, else the grid's uncapped 2^22 group A-G;
#   call 2: A-G if call 1 recalibrated; H-R with the capped group at 2176 MiB; the capped
#           group again;
#   call 3: a second pass of the uncapped configurations (the run-to-run spread), the
#           capped group at 2176 and 2250 MiB.
# A call that finds a fresh machine (no profile) calibrates first and says so: a profile
# is validated only on the machine that measured it.
# The working tree must stay under the device's 64 MiB: with the wheels in .whl (62 MiB)
# move docs/data/h200-* aside for the calls, and back after.
#
#   bash experiments/leases/device_lease22.sh 1|2|3 [END]
# END (default 585): the second of the call by which its last step must end, for a call
# given less than the full 10 minutes; every step's limit is capped by it.  STEADY=1: call 1
# stops (exit 3) before calibrating when the probe finds the host unsteady (its p90 over
# 1.3x its fastest, as the twenty-first and twenty-second leases' hosts were).
source "$(dirname "$0")/lease_lib.sh"
lease_start lease22 "${1:?which call: 1, 2 or 3}" "${2:-585}"
drifted() { grep -q "host's speed moved" "$LOGS/calibrate.log"; }
host_probe 20
if [ "$CALL" = 1 ] && [ "${STEADY:-0}" = 1 ] && grep -q "HOST UNSTEADY" "$LOGS/host.log"; then
  # a calibration on such a host is validated at another speed (docs/validation-log.md, the
  # twenty-second lease): stop before calibrating, so the machine can be given back
  echo "STEADY=1: not calibrating on an unsteady host"; exit 3
fi
if [ "$CALL" = 1 ]; then
  lease_calibrate 300 --msm-capacity key
  if drifted; then
    echo "HOST MOVED: calibrating again"; mv "$LOGS/calibrate.log" "$LOGS/calibrate-1.log"
    cp "$PROFILE" "$LOGS/$(basename "$PROFILE" .toml)-1.toml"; host_probe 10
    lease_calibrate "$(until_ 585)" --msm-capacity key; touch "$LOGS/recalibrated"
  else
    lease_validate "$(until_ 585)" grid-A-G 2176 --only A B C D E F G && touch out/lease22-A-G-done
  fi
else
  [ -f "$PROFILE" ] || { echo "FRESH MACHINE: no $PROFILE, calibrating again"; lease_calibrate 300 --msm-capacity key; }
  if [ "$CALL" = 2 ]; then
    [ -f out/lease22-A-G-done ] || lease_validate "$(until_ 250)" grid-A-G 2176 --only A B C D E F G
    lease_validate "$(until_ 480)" grid-H-R 2176 --only H I J K L M N O P Q R
    lease_validate "$(until_ 585)" capped-1 2176 --only H I J K
  else
    lease_validate "$(until_ 300)" second-pass 2176 --only A C D F G L M N O Q R
    lease_validate "$(until_ 400)" capped-2 2176 --only H I J K
    lease_validate "$(until_ 490)" cap2250 2250 --only H I J K
    lease_validate "$(until_ 585)" capped-3 2176 --only H I J K
  fi
fi
host_probe 5
(cd "$LOGS" && tar -cf runs.tar ./*.json ./*.toml 2>/dev/null; rm -f ./*.json ./*.toml)
(cd "$LOGS" && tar -cf texts.tar ./*.log && rm ./*.log)
ls -la "$LOGS"
