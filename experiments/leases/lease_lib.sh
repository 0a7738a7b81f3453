# Shared steps of the H200 lease scripts (experiments/leases/device_lease8.sh and later):
# `source` it after setting LOGS (this call's output folder) and PROFILE (the profile
# kept on the machine between calls), or call lease_profile to name it by the card.

lease_start() {  # lease_start NAME CALL END: a lease script's call, its logs in $OUT/NAME-CALL
  set -u
  export PYTHONUNBUFFERED=1
  OUT=${OUT:-out/device} CALL=$2 END=$3
  LOGS=$OUT/$1-$CALL
  mkdir -p "$LOGS" out
  lease_profile
  lease_machine
  lease_cubins
}

lease_cubins() {  # lease_cubins: the kernels built ahead of time here, where the call carries them
  # (`python -m simgpu.gpu.cuda build-cubins out/cubins sm_90` on the developer's machine,
  # packed as out/cubins.txz: 0.4 MB against 1.9): a fresh machine then spends no device
  # time compiling (92 s on the twenty-eighth lease's first run).  A module whose source
  # changed, or a card of another arch, compiles as before; a cubin the driver refuses
  # turns the folder off for the call.
  [ -f out/cubins.txz ] || return 0
  tar -C out -xJf out/cubins.txz || return 0
  export SIMGPU_CUBIN_DIR=$PWD/out/cubins
  if timeout 60 python3 -c "from simgpu.gpu.cuda import MODULES, load_module; [load_module(*m) for m in MODULES]" \
      > "$LOGS/cubins.log" 2>&1; then
    echo "kernels: built ahead of time, loaded at $SECONDS s"
  else
    echo "kernels: the carried cubins did not load (cubins.log); compiling as before"; unset SIMGPU_CUBIN_DIR
  fi
}

lease_machine() {  # what the machine is: the GPU, the cores, the CPU
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc
  lscpu | grep -E "^(Model name|NUMA node\(s\))"
}

time_left() {  # time_left LIMIT NAME: whether LIMIT seconds remain (`timeout 0` would never stop)
  [ "$1" -gt 0 ] && return 0
  echo "$2 skipped: the call's time is spent"; return 1
}

lease_calibrate() {  # lease_calibrate LIMIT [ARGS...]: calibrate as h200-cupy was measured, into $PROFILE
  # (its contention runs at CONTENTION, 2^20 unless set)
  local limit=$1; shift
  time_left "$limit" calibrate || return 1
  # a calibrate stopped by the timeout's SIGTERM writes what it measured (as Ctrl-C);
  # -k: the fits then have a minute
  timeout -k 60 "$limit" python3 -m simgpu.cli calibrate --out "$PROFILE" --sizes 2^18..2^22 --repeats 6 --b-g2-on gpu \
    --b-g2-threads 8 --circuit porep --contention-size "${CONTENTION:-2^20}" "$@" > "$LOGS/calibrate.log" 2>&1
  echo "calibrate rc=$? at $SECONDS s"; grep -E "at once|beside|trip|wrote" "$LOGS/calibrate.log"; cp "$PROFILE" "$LOGS/"
}

lease_validate() {  # lease_validate LIMIT NAME CAP ARGS...: part of gpu_validation.py's grid, capped group at CAP MiB
  local limit=$1 name=$2 cap=$3; shift 3
  time_left "$limit" "$name" || return 1
  timeout "$limit" python3 experiments/gpu_validation.py measure --profile "$PROFILE" --tight-mib "22=$cap" \
    --json "$LOGS/$name.json" "$@" > "$LOGS/$name.log" 2>&1
  echo "$name rc=$? at $SECONDS s"; grep -E "s/proof" "$LOGS/$name.log" | cut -c1-120
}

lease_precompile() {  # lease_precompile LIMIT: every kernel module compiled into CuPy's disk cache
  # (a call that does not calibrate first would spend its first run's set-up on it: 92 s
  # on the twenty-eighth lease's fresh H100, where each run had 25-30 s)
  time_left "$1" precompile || return 1
  timeout "$1" python3 -c "from simgpu.gpu.cuda import precompile; precompile()" > "$LOGS/precompile.log" 2>&1
  local rc=$?
  echo "precompile rc=$rc at $SECONDS s"
  return $rc
}

lease_calibrate_once() {  # lease_calibrate_once CALL LIMIT [ARGS...]: calibrate on call 1, or on a fresh machine
  local call=$1; shift
  if [ "$call" = 1 ] || [ ! -f "$PROFILE" ]; then
    [ "$call" = 1 ] || echo "FRESH MACHINE: no $PROFILE, calibrating again"
    lease_calibrate "$@"
  fi
}

left() { echo $(( $1 - SECONDS )); }  # left END: the seconds from now to END s into the call

until_() {  # until_ T: the seconds from now to min(T, END) s into the call (END: the call's last second)
  local t=$1; [ "$t" -gt "$END" ] && t=$END; left "$t"
}

lease_profile() {  # PROFILE by the card: a lease that gets an H100 calibrates an H100 profile
  case "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null)" in
    *H100*) PROFILE=out/h100-cupy-key.toml ;;
    *) PROFILE=out/h200-cupy-key.toml ;;
  esac
}

lease_uncalibrated() {  # a call that does not calibrate: PROFILE as shipped (h200-cupy) on an
  # H200; on an H100 the profile the call carries as out/h100-cupy-key.toml, which it names
  [ -f "$PROFILE" ] && return 0
  case "$PROFILE" in
    *h200*) cp simgpu/profile/profiles/h200-cupy.toml "$PROFILE" ;;
    *) echo "no $PROFILE: carry it (out/h100-cupy-key.toml)"; return 1 ;;
  esac
}

# host_probe reads one thread, whose core flips between about 1.1x and 1.9x its fastest every
# 0.1-0.4 s on these VMs: its "HOST UNSTEADY" fails every host met so far.  What a pipeline sees
# is the mean over all cores, which held still to 2% on the 24th lease: watch that instead
# (experiments/host_modes.py, as device_lease24.sh does).
host_probe() {  # host_probe SECONDS: the reference loop (calibrate's measure of the host's speed) every 0.25 s
  python3 - "$1" <<'PY' | tee -a "$LOGS/host.log"
import statistics, sys, time
from simgpu.calibrate.measure import reference_seconds
end, xs = time.time() + float(sys.argv[1]), []
while time.time() < end:
    xs.append(reference_seconds() * 1e3); time.sleep(0.25)
q = statistics.quantiles(xs, n=10)
print(f"host: reference loop {min(xs):.2f} / {q[0]:.2f} / {statistics.median(xs):.2f} / {q[-1]:.2f} / {max(xs):.2f} ms (min/p10/median/p90/max, {len(xs)} samples)")
if q[-1] > 1.3 * min(xs):  # the twenty-first to twenty-third leases' hosts: two modes, about 1.0 and 2.0 ms
    print(f"HOST UNSTEADY: its p90 is {q[-1] / min(xs):.2f}x its fastest")
PY
}

lease_watch() {  # lease_watch: the host on every core for the whole call (experiments/host_modes.py), as WATCH
  python3 experiments/host_modes.py watch "$LOGS/host.csv" --seconds "$END" &
  WATCH=$!
}

calibrate_spanned() {  # calibrate_spanned LIMIT [ARGS...]: lease_calibrate, its start and end (unix s) kept for predict
  local t0; t0=$(date +%s.%N)
  lease_calibrate "$@"
  echo "$t0,$(date +%s.%N)" > out/calibrate.span; cp out/calibrate.span "$LOGS/"
}

lease_finish() {  # lease_finish: stop the watcher, summarise the host, pack the call's files
  kill "$WATCH" 2>/dev/null; wait "$WATCH" 2>/dev/null
  python3 experiments/host_modes.py summary "$LOGS/host.csv" | tail -2
  [ -f out/calibrate.span ] && python3 experiments/host_modes.py summary "$LOGS/host.csv" \
    --from "$(cut -d, -f1 out/calibrate.span)" --to "$(cut -d, -f2 out/calibrate.span)" | tail -1
  # gzipped: one K run with its allocations traced is 3.5 MB of JSON (0.2 MB gzipped), and
  # a file over 16 MB does not come back (the twenty-ninth lease lost 16 runs' traces so)
  (cd "$LOGS" && gzip -f ./*.json 2>/dev/null; tar -cf runs.tar ./*.json.gz ./*.toml ./*.span 2>/dev/null
   rm -f ./*.json.gz ./*.toml)
  (cd "$LOGS" && gzip -f host.csv && tar -cf texts.tar ./*.log ./host.csv.gz && rm ./*.log ./host.csv.gz)
  ls -la "$LOGS"
}
