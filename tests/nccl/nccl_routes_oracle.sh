#!/usr/bin/env bash
# The fixed route against MPFR (tests/nccl/exactness.c: AllReduce, ReduceScatter, Reduce; every
# float type; sum, average, PreMulSum with host and device scalars; in place and not; three
# rotations of the contributions; the product's rank-order fold, which takes the exchange) at
# 32 ranks under REPROD_ROUTE=fixed (REPROD_ROUTE=auto: nccl_routes.sh); counts past the small
# path in several pieces (REPROD_SCRATCH_MB=1); rounding up, toward zero and down.
. tests/lib.sh

nccl_program exactness 120

BIG=32
if sanitized; then BIG=12; fi

# under NAME NP SETTINGS... -- ARGS...: the program under the shim; no element may be wrong.
under() {
    local name=$1 np=$2 settings=()
    shift 2
    while [ "$1" != -- ]; do settings+=(-x "$1"); shift; done
    shift
    run_mpi_shim "$np" -x LD_LIBRARY_PATH -x REPROD_VERBOSE=2 "${settings[@]}" "$program" "$@" >"$out/$name" 2>"$out/err.$name" ||
        fail "$name: $(cat "$out/$name") $(grep -v '^reprod' "$out/err.$name" | head -c 2000)"
    grep -q ' wrong 0 ' "$out/$name" || fail "$name: $(cat "$out/$name") $(grep -v '^reprod' "$out/err.$name" | head -c 2000)"
    grep -q ' distinct 1$' "$out/$name" || fail "$name: rotations disagree: $(cat "$out/$name")"
}

under fixed.$BIG $BIG REPROD_ROUTE=fixed -- --quick
grep -Eq "route fixed( \(|$)" "$out/err.fixed.$BIG" || fail "np=$BIG: the fixed route did not run"
ok "np=$BIG REPROD_ROUTE=fixed: $(cat "$out/fixed.$BIG")"
under large.3 3 REPROD_ROUTE=fixed REPROD_SCRATCH_MB=1 -- --quick --large
ok "np=3 REPROD_ROUTE=fixed REPROD_SCRATCH_MB=1, counts past the small path in pieces: $(cat "$out/large.3")"
for direction in up zero down; do
    under $direction 3 REPROD_ROUTE=fixed REPROD_ROUNDING=$direction -- --quick --rounding $direction
done
ok "np=3 REPROD_ROUTE=fixed, REPROD_ROUNDING=up, zero and down: every element as MPFR rounds it"
