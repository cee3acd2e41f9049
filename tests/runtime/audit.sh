#!/usr/bin/env bash
# REPROD_MODE=audit: the job keeps the library's native results (the same bits as without the
# shim's reductions), and each rank's audit line reports what the program's own MPFR oracle
# finds: how many calls and elements were off, and by how many ulps at worst. Zero where the
# native sum is exact (two ranks: one rounding; integer-valued data: no rounding at all).
. tests/lib.sh

job=$BUILD/tests/mpi/audit_job
trace_job=$BUILD/tests/mpi/trace_job
[ -x "$job" ] && [ -x "$trace_job" ] || fail "the MPI test programs are not built"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# audited NAME NP [job arguments...]: every rank's oracle line must match its audit line.
audited() {
    local name=$1 np=$2
    shift 2
    run_mpi_shim "$np" -x REPROD_MODE=audit "$job" "$@" >"$dir/$name.out" 2>"$dir/$name.err" ||
        fail "$name: the job failed: $(head -c 2000 "$dir/$name.err")"
    for ((r = 0; r < np; r++)); do
        local oracle audit expected
        oracle=$(grep "^oracle rank=$r " "$dir/$name.out") || fail "$name: no oracle line of rank $r"
        audit=$(grep "^reprod\[$r\]: audit: " "$dir/$name.err") || fail "$name: no audit line of rank $r: $(cat "$dir/$name.err")"
        read -r calls differed elements worst < <(sed 's/.*calls=\([0-9]*\) differed=\([0-9]*\) elements=\([0-9]*\) worst=\([0-9]*\)/\1 \2 \3 \4/' <<<"$oracle")
        expected="audit: $calls calls audited, $differed differed from the exact sum ($elements elements)"
        [ "$differed" -gt 0 ] && expected="$expected; worst $worst ulps, at audited call"
        grep -qF "$expected" <<<"$audit" || fail "$name rank $r: the oracle says '$oracle', the shim '$audit'"
        grep -q "1 not audited" <<<"$audit" || fail "$name rank $r: the nonblocking call is not counted as unaudited: $audit"
    done
    echo "$(grep -c '' "$dir/$name.out") ranks; rank 0: $(grep '^oracle rank=0' "$dir/$name.out")"
}

summary=$(audited np4 4)
grep -q "rank=0 calls=4 differed=0 " "$dir/np4.out" &&
    fail "np=4: natively nothing was off: the test data does not show the problem"
ok "np=4, native sums off, the audit agrees with MPFR: $summary"
summary=$(audited np2 2)
grep -q "differed=0 elements=0 worst=0" "$dir/np2.out" || fail "np=2 should be exact: $(cat "$dir/np2.out")"
ok "np=2 (one rounding, exact natively): nothing found: $summary"
summary=$(audited integers 4 --integers)
grep -q "rank=0 calls=4 differed=0 elements=0 worst=0" "$dir/integers.out" || fail "integer-valued sums were off"
ok "integer-valued data on 4 ranks: nothing found"

# Audit never changes the job's results: the same bits as REPROD_MODE=off, per call and rank,
# under two all-reduce algorithms (whose native results differ from each other).
for algorithm in 1 4; do
    tuned=(--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm "$algorithm")
    for mode in off audit; do
        run_mpi_shim 4 "${tuned[@]}" -x REPROD_MODE=$mode -x REPROD_TRACE="$dir/$mode$algorithm" \
            "$trace_job" >/dev/null 2>"$dir/err" || fail "trace job $mode $algorithm: $(cat "$dir/err")"
    done
    for r in 0 1 2 3; do
        compared=$(paste -d'|' <(grep '^seq=' "$dir/off$algorithm/rank$r.trace" | grep -o ' out=[^ ]*') \
                               <(grep '^seq=' "$dir/audit$algorithm/rank$r.trace" | grep -o ' out=[^ ]*') |
            awk -F'|' '$1 != " out=-" && $2 != " out=-" { if ($1 != $2) bad = 1; n++ } END { print bad ? -1 : n }')
        [ "$compared" -ge 6 ] ||
            fail "algorithm $algorithm rank $r: results under audit differ from native ($compared): $(paste "$dir/off$algorithm/rank$r.trace" "$dir/audit$algorithm/rank$r.trace" | head -4)"
    done
done
grep -q "action=audit detail=float64 count=5000 ranks=4 in=[0-9a-f]\{16\} out=[0-9a-f]\{16\} differ=[0-9]* ulps=[0-9]*$" \
    "$dir/audit1/rank0.trace" || fail "no audit fields in the trace: $(head -3 "$dir/audit1/rank0.trace")"
out=$("$BUILD/reprod" diff "$dir/audit1" "$dir/audit4")
[ $? -eq 1 ] || fail "diff of two audited runs under two algorithms: $out"
grep -q "(REPROD_MODE=audit), which depends on its algorithm" <<<"$out" || fail "diff does not say the results were native: $out"
ok "audit returns the native bits (= REPROD_MODE=off, two algorithms); traces carry differ= ulps=; diff reads them"
