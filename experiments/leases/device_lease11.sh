#!/usr/bin/env bash
# One H200 call (issue #19), after the caching pool got the prover's arrays: calibrate,
# whose last repeat at each size now traces the device pool and writes [buffer_arrays],
# and whose record now says how far the host's speed moved over the sizes (host_drift);
# the designs at 2^22 on the whole card (B-G), each run with the host's speed before and
# after; and two-lock-reserve with three workers at 2500, 2575 and 2650 MiB, where the
# tenth lease's card failed, failed and completed every proof.
#   bash experiments/leases/device_lease11.sh
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
LOGS=$OUT/lease11
mkdir -p "$LOGS" out
PROFILE=out/h200-cupy.toml
source "$(dirname "$0")/lease_lib.sh"
lease_machine
lease_calibrate 300
grep -E "warning|host_drift" "$LOGS/calibrate.log" "$PROFILE" | head -3
lease_validate 130 gpu-validation 2176 --only B D E F G
for cap in 2500 2575 2650; do
  lease_validate 45 "reserve-$cap" "$cap" --only J
  cat "$LOGS/reserve-$cap.log" >> "$LOGS/reserve.log" && rm "$LOGS/reserve-$cap.log"
done
