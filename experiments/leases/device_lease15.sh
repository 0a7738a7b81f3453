#!/usr/bin/env bash
# The fifteenth H200 lease (issue #19), one short call: where b_g2_msm's time on the host
# goes beside another worker's kernels.  The fourteenth lease found that a shorter
# switch interval does not shorten it (so it is not the interpreter lock handed over
# every 5 ms), and the thirteenth's traces put it in a few long stretches of host work
# before an upload; these traces keep every driver call with its duration, so those
# stretches split into time inside the driver (a call held up while another thread's
# copy to pageable memory runs) and time in Python (experiments/stream_timeline.py).
# First a probe of which of CuPy's calls keep the interpreter lock
# (experiments/gil_copy_probe.py); then every traced run samples each thread's Python
# frame every millisecond (experiments/py_sampler.py), which tells a stretch's Python
# from a wait for the lock, and who held it.  At 2^20, whose keys build in seconds: O (two-lock-reserve, two workers, j = 2) and
# L (single-lock, two workers); then F at 2^22 (its keys take a minute or two to build on
# a fresh machine) and A, its stages alone, for experiments/driver_lock_replay.py.  The
# working tree must stay under the device's 64 MiB: move docs/data's traced folders
# aside for the call (or carry fewer wheels).
#
#   bash experiments/leases/device_lease15.sh
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
LOGS=$OUT/lease15
mkdir -p "$LOGS"
source "$(dirname "$0")/lease_lib.sh"
lease_machine
timeout 60 python3 experiments/gil_copy_probe.py --json "$LOGS/gil-copy-probe.json" > "$LOGS/gil-copy-probe.log" 2>&1
echo "gil_copy_probe rc=$?"; cat "$LOGS/gil-copy-probe.log"
for label in O L F A; do
  limit=100; [ "$label" = F ] && limit=300
  timeout "$limit" python3 experiments/gpu_validation.py measure --profile simgpu/profile/profiles/h200-cupy.toml \
    --only "$label" --kernel-trace "$label" --py-sample 0.001 --json "$LOGS/traced-$label.json" > "$LOGS/traced-$label.log" 2>&1
  echo "traced $label rc=$? at $SECONDS s"; grep -E "s/proof|Error" "$LOGS/traced-$label.log" | cut -c1-110
  gzip -f "$LOGS/traced-$label.json"
done
# the device returns at most eight files a call: the texts go back as one
(cd "$LOGS" && tar -cf texts.tar ./*.log gil-copy-probe.json && rm ./*.log gil-copy-probe.json)
