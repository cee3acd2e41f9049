#!/usr/bin/env bash
# An unmodified mpi4py script (tests/python/mpi4py_sum.py) run by Debian's /usr/bin/python3 under
# mpirun with 3 ranks. mpi4py reaches libmpi through a Python extension module; with the shim
# preloaded, its float sums (comm.Allreduce, Reduce, Scan, Iallreduce + Wait on float64 and
# float32 numpy arrays) must be the correctly rounded exact sums, bitwise identical on every
# rank, and REPROD_VERBOSE=1 must show exact calls on every rank (the hooks were reached).
# Natively the same script runs too; there its sums may differ from the exact ones (counted).
. tests/lib.sh

SCRIPT=tests/python/mpi4py_sum.py
"$PYTHON" -c 'import mpi4py, numpy' 2>/dev/null ||
    fail "$PYTHON cannot import mpi4py and numpy (apt-get install python3-mpi4py python3-numpy)"
[ -f "$SHIM" ] || fail "$SHIM is missing: build it with make build/libreprod_shim.so"
export MPI_TIMEOUT=${MPI_TIMEOUT:-60}

out=$(mktemp)
trap 'rm -f "$out" "$out.log"' EXIT

run_mpi 3 "$PYTHON" "$SCRIPT" --native >"$out" 2>&1 ||
    { cat "$out" >&2; fail "mpi4py script, natively with --native"; }
ok "natively: native differs, as expected: $(grep -m1 'native:' "$out" | sed 's/^mpi4py_sum: native: //')"

# The shim's lines in a file of their own: on one stream, a summary could land inside a line the
# script prints in pieces (Python writes a print's pieces apart under PYTHONUNBUFFERED).
run_mpi_shim 3 -x REPROD_VERBOSE=1 "$PYTHON" "$SCRIPT" >"$out" 2>"$out.log" ||
    { grep -hE '^(FAIL|mpi4py_sum|reprod)' "$out" "$out.log" >&2; fail "mpi4py script under the shim"; }
for rank in 0 1 2; do
    lines=$(grep -cE "^reprod\[$rank\]: summary: " "$out.log")
    exact=$(grep -cE "^reprod\[$rank\]: summary: [1-9][0-9]* calls exact" "$out.log")
    [ "$lines" -eq 1 ] && [ "$exact" -eq 1 ] || {
        grep -E '^reprod\[' "$out.log" >&2
        fail "rank $rank: $lines summary lines, $exact with exact calls (expected one, with exact calls)"
    }
done
ok "under the shim: $(grep -m1 '^mpi4py_sum: np=' "$out"); $(grep -m1 -E '^reprod\[0\]: summary' "$out.log")"
