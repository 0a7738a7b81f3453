#!/usr/bin/env bash
# The device takes the working tree and the carried paths up to 64 MiB together, and the
# wheels alone (.whl: simpy, arkworks, numba, llvmlite) are 61-62 MiB.  Before a device call,
# `aside.sh out` moves what no lease script reads (the leases' data under docs/data and
# docs/validation-log.md) out of the tree; `aside.sh in` puts it back.  Never commit
# between the two: git would record the files as deleted.  `out lean` also moves docs/,
# tests/ and benchmarks/, which a calibrate-and-grid lease (device_lease32-34.sh) does not
# read: with numba 0.67 and llvmlite 0.49 the tracked tree left the call no room.
# `out lean gpu` then copies the GPU tests back (tests/test_*_gpu.py, conftest.py and
# the tiny profile it reads), for a call that runs `pytest -m gpu`; `in` drops that copy.
#
#   bash experiments/leases/aside.sh out [lean [gpu]] | in
set -eu
cd "$(git rev-parse --show-toplevel)"
keep=${SIMGPU_ASIDE:-${TMPDIR:-/tmp}/simgpu-aside}
case "${1:?out or in}" in
  out)
    [ -e "$keep" ] && { echo "$keep exists: put it back first (aside.sh in)"; exit 2; }
    mkdir -p "$keep/data"
    mv docs/data/h[0-9]*-20* "$keep/data/"
    mv docs/validation-log.md "$keep/"
    if [ "${2:-}" = lean ]; then mkdir -p "$keep/lean" && mv docs tests benchmarks "$keep/lean/"; fi
    if [ "${2:-}" = lean ] && [ "${3:-}" = gpu ]; then
      mkdir -p tests/data
      cp "$keep"/lean/tests/test_*_gpu.py "$keep/lean/tests/conftest.py" tests/
      cp "$keep/lean/tests/data/tiny.toml" tests/data/
    fi
    echo "the tree now: $(git ls-files -z | xargs -0 cat 2>/dev/null | wc -c) bytes tracked"
    ;;
  in)
    if [ -d "$keep/lean" ]; then
      [ -d "$keep/lean/tests" ] && rm -rf tests  # the GPU tests' copy (out lean gpu), if any
      mv "$keep/lean/"* . && rmdir "$keep/lean"
    fi
    mv "$keep/data/"* docs/data/
    mv "$keep/validation-log.md" docs/
    rmdir "$keep/data" "$keep"
    git status --short | head
    ;;
  *) echo "usage: aside.sh out [lean [gpu]] | in"; exit 2 ;;
esac
