#!/usr/bin/env bash
# The thirty-sixth lease (issue #19, items 4 and 5): a, b and c page-locked where they land.
# The prestage no longer packs them through the staging under the GPU lock; the driver
# page-locks them as the result comes back (simgpu.gpu.transfer.pin_pages) and the prestage
# only queues their copies, as cuzk's does after its cudaHostRegister.
#   call 1: experiments/pinned_abc.py (the upload both ways alone, every copy checked),
#           calibrate (the thirty-fifth's), A-G anchored, then L-R;
#   call 2: the capped group H-K, then B and L with the staging as before
#           (`--abc-upload staged`, the A/B on one machine) and B and L pinned once more.
# Predict:
#   python experiments/gpu_validation.py predict --profile $D/call1/h100-cupy-key.toml \
#       --json $D/call1/grid-A-G.json --more-json $D/call1/grid-L-R.json $D/call2/grid-H-K.json \
#       $D/call2/pinned-B-L.json --out out/l36.md --host-watch $D/call*/host.csv.gz
# Carry .whl and out/cubins.txz only; `bash experiments/leases/aside.sh out lean` before a
# call, `in` after.  A second call that finds a fresh machine calibrates first.
#
#   bash experiments/leases/device_lease36.sh 1|2 [END]
# END (default 560): the second of the call by which its last step must end.
source "$(dirname "$0")/lease_lib.sh"
lease_start lease36 "${1:?which call: 1 or 2}" "${2:-560}"
lease_watch
export CONTENTION=2^22
if [ "$CALL" = 1 ]; then
  timeout 90 python3 experiments/pinned_abc.py 2^20 2^22 --repeats 5 --out "$LOGS/pinned-abc.json" \
    > "$LOGS/pinned-abc.log" 2>&1; echo "pinned_abc rc=$? at $SECONDS s"; cat "$LOGS/pinned-abc.log"
  calibrate_spanned 350 --msm-capacity key --pairing-sizes 2^20
  grep -H abc_upload "$PROFILE" || echo "the profile counts no upload: was anything pinned?"
  lease_validate "$(until_ 470)" grid-A-G 2176 --only A B C D E F G --anchor
  lease_validate "$(until_ "$END")" grid-L-R 2176 --only L M N O P Q R
else
  [ -f "$PROFILE" ] || { echo "FRESH MACHINE: no $PROFILE, calibrating again"; calibrate_spanned 350 --msm-capacity key --pairing-sizes 2^20; }
  lease_validate "$(until_ 80)" grid-H-K 2176 --only H I J K
  lease_validate "$(until_ 150)" staged-B-L 2176 --only B L --abc-upload staged
  lease_validate "$(until_ "$END")" pinned-B-L 2176 --only B L
fi
lease_finish
