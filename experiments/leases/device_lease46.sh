#!/usr/bin/env bash
# The forty-sixth lease (issue #19, item 4), planned after finding, on the developer's
# machine, what held the staged prover's driver still as results landed (8.5-20.9 ms of
# device idle a result on the forty-fourth lease): a result's mapping populated, and later
# unmapped, in one call each holds the kernel's address-space lock, and a driver thread
# that asks for memory meanwhile waits in the kernel with the interpreter lock in hand
# (experiments/populate_hold.py --beside-allocations).  The prover now maps and unmaps in
# steps (simgpu.prover.address_space); `--map-in-one-call` runs the old way.
#   call 1 (540 s): the kernel's version; B on the staged prover traced (`--py-sample
#           0.001`) both ways; A-G mapping in steps, in one call, in steps again (paired on
#           one machine, no calibrate: the forty-fifth lease's profile, carried as
#           out/h100-cupy-key.toml, sets the plans; its predictions are not this host's).
#   call 2 (540 s): the pins' GPU tests; calibrate (380 s, with [pins] lock_pressure);
#           A-G on that profile.
#   call 3 (planned after the lease, 540 s): B traced on both provers with Python sampled,
#           the sampler now noting every pass of the cyclic collector (whether the one or
#           two 150-390 ms stalls a run that are left are the collector's), then A-G with
#           set-up frozen out of the collector's sight (the prover's way since
#           2026-12-06 18:45), as usual (SIMGPU_GC_AS_USUAL), and frozen again.
# Carry .whl, out/cubins.txz and out/h100-cupy-key.toml (copied to h200-cupy-key.toml on an H200);
# `bash experiments/leases/aside.sh out lean gpu` before each call, `in` after.
#
#   bash experiments/leases/device_lease46.sh 1|2|3 [END]
source "$(dirname "$0")/lease_lib.sh"
lease_start lease46 "${1:?which call: 1, 2 or 3}" "${2:-540}"
lease_watch
export CONTENTION=2^22
echo "kernel: $(uname -r); python: $(python3 -V)"
case "$CALL" in
  1)
    [ -f "$PROFILE" ] || cp out/h100-cupy-key.toml "$PROFILE"
    lease_validate "$(until_ $((SECONDS + 80)))" traced-B-staged-steps 2176 --only B --abc-upload staged \
      --kernel-trace B --py-sample 0.001
    lease_validate "$(until_ $((SECONDS + 80)))" traced-B-staged-onecall 2176 --only B --abc-upload staged \
      --kernel-trace B --py-sample 0.001 --map-in-one-call
    lease_validate "$(until_ $((SECONDS + 100)))" grid-A-G-steps 2176 --only A B C D E F G
    lease_validate "$(until_ $((SECONDS + 100)))" grid-A-G-onecall 2176 --only A B C D E F G --map-in-one-call
    lease_validate "$(until_ "$END")" grid-A-G-steps2 2176 --only A B C D E F G
    ;;
  2)
    timeout 120 python3 -m pytest -q -m gpu tests/test_transfer_gpu.py -k "pins or lock" > "$LOGS/pytest-pins.log" 2>&1
    echo "pins test rc=$? at $SECONDS s"; tail -1 "$LOGS/pytest-pins.log"
    rm -f "$PROFILE"
    calibrate_spanned 380 --msm-capacity key --pairing-sizes 2^20
    grep -E "pins of|locks of|^missing" "$LOGS/calibrate.log"
    lease_validate "$(until_ "$END")" grid-A-G 2176 --only A B C D E F G
    ;;
  3)
    [ -f "$PROFILE" ] || cp out/h100-cupy-key.toml "$PROFILE"
    lease_validate "$(until_ $((SECONDS + 130)))" traced-B-gc 2176 --only B --kernel-trace B --py-sample 0.001
    lease_validate "$(until_ $((SECONDS + 100)))" traced-B-staged-gc 2176 --only B --abc-upload staged \
      --kernel-trace B --py-sample 0.001
    lease_validate "$(until_ $((SECONDS + 100)))" grid-A-G-frozen 2176 --only A B C D E F G
    SIMGPU_GC_AS_USUAL=1 lease_validate "$(until_ $((SECONDS + 100)))" grid-A-G-usual 2176 --only A B C D E F G
    lease_validate "$(until_ "$END")" grid-A-G-frozen2 2176 --only A B C D E F G
    ;;
esac
lease_finish
