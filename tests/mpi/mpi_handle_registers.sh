#!/usr/bin/env bash
# MPICH's handles are ints: a caller may leave garbage in the upper half of the register that
# carries one (tests/mpi/handle_registers.c calls MPI_Allreduce and MPI_Reduce through
# pointers with 64-bit parameters, 0xdeadbeef above each handle, count and root). MPICH reads
# the low half; the shim must too (mpi_handle_of), or it misses MPI_SUM and MPI_DOUBLE and
# folds in rank order. Natively the data gives inexact sums; under the shim both calls are
# exact (MPFR), and counted as exact on every rank.
. tests/lib.sh

program=$BUILD/tests/mpich/handle_registers
[ -x "$program" ] || fail "$program is not built"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

native=$(run_mpich 3 "$program") || fail "natively: $native"
[ "$(grep -c ' dirty .* inexact$' <<<"$native")" -eq 2 ] ||
    fail "natively, the dirty-handle calls did not both give an inexact sum: $native"
ok "natively (MPICH, np=3): both calls accept the dirty registers, and sum inexactly"

got=$(run_mpich_shim 3 -env REPROD_VERBOSE 1 "$program" 2>"$log") ||
    fail "under the shim: $got $(cat "$log")"
[ "$(grep -c '^MPI_\(Allreduce\|Reduce\) dirty .* exact$' <<<"$got")" -eq 2 ] ||
    fail "under the shim, a call with dirty handle registers was not exact: $got"
counts=$(grep -c 'counts: .* exact=2 ordered=0 passed=0 .* MPI\.made=2 ' "$log")
[ "$counts" -eq 3 ] || fail "the calls were not counted as exact on every rank: $(cat "$log")"
ok "under the shim: both calls exact (MPFR) and counted as exact on all 3 ranks"

# The Open MPI build passes the handles clean (pointers): the same exact sums.
got=$(run_mpi_shim 3 "$BUILD/tests/mpi/handle_registers" 2>"$log") ||
    fail "Open MPI under the shim: $got $(cat "$log")"
[ "$(grep -c ' clean .* exact$' <<<"$got")" -eq 2 ] || fail "Open MPI under the shim: $got"
ok "Open MPI (clean handles) under the shim: both calls exact"
