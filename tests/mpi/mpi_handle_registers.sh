#!/usr/bin/env bash
# MPICH's handles are ints: a caller may leave garbage in the upper half of the register that
# carries one (tests/mpi/handle_registers.c calls every kind of hook that takes a handle by value
# through pointers with 64-bit parameters, 0xdeadbeef above each handle, count and root: the
# blocking reductions, classic and large-count, the nonblocking and persistent ones, and
# MPI_Request_get_status on a request). MPICH reads the low half; the shim must too (each hook's
# handles go through mpi_handle_of), or it misses MPI_SUM and MPI_DOUBLE and folds in rank order,
# or misses its own request. Natively the data gives inexact sums; under the shim every call is
# exact (MPFR) on every rank, and counted as exact on every rank.
. tests/lib.sh

program=$BUILD/tests/mpich/handle_registers
[ -x "$program" ] || fail "$program is not built"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

native=$(run_mpich 3 "$program") || fail "natively: $native"
[ "$(grep -c '^MPI_\(Allreduce\|Reduce\) dirty .* inexact$' <<<"$native")" -eq 2 ] ||
    fail "natively, MPI_Allreduce and MPI_Reduce with dirty handles did not both sum inexactly: $native"
ok "natively (MPICH, np=3): the calls accept the dirty registers, and MPI_Allreduce and MPI_Reduce sum inexactly"

got=$(run_mpich_shim 3 -env REPROD_VERBOSE 1 "$program" 2>"$log") ||
    fail "under the shim: $got $(cat "$log")"
calls=$(grep -c ' dirty ' <<<"$got")
[ "$calls" -ge 9 ] || fail "under the shim, only $calls calls reported: $got"
! grep -q ' inexact$' <<<"$got" || fail "under the shim, a call with dirty handle registers was not exact: $got"
counts=$(grep -c "counts: .* exact=$calls ordered=0 passed=0 .* MPI\.made=$calls " "$log")
[ "$counts" -eq 3 ] || fail "the $calls calls were not all counted as exact on every rank: $(cat "$log")"
ok "under the shim: all $calls calls exact (MPFR) and counted as exact on all 3 ranks"

# The Open MPI build passes the handles clean (pointers): the same exact sums.
got=$(run_mpi_shim 3 "$BUILD/tests/mpi/handle_registers" 2>"$log") ||
    fail "Open MPI under the shim: $got $(cat "$log")"
calls=$(grep -c ' clean ' <<<"$got")
[ "$calls" -ge 9 ] && ! grep -q ' inexact$' <<<"$got" || fail "Open MPI under the shim: $got"
ok "Open MPI (clean handles) under the shim: all $calls calls exact"
