#!/usr/bin/env bash
# The same contributions on 1 to 8 ranks, in several rotations, under each of Open MPI's
# all-reduce algorithms: under the shim one result, identical on every rank and equal to the
# MPFR oracle (tests/mpi/exactness.c checks that in each run; here we check across runs);
# natively, the results differ.
. tests/lib.sh

program=$BUILD/tests/mpi/exactness
[ -x "$program" ] || fail "$program is not built"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

for np in 1 2 3 4 5 6 7 8; do
    for algorithm in 1 2 3 4 5 6; do
        tuned=(--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm "$algorithm")
        run_mpi_shim "$np" "${tuned[@]}" "$program" >"$out/shim.$np.$algorithm" 2>"$out/err" ||
            fail "np=$np algorithm=$algorithm under the shim: $(head -c 2000 "$out/err")"
        run_mpi "$np" "${tuned[@]}" "$program" --native >"$out/native.$np.$algorithm" 2>"$out/err" ||
            fail "np=$np algorithm=$algorithm natively: $(head -c 2000 "$out/err")"
    done
    # Under the shim: every algorithm gave the same result for every case.
    cut -d' ' -f1-5 "$out"/shim.$np.* | sort -u >"$out/shim.$np.cases"
    cases=$(wc -l <"$out/shim.$np.1")
    [ "$(wc -l <"$out/shim.$np.cases")" -eq "$cases" ] ||
        fail "np=$np: results differ between algorithms under the shim: $(sort "$out/shim.$np.cases" | head -20)"
    # Natively: with 3 or more ranks some case must differ between rotations or algorithms
    # (with 1 or 2 ranks a sum has only one order up to commutativity).
    native_distinct=$(cat "$out"/native.$np.* | cut -d' ' -f1-5 | sort -u | wc -l)
    rotation_distinct=$(awk '$6 > 1' "$out"/native.$np.* | wc -l)
    if [ "$np" -ge 3 ] && [ "$native_distinct" -eq "$cases" ] && [ "$rotation_distinct" -eq 0 ]; then
        fail "np=$np: natively all rotations and algorithms agreed: the test data does not show the problem"
    fi
    ok "np=$np: $cases cases, one result each under the shim for 6 algorithms x 4 rotations;" \
        "natively $((native_distinct - cases)) extra results across algorithms, $rotation_distinct cases varying with rotation"
done
