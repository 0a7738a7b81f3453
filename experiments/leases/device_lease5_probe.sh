#!/usr/bin/env bash
# Issue #19, this session's first H200 calls: what slows the driver's stages in a pipeline
# (experiments/driver_probe.py at 2^22 and 2^20, each stage beside one kind of load at a
# time, K of it), real runs with their records to see what each stage overlapped there,
# and the log importer's check on today's prover (issue #15).
#   bash experiments/leases/device_lease5_probe.sh probe
#   bash experiments/leases/device_lease5_probe.sh fromlog
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/device}
mkdir -p "$OUT/probe"
case "$1" in
probe)
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; nproc
  LOADS="none worker:1 worker:2 worker:4 handoff:2 synth:2 prep:2 gpu:1 membw:2"
  for n in 22 20; do
    timeout 240 python3 experiments/driver_probe.py --constraints 2^$n --repeats 5 \
      --json "$OUT/probe/probe$n.json" --loads $LOADS 2>&1 | tail -11
    echo "probe 2^$n at $SECONDS s"
  done
  for cfg in "A 22 1 single-lock" "L 20 2 single-lock"; do set -- $cfg
    timeout 60 python3 -m simgpu.cli run -d $4 --gpu-workers $3 -j 3 -n 6 --constraints 2^$2 --partitions 4 \
      --partition-workers 8 --circuit porep --b-g2-on gpu --b-g2-threads 8 \
      --records "$OUT/probe/rec-$1.jsonl" --json > "$OUT/probe/run-$1.json" 2> "$OUT/probe/run-$1.err"
    echo "$1 rc=$? at $SECONDS s"
  done
  ;;
fromlog)
  timeout 300 python3 experiments/fromlog_check.py --backend cupy --base h200-cupy --circuit porep \
    --b-g2-on gpu --b-g2-threads 8 --proofs 12 --out "$OUT/fromlog" 2>&1 | tail -14
  echo "fromlog rc=$? at $SECONDS s"
  ;;
esac
