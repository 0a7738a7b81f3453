#!/usr/bin/env bash
# The twenty-fourth lease (issue #19, item 5): the twenty-second's plan, with the host
# watched on every core for the whole of each call (experiments/host_modes.py).  The
# 24th lease's first look found no steady host to wait for: each core flips between
# about 1.1x and 1.9x its fastest every 0.1-0.4 s, 5-14 of 16 cores slow at any moment,
# the host's mean over all cores 1.4-1.8 from second to second.  So this lease does not
# filter hosts: it calibrates and validates on the one it gets, and reads each run's
# stretch of the all-core samples against calibrate's (gpu_validation.py predict
# --host-watch --calibrate-span), in place of one thread's loop before and after.
#   call 1: calibrate --msm-capacity key (its span written to calibrate.span), A-G;
#   call 2: H-R with the capped group at 2176 MiB, then a second pass of four uncapped
#           configurations (the spread: a fresh machine's start costs about 170 s of
#           device time, so a session's 1800 s holds two full calls and little more);
#   call 3: a second pass of the other uncapped configurations, the capped group twice.
# A call that finds a fresh machine (no profile) calibrates first and says so.
# The working tree must stay under the device's 64 MiB: move docs/data/h*-2026-* aside.
#
#   bash experiments/leases/device_lease24.sh 1|2|3 [END]
# END (default 585): the second of the call by which its last step must end.
source "$(dirname "$0")/lease_lib.sh"
lease_start lease24 "${1:?which call: 1, 2 or 3}" "${2:-585}"
lease_watch
if [ "$CALL" = 1 ]; then
  calibrate_spanned 300 --msm-capacity key
  lease_validate "$(until_ 585)" grid-A-G 2176 --only A B C D E F G && touch out/lease24-A-G-done
else
  [ -f "$PROFILE" ] || { echo "FRESH MACHINE: no $PROFILE, calibrating again"; calibrate_spanned 300 --msm-capacity key; }
  if [ "$CALL" = 2 ]; then
    [ -f out/lease24-A-G-done ] || lease_validate "$(until_ 250)" grid-A-G 2176 --only A B C D E F G
    lease_validate "$(until_ 430)" grid-H-R 2176 --only H I J K L M N O P Q R
    lease_validate "$(until_ 585)" second-pass 2176 --only A C F G
  else
    lease_validate "$(until_ 300)" second-pass-2 2176 --only D L M N O Q R
    lease_validate "$(until_ 400)" capped-2 2176 --only H I J K
    lease_validate "$(until_ 585)" capped-3 2176 --only H I J K
  fi
fi
lease_finish
