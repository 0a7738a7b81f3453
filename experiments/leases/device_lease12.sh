#!/usr/bin/env bash
# The next H200 lease (issue #19), two calls.  What the last session left open is how the
# one stream shares the device: b_g2_msm beside another worker's kernels took 2.2x its
# time alone on the tenth lease's card (the model 1.7x), but only 1.2x beside a whole
# GPU worker's prestage + kernels loop on the sixth lease's probe; and prestage's link
# demand stands in for uploads that wait behind a prestage on the stream
# (docs/validation-log.md, "How the one stream shares the device"; run on 2026-12-01:
# docs/data/h200-2026-12-01j).
#
#   call 1: bash experiments/leases/device_lease12.sh 1   (pytest -m gpu; calibrate; the probes)
#   call 2: bash experiments/leases/device_lease12.sh 2   (the designs with every stage's span)
#
# Call 1 first runs the GPU tests: the runtime's step lock and the Event's settle have
# not run on a GPU yet.  Then calibrate as h200-cupy was measured (its device-queue
# probes time the kernels beside a G2 MSM loop and beside one prestage), and the driver
# probe at 2^22 and 2^20: prestage, kernels and b_g2_msm each alone and beside one other
# GPU worker looping prestage + kernels (gpu:1), which calibrate does not time.
# Call 2 runs B, E (three times), F, G (once), J at 2650 MiB (three times, traced once),
# each run keeping every stage's span, so experiments/stream_share.py can class every
# b_g2_msm of every configuration by what ran beside it, on the card and in the model.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
LOGS=$OUT/lease12-${1:?which call: 1 or 2}
mkdir -p "$LOGS" out
PROFILE=out/h200-cupy.toml
source "$(dirname "$0")/lease_lib.sh"
lease_machine
if [ "$1" = 1 ]; then
  timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests > "$LOGS/pytest-gpu.log" 2>&1
  echo "pytest -m gpu rc=$? at $SECONDS s"; tail -2 "$LOGS/pytest-gpu.log"
  lease_calibrate 300
  for n in 2^22 2^20; do
    timeout 45 python3 experiments/driver_probe.py --constraints "$n" --repeats 4 --loads none gpu:1 \
      --json "$LOGS/probe-${n/^/}.json" > "$LOGS/probe-${n/^/}.log" 2>&1
    echo "probe $n rc=$? at $SECONDS s"; tail -4 "$LOGS/probe-${n/^/}.log"
  done
else
  lease_validate 200 gpu-validation 2176 --only B E F G
  for k in 1 2 3; do
    trace=(); [ "$k" = 1 ] && trace=(--alloc-trace J)
    lease_validate 45 "reserve-2650-$k" 2650 --only J "${trace[@]}"
  done
fi
