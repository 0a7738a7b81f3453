#!/usr/bin/env bash
# The thirty-seventh lease (issue #19, items 4 and 5): the pinned prover calibrated.
# The thirty-sixth lease's calibration and grid measured the staged prover (the pin's flag
# bug), so no profile of the prover as it now runs exists.  This one is the thirty-sixth's
# plan, with the GPU suite's files that the pins touched run first on call 2.
#   call 1: experiments/pinned_abc.py (stops the call if CUDA refuses the pins: a
#           calibration of the staged prover again would be wasted), calibrate,
#           A-G anchored, then L-R;
#   call 2: the GPU tests (tests/test_*_gpu.py, without the conftest, which the lean tree
#           leaves behind), the capped group H-K, then B and L staged
#           (`--abc-upload staged`, the A/B on one machine) and B and L pinned again.
# Predict:
#   python experiments/gpu_validation.py predict --profile $D/call1/h100-cupy-key.toml \
#       --json $D/call1/grid-A-G.json --more-json $D/call1/grid-L-R.json $D/call2/grid-H-K.json \
#       $D/call2/pinned-B-L.json --out out/l37.md --host-watch $D/call*/host.csv.gz \
#       --calibrate-span $(cat $D/call1/calibrate.span)
# Carry .whl and out/cubins.txz only; `bash experiments/leases/aside.sh out lean` before a
# call (then copy the four tests/test_*_gpu.py back into a tests/ of their own), `in` after
# (that tests/ removed first).  A second call that finds a fresh machine calibrates first.
#
#   bash experiments/leases/device_lease37.sh 1|2 [END]
# END (default 560): the second of the call by which its last step must end.
source "$(dirname "$0")/lease_lib.sh"
lease_start lease37 "${1:?which call: 1 or 2}" "${2:-560}"
lease_watch
export CONTENTION=2^22
if [ "$CALL" = 1 ]; then
  if timeout 90 python3 experiments/pinned_abc.py 2^20 2^22 --repeats 5 --out "$LOGS/pinned-abc.json" \
      > "$LOGS/pinned-abc.log" 2>&1; then
    echo "pinned_abc passed at $SECONDS s"; tail -4 "$LOGS/pinned-abc.log"
    calibrate_spanned 350 --msm-capacity key --pairing-sizes 2^20
    grep -H abc_upload "$PROFILE" || echo "the profile counts no upload: was anything pinned?"
    lease_validate "$(until_ 470)" grid-A-G 2176 --only A B C D E F G --anchor
    lease_validate "$(until_ "$END")" grid-L-R 2176 --only L M N O P Q R
  else
    echo "PINS REFUSED OR WRONG: no calibration this call"; tail -20 "$LOGS/pinned-abc.log"
  fi
else
  if [ -d tests ]; then
    timeout 170 python3 -m pytest -m gpu -q --noconftest -p no:cacheprovider tests/test_*_gpu.py \
      > "$LOGS/pytest-gpu.log" 2>&1; echo "pytest -m gpu rc=$? at $SECONDS s"; tail -3 "$LOGS/pytest-gpu.log"
  fi
  [ -f "$PROFILE" ] || { echo "FRESH MACHINE: no $PROFILE, calibrating again"; calibrate_spanned 350 --msm-capacity key --pairing-sizes 2^20; }
  lease_validate "$(until_ $((SECONDS + 90)))" grid-H-K 2176 --only H I J K
  lease_validate "$(until_ $((SECONDS + 90)))" staged-B-L 2176 --only B L --abc-upload staged
  lease_validate "$(until_ "$END")" pinned-B-L 2176 --only B L
fi
lease_finish
