#!/usr/bin/env bash
# The fourteenth H200 lease (issue #19), one call: does the interpreter lock set how the
# GPU workers share the device?  The thirteenth lease's kernel traces split each GPU
# stage's span (experiments/stream_timeline.py): beside another worker's kernels, most of
# what b_g2_msm loses is time on the host between its driver calls (15 -> 63 ms), not
# device time.  If that is the interpreter lock handed back and forth between the
# drivers' threads, the switch interval (how long a thread may keep the lock while
# another waits, 5 ms by default) moves it.  B (three runs), F and G (twice each) at
# Python's default, 0.5 ms and 0.1 ms; F and G traced at 0.5 ms.
#
#   bash experiments/leases/device_lease14.sh
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
LOGS=$OUT/lease14
mkdir -p "$LOGS"
source "$(dirname "$0")/lease_lib.sh"
lease_machine
PROFILE=simgpu/profile/profiles/h200-cupy.toml
for si in 0 0.0005 0.0001; do
  for pass in 1 2; do
    only=(B F G); [ "$pass" = 2 ] && only=(F G)
    name="si-$si-$pass"
    timeout 120 python3 experiments/gpu_validation.py measure --profile "$PROFILE" --switch-interval "$si" \
      --only "${only[@]}" --json "$LOGS/$name.json" > "$LOGS/$name.log" 2>&1
    echo "$name rc=$? at $SECONDS s"; grep -E "s/proof" "$LOGS/$name.log" | cut -c1-110
  done
done
for label in F G; do
  timeout 90 python3 experiments/gpu_validation.py measure --profile "$PROFILE" --switch-interval 0.0005 \
    --only "$label" --kernel-trace "$label" --json "$LOGS/traced-$label.json" > "$LOGS/traced-$label.log" 2>&1
  echo "traced $label rc=$? at $SECONDS s"; grep -E "s/proof|Error" "$LOGS/traced-$label.log" | cut -c1-110
  gzip -f "$LOGS/traced-$label.json"
done
# the device returns at most eight files a call
(cd "$LOGS" && tar -cf runs.tar si-*.json && tar -cf logs.tar ./*.log && rm si-*.json ./*.log)
