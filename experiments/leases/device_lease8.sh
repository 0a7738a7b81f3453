#!/usr/bin/env bash
# The eighth H200 lease (2026-12-01, issue #19): calibrate with the k syntheses at once
# started together (a barrier, every pool worker up first) and the pressure read from
# the fastest of six calls each way; then the grid, the capped group at 2176 MiB (at
# 2112 MiB the seventh lease found single-lock, two-lock-reserve and split-finalizer
# each running out of memory in one run of three: a race), and a second pass of it.
# Outputs go straight under $OUT.  Calls back to back on one machine:
#   bash experiments/leases/device_lease8.sh 1   # calibrate; the grid at 2^22 on the whole card (A-G)
#   bash experiments/leases/device_lease8.sh 2   # the capped group at 2176 MiB, 2^20, 2^21 (H-R)
#   bash experiments/leases/device_lease8.sh 3   # a second run of every configuration run once
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
LOGS=$OUT/lease8/call$1
mkdir -p "$LOGS" out
PROFILE=out/h200-cupy.toml  # kept on the machine between the calls
source "$(dirname "$0")/lease_lib.sh"
case "$1" in
1)
  lease_machine
  lease_calibrate 400
  lease_validate $((585 - SECONDS)) gpu-validation 2176 --only A B C D E F G
  ;;
2) lease_validate 400 gpu-validation 2176 --only H I J K L M N O P Q R ;;
3) lease_validate 300 second-pass 2176 --only A C F G H I J K L M N O P Q R ;;
esac
