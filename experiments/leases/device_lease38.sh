#!/usr/bin/env bash
# The thirty-eighth lease (issue #19, item 4): the pinned prover calibrated with its pins.
# The thirty-seventh lease found the pinned prover 5% slower than the staged one on a
# fast host, its kernels 176 ms under load against 157, and the model 9% optimistic; its
# probe (experiments/pin_barrier.py) found the unlock a stall of the whole device.
# Calibrate now times the pins (simgpu.calibrate.pins: [pins]) and the kernels without
# their own partition's unlock inside, which the model adds as a pause of its own.
# One call: calibrate, A-G anchored, L-R, H-K, then B and L staged (the A/B on one machine).
# Predict:
#   python experiments/gpu_validation.py predict --profile $D/call1/h100-cupy-key.toml \
#       --json $D/call1/grid-A-G.json --more-json $D/call1/grid-L-R.json $D/call1/grid-H-K.json \
#       --out out/l38.md --host-watch $D/call1/host.csv.gz --calibrate-span $(cat $D/call1/calibrate.span)
# Carry .whl and out/cubins.txz; `bash experiments/leases/aside.sh out lean` before, `in` after.
#
#   bash experiments/leases/device_lease38.sh [END]
source "$(dirname "$0")/lease_lib.sh"
lease_start lease38 1 "${1:-560}"
lease_watch
export CONTENTION=2^22
calibrate_spanned 330 --msm-capacity key --pairing-sizes 2^20
grep -H -A4 "^\[pins\]" "$PROFILE" || echo "NO [pins]: were the pins measured? (calibrate.log)"
grep -E "pins of|pins not" "$LOGS/calibrate.log"
lease_validate "$(until_ $((SECONDS + 110)))" grid-A-G 2176 --only A B C D E F G --anchor
lease_validate "$(until_ $((SECONDS + 60)))" grid-L-R 2176 --only L M N O P Q R
lease_validate "$(until_ $((SECONDS + 40)))" grid-H-K 2176 --only H I J K
lease_validate "$(until_ "$END")" staged-B-L 2176 --only B L --abc-upload staged
lease_finish
