#!/usr/bin/env bash
# The demo makes its point (tools/run-demo --check, a reduced set of configurations): under the
# shim, examples/train.py gives one result at world sizes 1, 2 and 4 with two allreduce
# algorithms and two placements, and build/examples/solver one result per world size; natively
# each gives more than one. About 50 s on 2 cores.
. tests/lib.sh

"$PYTHON" -c 'import torch, mpi4py, sklearn' 2>/dev/null ||
    fail "$PYTHON cannot import torch, mpi4py and sklearn (apt-get install python3-torch python3-mpi4py python3-sklearn)"
[ -x build/examples/solver ] || make --no-print-directory build/examples/solver >/dev/null ||
    fail "cannot build build/examples/solver"
[ "$SHIM" = "$ROOT/build/libreprod_shim.so" ] ||
    echo "note: tools/run-demo preloads build/libreprod_shim.so, not TEST_SHIM"

out=$(mktemp)
trap 'rm -f "$out"' EXIT
timeout -k 5 300 tools/run-demo --check >"$out" 2>&1 || { cat "$out" >&2; fail "tools/run-demo --check"; }
grep -E '^  -> ' "$out" | sed 's/^  -> //' | while read -r line; do ok "$line"; done
