#!/usr/bin/env bash
# The device takes the working tree and the carried paths up to 64 MiB together, and the
# wheels alone (.whl: simpy, arkworks, numba, llvmlite) are 61-62 MiB.  Before a device call,
# `aside.sh out` moves what no lease script reads (the leases' data under docs/data and
# docs/validation-log.md) out of the tree; `aside.sh in` puts it back.  Never commit
# between the two: git would record the files as deleted.  `out lean` also moves docs/,
# tests/ and benchmarks/, which a calibrate-and-grid lease (device_lease32-34.sh) does not
# read: with numba 0.67 and llvmlite 0.49 the tracked tree left the call no room.
#
#   bash experiments/leases/aside.sh out [lean] | in
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
    echo "the tree now: $(git ls-files -z | xargs -0 cat 2>/dev/null | wc -c) bytes tracked"
    ;;
  in)
    if [ -d "$keep/lean" ]; then mv "$keep/lean/"* . && rmdir "$keep/lean"; fi
    mv "$keep/data/"* docs/data/
    mv "$keep/validation-log.md" docs/
    rmdir "$keep/data" "$keep"
    git status --short | head
    ;;
  *) echo "usage: aside.sh out [lean] | in"; exit 2 ;;
esac
