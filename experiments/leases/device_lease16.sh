#!/usr/bin/env bash
# The sixteenth H200 lease (issue #19): the prover's copies through page-locked staging
# (simgpu.gpu.transfer), checked, compared and then calibrated and validated on one
# machine.  The fifteenth lease's traces found each GPU worker's kernel launches held in
# the driver, 10 ms a time, while the other worker copied from or to pageable memory.
#   call 1: the GPU tests; then F, A and O traced (every driver call, the Python
#           sampler) with the staged copies and, for the A/B on this machine, with
#           CuPy's pageable ones (SIMGPU_PAGEABLE_COPIES=1);
#   call 2 (on a fresh machine: call 1 ran the first staging, two 16 MiB bays per
#           thread, whose uploads waited behind the other worker's kernels and packed
#           at one thread's memcpy speed): the transfer and prover GPU tests, calibrate
#           as h200-cupy was measured, F traced, then the grid's A-G on the whole card;
#   call 3: H-R with the capped group at 2176 MiB, the capped group twice more, a
#           second pass of A C F G L M N O Q R.
# The working tree must stay under the device's 64 MiB: move docs/data's traced folders
# aside for the calls.
#
#   bash experiments/leases/device_lease16.sh 1|2|3
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
LOGS=$OUT/lease16-${1:?which call: 1, 2 or 3}
mkdir -p "$LOGS" out
PROFILE=out/h200-cupy.toml
source "$(dirname "$0")/lease_lib.sh"
traced() {  # traced LABEL NAME [ENV...]: one configuration traced, as lease 15's
  local label=$1 name=$2; shift 2
  env "$@" timeout 200 python3 experiments/gpu_validation.py measure --profile simgpu/profile/profiles/h200-cupy.toml \
    --only "$label" --kernel-trace "$label" --py-sample 0.001 --json "$LOGS/$name.json" > "$LOGS/$name.log" 2>&1
  echo "$name rc=$? at $SECONDS s"; grep -E "s/proof|Error" "$LOGS/$name.log" | cut -c1-110
  gzip -f "$LOGS/$name.json"
}
if [ "$1" = 1 ]; then
  lease_machine
  timeout 280 python3 -m pytest -q -m gpu tests > "$LOGS/pytest-gpu.log" 2>&1
  echo "pytest -m gpu rc=$? at $SECONDS s"; tail -3 "$LOGS/pytest-gpu.log"
  traced F staged-F
  traced F pageable-F SIMGPU_PAGEABLE_COPIES=1
  traced A staged-A
  traced O staged-O
  traced O pageable-O SIMGPU_PAGEABLE_COPIES=1
  (cd "$LOGS" && tar -cf texts.tar ./*.log && rm ./*.log)
elif [ "$1" = 2 ]; then
  lease_machine
  timeout 110 python3 -m pytest -q -m gpu tests/test_groth16_gpu.py tests/test_transfer_gpu.py > "$LOGS/pytest-gpu.log" 2>&1
  echo "pytest -m gpu (groth16, transfer) rc=$? at $SECONDS s"; tail -2 "$LOGS/pytest-gpu.log"
  lease_calibrate 300
  traced F staged-F
  lease_validate $((585 - SECONDS)) gpu-validation 2176 --only A B C D E F G
  (cd "$LOGS" && tar -cf texts.tar ./*.log h200-cupy.toml && rm ./*.log h200-cupy.toml)
else
  lease_validate 300 call3-grid 2176 --only H I J K L M N O P Q R
  for k in 2 3; do lease_validate 60 "capped-$k" 2176 --only H I J K; done
  lease_validate $((580 - SECONDS)) second-pass 2176 --only A C F G L M N O Q R
  (cd "$LOGS" && tar -cf texts.tar ./*.log && rm ./*.log)
fi
