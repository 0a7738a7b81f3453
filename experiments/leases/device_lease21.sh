#!/usr/bin/env bash
# The twenty-first H200 lease (issue #19, items 4 and 5): the plan of device_lease20.sh
# in one call, ordered by what the issue needs most, now that the lease-19 timings show
# the whole of it fits one call (calibrate ~130 s, a pass of the grid ~80-100 s, a pass
# of the capped group ~10-20 s):
#   calibrate with --msm-capacity key (the exclusive device reading, calibrate's
#   default, and the synthesis trip beside the pressure load, measured for the first
#   time); the grid A-R with the capped group at 2176 MiB; the capped group twice more at
#   2176 MiB and once at 2100 and 2250 (is the race gone now that every partition's G2
#   MSM has the same arrays?); a second pass of the uncapped configurations (the
#   run-to-run spread); B and E with every kernel and copy traced (which worker's work
#   reaches the one stream first, docs/validation-log.md); one pass of the capped group with
#   every allocation traced.
# The working tree must stay under the device's 64 MiB: with the wheels in .whl (62 MiB)
# move docs/data/h200-* aside for the call, and back after.
#
#   bash experiments/leases/device_lease21.sh
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
LOGS=$OUT/lease21
mkdir -p "$LOGS" out
PROFILE=out/h200-cupy-key.toml
source "$(dirname "$0")/lease_lib.sh"
lease_machine
python3 -c "import numpy, numba, cupy; print('numpy', numpy.__version__, 'numba', numba.__version__, 'cupy', cupy.__version__)"
lease_calibrate 240 --msm-capacity key
lease_validate "$(left 330)" grid-A-G 2176 --only A B C D E F G
lease_validate "$(left 400)" grid-H-R 2176 --only H I J K L M N O P Q R
for k in 1 2; do lease_validate "$(left $((400 + 25 * k)))" "capped-$k" 2176 --only H I J K; done
lease_validate "$(left 465)" cap2100 2100 --only H I J K
lease_validate "$(left 485)" cap2250 2250 --only H I J K
lease_validate "$(left 540)" traced-B-E 2176 --only B E --kernel-trace B E
lease_validate "$(left 570)" alloc-1 2176 --only H I J K --alloc-trace H I J K
# at most 8 files come back: the traces compressed, the rest in two archives
gzip -f "$LOGS"/traced-B-E.json "$LOGS"/alloc-1.json 2>/dev/null
(cd "$LOGS" && tar -cf runs.tar ./*.json ./*.toml && rm ./*.json ./*.toml)
(cd "$LOGS" && tar -cf texts.tar ./*.log && rm ./*.log)
ls -la "$LOGS"
