#!/usr/bin/env bash
# The device takes the working tree and the carried paths up to 64 MiB together, and the
# wheels alone (.whl: simpy, arkworks, numba, llvmlite) are 62 MiB.  Before a device call,
# `aside.sh out` moves what no lease script reads (the leases' data under docs/data and
# docs/validation-log.md) out of the tree; `aside.sh in` puts it back.  Never commit
# between the two: git would record the files as deleted.
#
#   bash experiments/leases/aside.sh out|in
set -eu
cd "$(git rev-parse --show-toplevel)"
keep=${SIMGPU_ASIDE:-${TMPDIR:-/tmp}/simgpu-aside}
case "${1:?out or in}" in
  out)
    [ -e "$keep" ] && { echo "$keep exists: put it back first (aside.sh in)"; exit 2; }
    mkdir -p "$keep/data"
    mv docs/data/h[0-9]*-20* "$keep/data/"
    mv docs/validation-log.md "$keep/"
    echo "the tree now: $(git ls-files -z | xargs -0 cat 2>/dev/null | wc -c) bytes tracked"
    ;;
  in)
    mv "$keep/data/"* docs/data/
    mv "$keep/validation-log.md" docs/
    rmdir "$keep/data" "$keep"
    git status --short | head
    ;;
  *) echo "usage: aside.sh out|in"; exit 2 ;;
esac
