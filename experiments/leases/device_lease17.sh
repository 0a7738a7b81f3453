#!/usr/bin/env bash
# The seventeenth H200 lease (issue #19), three calls back to back on one machine: what
# the sixteenth left open about the prover with page-locked copies (docs/validation-log.md,
# the fifteenth and sixteenth leases).
#   call 1: the whole of `pytest -m gpu` (the sixteenth ran only part of it after the
#           copies' last change); the prover end to end per partition at 2^20 and 2^22
#           with its copies staged and, on the same machine, pageable
#           (benchmarks/bench_prover.py, SIMGPU_PAGEABLE_COPIES=1 for the before);
#   call 2: calibrate, which now times b_g2_msm beside its own loop and beside another
#           GPU worker's prestage + kernels and so writes the device as one in-order
#           stream ([contention.gpu] law = "in-order"); A and F traced (every driver
#           call, the Python sampler with its run-queue wait); the grid's A-G;
#   call 3: H-R with the capped group at 2176 MiB (where the sixteenth's model raced
#           b_g2_msm's buffers against a third worker's h_msm in every run and the card
#           ran each once without), the capped group twice more, I with every
#           allocation traced, a second pass.
# The working tree must stay under the device's 64 MiB: with the four wheels in .whl (56
# MiB) the tracked files (15 MiB) are too many; move docs/data/h200-2026-12-01k, -01l,
# -02a and -02b aside for the calls (8 MiB), and back after.
#
#   bash experiments/leases/device_lease17.sh 1|2|3
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
LOGS=$OUT/lease17-${1:?which call: 1, 2 or 3}
mkdir -p "$LOGS" out
PROFILE=out/h200-cupy.toml
source "$(dirname "$0")/lease_lib.sh"
if [ "$1" = 1 ]; then
  lease_machine
  python3 -c "import numpy, numba, cupy; print('numpy', numpy.__version__, 'numba', numba.__version__, 'cupy', cupy.__version__)"
  timeout 300 python3 -m pytest -q -m gpu tests > "$LOGS/pytest-gpu.log" 2>&1
  echo "pytest -m gpu rc=$? at $SECONDS s"; tail -3 "$LOGS/pytest-gpu.log"
  for mode in staged pageable; do
    env $([ $mode = pageable ] && echo SIMGPU_PAGEABLE_COPIES=1) timeout 120 python3 benchmarks/bench_prover.py \
      --circuit porep --min-log 20 --max-log 22 --repeat 3 --no-docs --json "$LOGS/bench-prover-$mode.json" \
      > "$LOGS/bench-prover-$mode.log" 2>&1
    echo "bench_prover $mode rc=$? at $SECONDS s"; tail -6 "$LOGS/bench-prover-$mode.log"
  done
elif [ "$1" = 2 ]; then
  lease_machine
  lease_calibrate 300
  grep -A2 "^\[contention" "$PROFILE"
  for label in A F; do
    timeout 60 python3 experiments/gpu_validation.py measure --profile $PROFILE --only "$label" \
      --kernel-trace "$label" --py-sample 0.001 --json "$LOGS/traced-$label.json" > "$LOGS/traced-$label.log" 2>&1
    echo "traced $label rc=$? at $SECONDS s"; grep -E "s/proof|Error" "$LOGS/traced-$label.log" | cut -c1-110
    gzip -f "$LOGS/traced-$label.json"
  done
  lease_validate $((585 - SECONDS)) gpu-validation 2176 --only A B C D E F G
else
  lease_validate 300 call3-grid 2176 --only H I J K L M N O P Q R
  for k in 2 3; do lease_validate 60 "capped-$k" 2176 --only H I J K; done
  # every allocation and free of I's run: whether b_g2_msm's buffers and a third worker's
  # h_msm were ever live together, as the model has them
  lease_validate 60 alloc-I 2176 --only I --alloc-trace I
  lease_validate $((580 - SECONDS)) second-pass 2176 --only A C F G L M N O Q R
fi
(cd "$LOGS" && tar -cf texts.tar ./*.log && rm ./*.log)
