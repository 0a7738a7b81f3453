#!/usr/bin/env bash
# The fifty-second lease, for an H100 (no H200 came on 2026-12-07: three tries refused).
# It reads the model's `[run] retries` on a card for the first time.  The model's
# prediction, written before the lease (the fiftieth lease's call-3 H100 profile, carried
# as out/h100-cupy-key.toml; 100 Monte Carlo runs each; I, J, K at 2^22, three GPU
# workers, j=3, 6 proofs a run; the three designs give the same figures to 1-2 proofs):
#
#   cap MiB  retries  proofs failed of 600   runs losing a proof   completed s/proof
#   2096     0        600                    100 of 100            -
#   2096     1        514-522                100 of 100            6.7
#   2096     3        61-68                  48-51 of 100          2.64-2.66
#   2176     0        12                     4 of 100              0.96
#   2176     3        0                      0 of 100              0.96
#
# At 2096 every first cycle meets the refusal; a re-queued partition comes back after
# retry_backoff (1 s) and a new synthesis, when the others have moved on, so the model has
# three retries save nine proofs in ten and one retry about one in seven.
#   call 1 (560 s): at 2096, retries 3 and 1 twice each; then I, J, K traced at 2176
#           with cuzk's 0 until END (the remaining race's share: 3 of 33 runs on the
#           fiftieth lease, the model's 0.04).
#   call 2 (END as the budget allows): at 2096 retries 3 once more, at 2176 retries 3,
#           then 2176 with 0 again.
# Carry .whl, out/cubins.txz and out/h100-cupy-key.toml
# (`cp docs/data/h100-2026-12-07/call3/h100-cupy-key.toml out/`); `bash
# experiments/leases/aside.sh out lean` before each call, `in` after.
#
#   bash experiments/leases/device_lease52.sh 1|2 [END]
source "$(dirname "$0")/lease_lib.sh"
lease_start lease52 "${1:?which call: 1 or 2}" "${2:-560}"
lease_watch
lease_uncalibrated || exit 1
echo "kernel: $(uname -r); python: $(python3 -V); profile: $PROFILE"
# a fresh machine's first run also loads the 2^22 keys (47 s on the fiftieth lease)
case "$CALL" in
  1)
    lease_validate "$(until_ $((SECONDS + 120)))" retry3-2096-1 2096 --only I J K --retries 3 --alloc-trace I J K
    lease_validate "$(until_ $((SECONDS + 60)))" retry1-2096-1 2096 --only I J K --retries 1 --alloc-trace I J K
    lease_validate "$(until_ $((SECONDS + 60)))" retry3-2096-2 2096 --only I J K --retries 3 --alloc-trace I J K
    lease_validate "$(until_ $((SECONDS + 60)))" retry1-2096-2 2096 --only I J K --retries 1 --alloc-trace I J K
    n=1
    while [ "$((END - SECONDS))" -gt 40 ]; do
      lease_validate "$(until_ $((SECONDS + 45)))" "traced-2176-$n" 2176 --only I J K --alloc-trace I J K
      n=$((n + 1))
    done
    ;;
  2)
    lease_validate "$(until_ $((SECONDS + 120)))" retry3-2096-3 2096 --only I J K --retries 3 --alloc-trace I J K
    lease_validate "$(until_ $((SECONDS + 60)))" retry3-2176-1 2176 --only I J K --retries 3 --alloc-trace I J K
    n=1
    while [ "$((END - SECONDS))" -gt 40 ]; do
      lease_validate "$(until_ $((SECONDS + 45)))" "traced-2176-b$n" 2176 --only I J K --alloc-trace I J K
      n=$((n + 1))
    done
    ;;
  *) echo "no call $CALL" ;;
esac
lease_finish
