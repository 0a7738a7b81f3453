#!/usr/bin/env bash
# The thirteenth H200 lease (issue #19), two calls back to back on one machine.  The
# twelfth lease's spans showed what a sharing law must meet (each b_g2_msm classed by
# what ran beside it), but not why: how the one stream serves two workers' kernels while
# both are inside a stage.  Call 1 first runs A, B, F, G and J (2650 MiB) with every
# kernel and copy on the device traced with the thread that launched it (CUPTI, through
# PyTorch's profiler on the machine's image: experiments/kernel_trace.py), then
# calibrates as h200-cupy was measured and runs the grid at 2^22 on the whole card; call 2
# the capped group at 2176 MiB, 2^20 and 2^21, J at 2650 MiB twice more, a second pass.
#
#   call 1: bash experiments/leases/device_lease13.sh 1
#   call 2: bash experiments/leases/device_lease13.sh 2
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
LOGS=$OUT/lease13-${1:?which call: 1 or 2}
mkdir -p "$LOGS" out
PROFILE=out/h200-cupy.toml
source "$(dirname "$0")/lease_lib.sh"
if [ "$1" = 1 ]; then
  lease_machine
  for label in A B F G J; do
    timeout 90 python3 experiments/gpu_validation.py measure \
      --profile simgpu/profile/profiles/h200-cupy.toml --tight-mib 22=2650 --only "$label" \
      --kernel-trace "$label" --json "$LOGS/traced-$label.json" > "$LOGS/traced-$label.log" 2>&1
    echo "traced $label rc=$? at $SECONDS s"; grep -E "s/proof|Error|error" "$LOGS/traced-$label.log" | cut -c1-150
    gzip -f "$LOGS/traced-$label.json"; cat "$LOGS/traced-$label.log" >> "$LOGS/traced.log"; rm "$LOGS/traced-$label.log"
  done
  lease_calibrate 300
  lease_validate $((585 - SECONDS)) gpu-validation 2176 --only A B C D E F G
  # the device returns at most eight files a call: the texts go back as one
  (cd "$LOGS" && tar -cf texts.tar traced.log calibrate.log gpu-validation.log h200-cupy.toml \
    && rm traced.log calibrate.log gpu-validation.log h200-cupy.toml)
else
  lease_validate 300 gpu-validation 2176 --only H I J K L M N O P Q R
  for k in 1 2; do lease_validate 45 "reserve-2650-$k" 2650 --only J; done
  lease_validate $((580 - SECONDS)) second-pass 2176 --only A C F G L M N O Q R
fi
