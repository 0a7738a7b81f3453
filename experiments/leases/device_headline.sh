#!/usr/bin/env bash
# The Phase 10 story on the real GPU: at a VRAM cap where the model says two-lock runs
# out of memory and single-lock does not (2^22 constraints, cap from
# experiments/validation_sweep.py's search on simgpu/profile/profiles/h200-cupy.toml), run both.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
mkdir -p "$OUT"
CAP=${CAP:-1344M}
# b_g2_msm split as in the calibration (simgpu calibrate --b-g2-threads, default 4): the
# profile's b_g2_msm times hold for that split only.
B_G2_THREADS=${B_G2_THREADS:-4}
for gw in 2 3; do
  for d in two-lock single-lock; do
    echo "=== $d gw=$gw cap=$CAP"
    timeout 200 python3 -m simgpu.cli run --design "$d" --constraints 2^22 --partitions 2 --proofs 2 -j 2 \
      --gpu-workers "$gw" --partition-workers 8 --b-g2-threads "$B_G2_THREADS" --vram "$CAP" --json \
      > "$OUT/run-$d-gw$gw.json" 2> "$OUT/run-$d-gw$gw.err"
    echo "rc=$?"; python3 -c "
import json,sys; d=json.load(open('$OUT/run-$d-gw$gw.json'))
print(d['proofs'], 'oom', len(d['oom_events']), 'peak MiB', d['devices'][0]['peak_vram_bytes']>>20, 'thr', d['throughput_s_per_proof'], d['verification'])
for o in d['oom_events'][:2]: print('  ', o['stage'], o['worker'], o['buffer'], o['requested_bytes']>>20, 'MiB req', o['free_bytes']>>20, 'MiB free')
" 2>&1 | tail -4; tail -2 "$OUT/run-$d-gw$gw.err"
  done
done
