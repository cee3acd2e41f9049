#!/usr/bin/env bash
# REPROD_TRACE and `reprod diff`: two identical runs agree; a run whose data differs on one
# rank parts at that call, on the application's side; runs without the shim's reductions
# (REPROD_MODE=off) under two algorithms part on the reduction's side, with the same inputs.
. tests/lib.sh

job=$BUILD/tests/mpi/trace_job
reprod=$BUILD/reprod
[ -x "$job" ] || fail "$job is not built"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

traced() { # traced NAME NP [mpirun arguments...]
    local name=$1 np=$2
    shift 2
    run_mpi_shim "$np" -x REPROD_TRACE="$dir/$name" "$@" "$job" >/dev/null 2>"$dir/err" ||
        fail "run $name failed: $(cat "$dir/err")"
}

traced a 4
traced b 4 --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4
for r in 0 1 2 3; do
    [ -s "$dir/a/rank$r.trace" ] || fail "no trace for rank $r: $(ls "$dir/a")"
done
lines=$(grep -c '^seq=' "$dir/a/rank0.trace")
[ "$lines" -eq 9 ] || fail "rank 0 traced $lines calls, expected 9: $(cat "$dir/a/rank0.trace")"
grep -q 'api=MPI_Allreduce action=exact detail=float64 count=5000 ranks=4 in=[0-9a-f]\{16\} out=[0-9a-f]\{16\}' \
    "$dir/a/rank0.trace" || fail "unexpected trace line: $(sed -n 2p "$dir/a/rank0.trace")"
grep -q 'action=pass detail=non-float' "$dir/a/rank0.trace" || fail "the integer sum is not traced as a pass"
grep -q 'api=MPI_Iallreduce action=exact' "$dir/a/rank0.trace" || fail "the nonblocking call is not traced"
out=$("$reprod" diff "$dir/a" "$dir/b") || fail "two runs of the same job part: $out"
grep -q "the traces agree: 9 calls on 4 ranks" <<<"$out" || fail "unexpected: $out"
ok "two runs (two all-reduce algorithms) agree: $out"

traced c 4 -x PERTURB_CALL=3 -x PERTURB_RANK=2
out=$("$reprod" diff "$dir/a" "$dir/c")
status=$?
[ "$status" -eq 1 ] || fail "diff of runs with different data exited $status: $out"
grep -q "part at call 4 (MPI_Allreduce float64 x 5000)" <<<"$out" || fail "wrong call: $out"
grep -q "contributions differ on rank 2$" <<<"$out" || fail "wrong rank: $out"
grep -q "application's side" <<<"$out" || fail "wrong side: $out"
ok "different data on rank 2 at step 3: $(head -2 <<<"$out" | tr '\n' ' ')"

# Without the shim's reductions, the same inputs give different sums under two algorithms.
traced off1 4 -x REPROD_MODE=off --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 1
traced off4 4 -x REPROD_MODE=off --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4
out=$("$reprod" diff "$dir/off1" "$dir/off4")
status=$?
[ "$status" -eq 1 ] || fail "native sums under two algorithms agreed (exit $status): $out"
grep -q "every rank brought the same contributions" <<<"$out" || fail "wrong diagnosis: $out"
grep -q "reduction's side: the call passed through unchanged (mode-off)" <<<"$out" || fail "wrong side: $out"
ok "REPROD_MODE=off under two algorithms: $(head -1 <<<"$out")"

# Another world size: the results are compared (the inputs are other parts of the data).
traced two 2
out=$("$reprod" diff "$dir/a" "$dir/two")
grep -q "world sizes differ (4 and 2 ranks)" <<<"$out" || fail "world sizes not noticed: $out"
grep -q "the results part at call 1" <<<"$out" || fail "different data on 2 ranks not seen: $out"
ok "4 vs 2 ranks: $(tail -n +2 <<<"$out" | head -1)"

"$reprod" diff "$dir/a" "$dir/nothing" 2>/dev/null
[ $? -eq 2 ] || fail "diff of a missing directory did not exit 2"
ok "a missing trace directory is an error (status 2)"

# What is not two runs' traces is never found to agree: a file (a trace or any other), a
# directory whose rank0.trace is some other file; traces without a call say so.
out=$("$reprod" diff "$dir/a/rank0.trace" "$dir/a/rank0.trace" 2>&1)
[ $? -eq 2 ] && grep -q "is a file, not a run's trace directory" <<<"$out" || fail "diff of two files: $out"
mkdir "$dir/other" "$dir/empty"
cp /etc/passwd "$dir/other/rank0.trace"
out=$("$reprod" diff "$dir/other" "$dir/other" 2>&1)
[ $? -eq 2 ] && grep -q "line 1 is not the first line of a trace" <<<"$out" || fail "diff of /etc/passwd: $out"
head -1 "$dir/a/rank0.trace" >"$dir/empty/rank0.trace"
out=$("$reprod" diff "$dir/empty" "$dir/empty" 2>&1)
grep -q "hold no call" <<<"$out" || fail "diff of traces without a call: $out"
ok "diff of a file, of a directory of other files: an error (2), never \"the traces agree\"; of empty traces: said"

# Trace files are created, never reused: an existing trace is not overwritten (the rank warns,
# naming it, and traces nothing), a symbolic link in its place is not followed, and a trace
# directory that is a symbolic link, is another user's or is writable by others is refused
# (links and other users' directories above it: tests/runtime/hostile_files.sh).
traced_warns() { # traced_warns NAME WHAT: a 2-rank traced run whose stderr must warn of WHAT
    local name=$1 what=$2
    run_mpi_shim 2 -x REPROD_TRACE="$dir/$name" "$job" >/dev/null 2>"$dir/err" ||
        fail "run $name failed: $(cat "$dir/err")"
    grep -q "warning: REPROD_TRACE: .*$what" "$dir/err" || fail "$name: no warning of '$what': $(cat "$dir/err")"
}
mkdir -m 755 "$dir/reused"
echo "an earlier trace" >"$dir/reused/rank0.trace"
traced_warns reused "$dir/reused/rank0.trace exists and traces are never overwritten: remove it or use a new directory"
[ "$(cat "$dir/reused/rank0.trace")" = "an earlier trace" ] || fail "an existing trace was overwritten"
[ "$(grep -c '^seq=' "$dir/reused/rank1.trace")" -eq 9 ] || fail "rank 1 did not trace beside rank 0's old file"
ok "an existing trace is kept, with a warning; the other rank traces"

mkdir -m 755 "$dir/linked"
echo "not a trace" >"$dir/victim"
ln -s "$dir/victim" "$dir/linked/rank0.trace"
traced_warns linked "exists and traces are never overwritten"
[ "$(cat "$dir/victim")" = "not a trace" ] || fail "the trace followed a symbolic link: $(head -2 "$dir/victim")"
ok "a symbolic link where a trace goes is not followed"

mkdir -m 755 "$dir/real"
ln -s "$dir/real" "$dir/dirlink"
traced_warns dirlink "cannot use the directory $dir/dirlink: $dir/dirlink is a symbolic link"
[ -z "$(ls "$dir/real")" ] || fail "traces were written through a symbolic link: $(ls "$dir/real")"
mkdir -m 777 "$dir/open"
traced_warns open "is not yours or is writable by others"
[ -z "$(ls "$dir/open")" ] || fail "traces were written in a directory writable by others"
ok "a trace directory that is a symbolic link or writable by others is refused"
if [ "$(id -u)" != 0 ]; then
    skip_part "another user's trace directory: not root, so none can be made"
else
    mkdir -m 755 "$dir/theirs"
    chown nobody "$dir/theirs"
    traced_warns theirs "$dir/theirs is another user's directory"
    [ -z "$(ls "$dir/theirs")" ] || fail "traces were written in another user's directory"
    ok "another user's trace directory is refused"
fi
