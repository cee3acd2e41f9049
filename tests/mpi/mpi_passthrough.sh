#!/usr/bin/env bash
# Where the shim cannot serve the MPI library, every call still reaches the real function and
# the job runs exactly as without the shim, with a warning that says why (docs/design.md,
# Safety rules: never a NULL call):
#   - a shim built without MPICH's headers (build/nompich/, as `make MPI_FAMILIES=openmpi`
#     builds it) under MPICH programs in C and Fortran: the native run's bits;
#   - a stand-in MPI library of no known family (tests/standins/mpi_standin.c);
#   - a stand-in that looks like MPICH and lacks MPI_Alltoallv, which the data paths need.
. tests/lib.sh

NOMPICH=$(dirname "$SHIM")/nompich/libreprod_shim.so
[ -f "$NOMPICH" ] || fail "$NOMPICH is not built"
NOMPICH_PRELOAD=${PRELOAD_FIRST:+$PRELOAD_FIRST:}$NOMPICH
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# same NAME NP PROGRAM ARGS...: PROGRAM's standard output (its lines) and exit status under the shim
# without MPICH's headers are the native run's, and every rank's log says why it passed.
WHY="the MPI library is of the MPICH family, and this shim was built without MPICH's headers"
same() {
    local name=$1 np=$2
    shift 2
    local fixed=(-env MPIR_CVAR_DEVICE_COLLECTIVES none -env MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM recursive_doubling)
    local native_status=0 shim_status=0
    run_mpich "$np" "${fixed[@]}" "$@" >"$out/native" 2>"$out/native.err" || native_status=$?
    run_mpich "$np" "${fixed[@]}" -env LD_PRELOAD "$NOMPICH_PRELOAD" -env REPROD_VERBOSE 1 "$@" \
        >"$out/shim" 2>"$out/log" || shim_status=$?
    grep -q 'egmentation\|BAD TERMINATION\|signal' "$out/log" &&
        fail "$name under the shim without MPICH's headers crashed: $(head -c 2000 "$out/log")"
    [ "$native_status" = "$shim_status" ] ||
        fail "$name: $(status_text "$shim_status") under the shim without MPICH's headers, $(status_text "$native_status") natively: $(head -c 2000 "$out/log")"
    # Ranks print in any order: lines are compared as sets.
    sort -o "$out/native" "$out/native" && sort -o "$out/shim" "$out/shim"
    cmp -s "$out/native" "$out/shim" ||
        fail "$name: the output differs from the native run's: $(diff "$out/native" "$out/shim" | head -20)"
    [ -s "$out/native" ] || fail "$name printed nothing"
    [ "$(grep -c "warning: .*passed through unchanged.*(unsupported: $WHY" "$out/log")" -eq "$np" ] ||
        fail "$name: not every rank says why its calls passed through: $(head -c 2000 "$out/log")"
    [ "$(grep -c 'counts: .* exact=0 ordered=0 .* MPI\.made=0 MPI\.passed=[1-9]' "$out/log")" -eq "$np" ] ||
        fail "$name: not counted as passed through on every rank: $(grep counts "$out/log")"
    ok "$name (np=$np) under the shim without MPICH's headers: the native run's output and exit status ($native_status), each rank's log says why"
}

for program in "$BUILD/tests/mpich/exactness" "$BUILD/tests/mpich/handle_registers" \
    "$BUILD/tests/fortran/mpich/sum_mpi" "$BUILD/tests/fortran/mpich/sum_f08"; do
    [ -x "$program" ] || fail "$program is not built"
done
same "C: MPI_Allreduce, MPI_Reduce, MPI_Reduce_scatter_block" 3 "$BUILD/tests/mpich/exactness" --native
same "C: sums natively inexact" 3 "$BUILD/tests/mpich/handle_registers"
grep -q ' inexact$' "$out/native" || fail "handle_registers: natively exact: the data shows nothing"
same "Fortran, use mpi" 3 "$BUILD/tests/fortran/mpich/sum_mpi"
same "Fortran, use mpi_f08" 3 "$BUILD/tests/fortran/mpich/sum_f08"
grep -q 'wrong results' "$out/native" || fail "Fortran: natively every sum was exact: the data shows nothing"

# The stand-in MPI libraries: a one-rank job linked against one, under the full shim.
job=$BUILD/tests/progs/mpi_standin_job
[ -x "$job" ] || fail "$job is not built"
# standin NAME LIBRARY_DIRECTORY WHY: the job's output under the shim is the native one (each
# library function reached as often), and the log says WHY.
standin() {
    local name=$1 directory=$2 why=$3 status=0
    LD_LIBRARY_PATH=$directory "$job" >"$out/native" 2>&1 || fail "$name: natively: $(cat "$out/native")"
    LD_LIBRARY_PATH=$directory LD_PRELOAD=$PRELOAD REPROD_VERBOSE=1 "$job" >"$out/shim" 2>"$out/log" ||
        status=$?
    [ "$status" = 0 ] || fail "$name: the job failed under the shim (exit status $status): $(cat "$out/shim" "$out/log")"
    cmp -s "$out/native" "$out/shim" ||
        fail "$name: the output differs from the native run's: $(diff "$out/native" "$out/shim")"
    grep -q 'MPI_Allreduce ran 2 times' "$out/shim" || fail "$name: $(cat "$out/shim")"
    grep -qF "warning: MPI_Allreduce passed through unchanged, its result may not be reproducible (unsupported: $why)" "$out/log" ||
        fail "$name: the log does not say why: $(cat "$out/log")"
    grep -q 'counts: .* MPI\.made=0 MPI\.passed=4 ' "$out/log" ||
        fail "$name: the 4 reductions were not counted as passed through: $(cat "$out/log")"
    ok "$name: every call reached the library, the native output, the log says why"
}
standin "an MPI of no known family" "$BUILD/tests/standins" \
    "the MPI library is neither Open MPI nor of the MPICH family"
standin "an MPICH-like MPI lacking MPI_Alltoallv" "$BUILD/tests/standins/mpich_incomplete" \
    "MPI_Alltoallv, which the data paths need, is missing from the MPI library"
