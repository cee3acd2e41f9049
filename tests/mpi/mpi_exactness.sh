#!/usr/bin/env bash
# The same contributions on 1 to 8 ranks, in several rotations, under each of Open MPI's
# all-reduce algorithms, and on 2 to 5 ranks under each of MPICH's: under the shim one result,
# identical on every rank and equal to the MPFR oracle (tests/mpi/exactness.c checks that in
# each run; here we check across runs and across the two libraries); natively, the results
# differ.
. tests/lib.sh

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# compare FAMILY NP: under the shim every algorithm gave the same result for every case (and
# the same as the other family where it ran); natively, some case differs between rotations
# or algorithms once there are 3 ranks or more (with 1 or 2 a sum has one order, up to
# commutativity).
compare() {
    local family=$1 np=$2
    cut -d' ' -f1-5 "$out"/shim.$family.$np.* | sort -u >"$out/shim.$family.$np.cases"
    local cases
    cases=$(wc -l <"$out/shim.$family.$np.cases")
    [ "$cases" -eq "$(wc -l <"$(ls "$out"/shim.$family.$np.* | head -1)")" ] ||
        fail "$family np=$np: results differ between algorithms under the shim: $(head -20 "$out/shim.$family.$np.cases")"
    if [ -f "$out/shim.openmpi.$np.cases" ] && [ "$family" = mpich ] &&
        ! cmp -s "$out/shim.openmpi.$np.cases" "$out/shim.mpich.$np.cases"; then
        fail "np=$np: MPICH and Open MPI results differ under the shim: $(diff "$out/shim.openmpi.$np.cases" "$out/shim.mpich.$np.cases" | head)"
    fi
    local native_distinct rotation_distinct
    native_distinct=$(cat "$out"/native.$family.$np.* | cut -d' ' -f1-5 | sort -u | wc -l)
    rotation_distinct=$(awk '$6 > 1' "$out"/native.$family.$np.* | wc -l)
    if [ "$np" -ge 3 ] && [ "$native_distinct" -eq "$cases" ] && [ "$rotation_distinct" -eq 0 ]; then
        fail "$family np=$np: natively all rotations and algorithms agreed: the test data does not show the problem"
    fi
    ok "$family np=$np: $cases cases, one result each under the shim for $3 algorithms x 4 rotations;" \
        "natively $((native_distinct - cases)) extra results across algorithms, $rotation_distinct cases varying with rotation"
}

# Under a sanitizer (make test-sanitize) a subset: the same paths, a third of the runs. Six
# ranks are left out (5 and 7 are the non-powers of two on either side), and one process runs
# one algorithm (with no peer, none of them sends anything).
OMPI_RANKS="1 2 3 4 5 7 8" OMPI_ALGORITHMS="1 2 3 4 5 6" MPICH_RANKS="2 3 4 5"
if sanitized; then
    OMPI_RANKS="1 3 4 8" OMPI_ALGORITHMS="1 3 4" MPICH_RANKS="2 3"
fi

program=$BUILD/tests/mpi/exactness
[ -x "$program" ] || fail "$program is not built"
for np in $OMPI_RANKS; do
    algorithms=$OMPI_ALGORITHMS
    [ "$np" -gt 1 ] || algorithms=${OMPI_ALGORITHMS%% *}
    for algorithm in $algorithms; do
        tuned=(--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm "$algorithm")
        run_mpi_shim "$np" "${tuned[@]}" "$program" >"$out/shim.openmpi.$np.$algorithm" 2>"$out/err" ||
            fail "Open MPI np=$np algorithm=$algorithm under the shim: $(head -c 2000 "$out/err")"
        run_mpi "$np" "${tuned[@]}" "$program" --native >"$out/native.openmpi.$np.$algorithm" 2>"$out/err" ||
            fail "Open MPI np=$np algorithm=$algorithm natively: $(head -c 2000 "$out/err")"
    done
    compare openmpi "$np" "$(wc -w <<<"$algorithms")"
done

# MPICH: the device's own collectives off, so that the algorithm variable decides.
program=$BUILD/tests/mpich/exactness
[ -x "$program" ] || fail "$program is not built"
for np in $MPICH_RANKS; do
    for algorithm in recursive_doubling reduce_scatter_allgather nb smp; do
        chosen=(-env MPIR_CVAR_DEVICE_COLLECTIVES none -env MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM "$algorithm")
        run_mpich_shim "$np" "${chosen[@]}" "$program" >"$out/shim.mpich.$np.$algorithm" 2>"$out/err" ||
            fail "MPICH np=$np $algorithm under the shim: $(head -c 2000 "$out/err")"
        run_mpich "$np" "${chosen[@]}" "$program" --native >"$out/native.mpich.$np.$algorithm" 2>"$out/err" ||
            fail "MPICH np=$np $algorithm natively: $(head -c 2000 "$out/err")"
    done
    compare mpich "$np" 4
done
