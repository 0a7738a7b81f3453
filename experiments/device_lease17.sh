#!/usr/bin/env bash
# The seventeenth H200 lease (issue #19), two calls back to back on one machine: what the
# sixteenth left open about the prover with page-locked copies (docs/validation.md,
# first section).
#   call 1: the whole of `pytest -m gpu` (the sixteenth ran only part of it after the
#           copies' last change); the prover end to end per partition at 2^20 and 2^22
#           with its copies staged and, on the same machine, pageable
#           (benchmarks/bench_prover.py, SIMGPU_PAGEABLE_COPIES=1 for the before);
#   call 2: A and F traced (every driver call, the Python sampler): A's stages alone for
#           experiments/driver_lock_replay.py; b_g2_msm and the kernels each beside one
#           other GPU worker looping prestage + kernels (experiments/driver_probe.py
#           gpu:1), the pairing the model predicts 22-25% fast; the capped group (H-K
#           at 2176 MiB, where the model races b_g2_msm's buffers against a third
#           worker's h_msm in every run and the card ran each once without it) twice.
# The working tree must stay under the device's 64 MiB: move docs/data's traced folders
# aside for the calls.
#
#   bash experiments/device_lease17.sh 1|2
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
LOGS=$OUT/lease17-${1:?which call: 1 or 2}
mkdir -p "$LOGS" out
PROFILE=simgpu/profile/profiles/h200-cupy.toml
source "$(dirname "$0")/lease_lib.sh"
if [ "$1" = 1 ]; then
  lease_machine
  timeout 300 python3 -m pytest -q -m gpu tests > "$LOGS/pytest-gpu.log" 2>&1
  echo "pytest -m gpu rc=$? at $SECONDS s"; tail -3 "$LOGS/pytest-gpu.log"
  for mode in staged pageable; do
    env $([ $mode = pageable ] && echo SIMGPU_PAGEABLE_COPIES=1) timeout 120 python3 benchmarks/bench_prover.py \
      --circuit porep --min-log 20 --max-log 22 --repeat 3 --no-docs --json "$LOGS/bench-prover-$mode.json" \
      > "$LOGS/bench-prover-$mode.log" 2>&1
    echo "bench_prover $mode rc=$? at $SECONDS s"; tail -6 "$LOGS/bench-prover-$mode.log"
  done
else
  for label in A F; do
    timeout 120 python3 experiments/gpu_validation.py measure --profile $PROFILE --only "$label" \
      --kernel-trace "$label" --py-sample 0.001 --json "$LOGS/traced-$label.json" > "$LOGS/traced-$label.log" 2>&1
    echo "traced $label rc=$? at $SECONDS s"; grep -E "s/proof|Error" "$LOGS/traced-$label.log" | cut -c1-110
    gzip -f "$LOGS/traced-$label.json"
  done
  timeout 150 python3 experiments/driver_probe.py --constraints 2^22 --loads none gpu:1 \
    --json "$LOGS/driver-probe.json" > "$LOGS/driver-probe.log" 2>&1
  echo "driver_probe rc=$? at $SECONDS s"; tail -12 "$LOGS/driver-probe.log"
  for k in 2 3; do lease_validate 60 "capped-$k" 2176 --only H I J K; done
fi
(cd "$LOGS" && tar -cf texts.tar ./*.log && rm ./*.log)
