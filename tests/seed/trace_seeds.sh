#!/usr/bin/env bash
# Seeding calls in traces: each intercepted seeding call is a trace line (api, seed in, seed
# out) in the same sequence as the reductions, and `reprod diff` of two runs seeded
# differently names the seeding call, before the first reduction that differs.
. tests/lib.sh

job=$BUILD/tests/mpi/seeded_job
[ -x "$job" ] || fail "$job is not built"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
traced() { # traced NAME NP SEED [mpirun arguments]
    local name=$1 np=$2 seed=$3
    shift 3
    run_mpi_shim "$np" -x REPROD_TRACE="$dir/$name" "$@" "$job" "$seed" >/dev/null 2>"$dir/err" ||
        fail "run $name failed: $(cat "$dir/err")"
}
traced a 2 42
traced b 2 42
traced c 2 43
line=$(grep -m1 'action=seed' "$dir/a/rank1.trace") || fail "no seeding line: $(cat "$dir/a/rank1.trace")"
# seed 42 = 0x2a passed; the one srand got is its 32-bit derivation under policy hash, as the
# reference (tests/seed/seed_reference.py, docs/seeding.md's formula) computes it without the shim.
expected=$(printf '%016x' "$(derive hash 1 32 42)")
grep -q "^seq=1 api=srand action=seed detail=hash count=0 ranks=[0-9]* in=000000000000002a out=$expected$" <<<"$line" ||
    fail "unexpected seeding line (expected out=$expected): $line"
out=$("$BUILD/reprod" diff "$dir/a" "$dir/b") || fail "two runs with the same seed part: $out"
ok "a seeding call is traced ($line); the same seed twice: $out"

out=$("$BUILD/reprod" diff "$dir/a" "$dir/c")
[ $? -eq 1 ] || fail "diff of runs seeded 42 and 43 exited 0: $out"
grep -q "the runs were seeded differently at call 1 of rank 0 (srand), before any reduction differed" <<<"$out" ||
    fail "diff does not name the seeding call: $out"
grep -q "srand seed 42 -> " <<<"$out" && grep -q "srand seed 43 -> " <<<"$out" || fail "seeds not shown: $out"
grep -q "application's side: it passed different seeds" <<<"$out" || fail "wrong side: $out"
ok "seeds 42 and 43: $(head -1 <<<"$out")"

traced d 2 42 -x REPROD_SEED_POLICY=rank
out=$("$BUILD/reprod" diff "$dir/a" "$dir/d")
grep -q "the same seed, derived differently" <<<"$out" || fail "policy hash vs rank not told apart: $out"
traced e 4 43
out=$("$BUILD/reprod" diff "$dir/a" "$dir/e")
grep -q "seeded differently at call 1 of rank 0" <<<"$out" || fail "2 vs 4 ranks with other seeds: $out"
ok "another policy, and another world size with another seed, are named too"
