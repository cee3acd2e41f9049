#!/usr/bin/env bash
# libc's seeding calls under the shim (hooks/seeding/rng.c): for every API and policy, a run under the
# shim seeded with s prints what a run without it prints when seeded with the policy's
# derivation of s, as tests/seed/seed_reference.py computes it from docs/seeding.md's formula
# without the shim; the exported reprod_seed_derive* (what a user calls to reproduce a run
# without the shim) give the same values; the rank comes from each launcher's variable, does not
# depend on the world size, and is 0 (said in the log) while unknown; unseeded generators and
# the policy off are untouched; each call is logged at REPROD_VERBOSE=2; a state that seed48
# handed back and the caller passes back restores the generator instead of being derived again.
. tests/lib.sh

unset RANK OMPI_COMM_WORLD_RANK PMI_RANK PMIX_RANK SLURM_PROCID \
    WORLD_SIZE OMPI_COMM_WORLD_SIZE PMI_SIZE SLURM_NTASKS
PROGS=$BUILD/tests/progs
for program in seed_libc seed_derive; do
    [ -x "$PROGS/$program" ] || fail "$PROGS/$program is not built"
done
[ -f "$SHIM" ] || fail "$SHIM is not built"

S32=42
S48=1234567 # the X of seed48 and lcong48
APIS="srand srandom initstate srand48 seed48 lcong48 initstate_r srandom_r srand48_r seed48_r
lcong48_r"

shimmed() { env LD_PRELOAD="$PRELOAD" "$@"; }

# What a run without the shim prints when seeded as the shim would seed on RANK under POLICY.
expected_for() { # POLICY RANK
    "$PROGS/seed_libc" "$(derive "$1" "$2" 32 $S32)" "$(derive "$1" "$2" 48 $S48)"
}

# The seed in -> the policy's seed out, for every API, on two ranks, for every policy.
for policy in hash rank shared off; do
    for rank in 0 3; do
        got=$(RANK=$rank REPROD_SEED_POLICY=$policy shimmed "$PROGS/seed_libc" $S32 $S48) ||
            fail "seed_libc failed under the shim (policy $policy, rank $rank)"
        expected=$(expected_for $policy $rank)
        [ "$got" = "$expected" ] ||
            fail "policy $policy, rank $rank: the generators differ from seeding with" \
                "the reference derivation: $(diff <(echo "$expected") <(echo "$got"))"
        lines=$(echo "$got" | wc -l)
        [ "$lines" -eq 11 ] || fail "expected 11 APIs, got $lines lines"
    done
done
ok "every API and policy: the run under the shim equals seeding with the reference derivation"

# The public API, taken from the shim by dlopen as a user would: the reference's values.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
SEEDS="0 42 43 0xFFFFFFFF 0x0123456789ABCDEF 18446744073709551615"
for policy in hash rank shared off; do
    for rank in 0 1 3 1073741824; do
        for width in 64 48 32; do
            for seed in $SEEDS; do echo "$policy $rank $width $seed"; done
        done
    done
done >"$work/grid"
for policy in hash rank shared off; do
    for rank in 0 1 3 1073741824; do
        for width in 64 48 32; do # the grid's order
            with_sanitizer_runtime "$PROGS/seed_derive" "$SHIM" $policy $rank $width $SEEDS
        done
    done
done >"$work/api"
# Compared as strings: awk would compare 64-bit numbers as doubles.
derive - <"$work/grid" | paste -d ' ' "$work/grid" - "$work/api" | awk '($5 "") != ($6 "") {
    print "policy " $1 ", rank " $2 ", " $3 " bits, seed " $4 ": reference " $5 ", API " $6 }' >"$work/differ"
[ -s "$work/differ" ] && fail "the exported derivations differ: $(cat "$work/differ")"
[ "$(wc -l <"$work/api")" -eq 288 ] || fail "seed_derive printed $(wc -l <"$work/api") lines"
ok "reprod_seed_derive, reprod_seed_derive48, reprod_seed_derive32: the reference's values"

# The hook acts: under hash, no API gives what the caller's own seed gives.
plain=$("$PROGS/seed_libc" $S32 $S48)
hashed=$(shimmed "$PROGS/seed_libc" $S32 $S48)
same=$(comm -12 <(echo "$plain" | sort) <(echo "$hashed" | sort))
[ -z "$same" ] || fail "these APIs were not re-seeded under the shim: $same"
off=$(REPROD_SEED_POLICY=off shimmed "$PROGS/seed_libc" $S32 $S48)
[ "$off" = "$plain" ] || fail "REPROD_SEED_POLICY=off changed a generator"
modeoff=$(REPROD_MODE=off shimmed "$PROGS/seed_libc" $S32 $S48)
[ "$modeoff" = "$plain" ] || fail "REPROD_MODE=off (the shim changes nothing) changed a generator"
ok "every API is re-seeded under hash; off and REPROD_MODE=off leave them alone"

# Never seeded: libc's default state, as without the shim.
[ "$(shimmed "$PROGS/seed_libc" --unseeded)" = "$("$PROGS/seed_libc" --unseeded)" ] ||
    fail "rand/random/drand48 without a seeding call changed under the shim"
ok "generators that are never seeded are unchanged"

# seed48 hands back the X it replaces (seed48_r leaves it in __old_x): passed back to seed48,
# seed48_r or lcong48 later, it restores the generator, under every policy, and the log says
# why it went through unchanged.
restored=$("$PROGS/seed_libc" --restore $S32 $S48)
[ "$(echo "$restored" | grep -c ': continues$')" -eq 4 ] ||
    fail "without the shim, passing seed48's X back does not restore: $restored"
for policy in hash rank shared; do
    got=$(RANK=3 REPROD_SEED_POLICY=$policy shimmed "$PROGS/seed_libc" --restore $S32 $S48)
    [ "$got" = "$restored" ] ||
        fail "policy $policy: a state seed48 handed back is derived again when passed back:" \
            "$(diff <(echo "$restored") <(echo "$got"))"
done
log=$(REPROD_VERBOSE=2 shimmed "$PROGS/seed_libc" --restore $S32 $S48 2>&1 >/dev/null)
for api in seed48 seed48_r lcong48; do
    echo "$log" | grep -qE "^reprod\[0\]: seed: $api ([0-9]+) -> \1 \(policy hash, rank 0: no rank known yet, 0 assumed, unchanged: the shim produced or handed out this seed earlier\)$" ||
        fail "no log line for $api restoring a state seed48 handed back: $log"
done
ok "a state seed48 or seed48_r handed back restores the generator when passed back, logged"

# One log line per call at REPROD_VERBOSE=2: API, seed in, seed out, policy and rank.
log=$(RANK=3 REPROD_SEED_POLICY=rank REPROD_VERBOSE=2 shimmed "$PROGS/seed_libc" $S32 $S48 2>&1 >/dev/null)
out32=$(derive rank 3 32 $S32)
out48=$(derive rank 3 48 $S48)
for api in $APIS; do
    case $api in
    seed48* | lcong48*) want="reprod[3]: seed: $api $S48 -> $out48 (policy rank, rank 3 from RANK)" ;;
    *) want="reprod[3]: seed: $api $S32 -> $out32 (policy rank, rank 3 from RANK)" ;;
    esac
    echo "$log" | grep -qxF "$want" || fail "no log line '$want' in: $log"
done
[ "$(echo "$log" | grep -c ": seed: ")" -eq 11 ] || fail "expected 11 seed log lines, got: $log"
echo "$log" | grep -q "^reprod\[3\]: summary: .* 11 seeding calls" || fail "no summary counting the 11 seeding calls: $log"
[ -z "$(RANK=3 shimmed "$PROGS/seed_libc" $S32 $S48 2>&1 >/dev/null)" ] ||
    fail "seeding calls write to stderr at REPROD_VERBOSE=0"
ok "each seeding call is logged at REPROD_VERBOSE=2 with the API, the seeds and the rank"

# The rank from each launcher's variable.
for variable in RANK OMPI_COMM_WORLD_RANK PMI_RANK PMIX_RANK SLURM_PROCID; do
    got=$(env "$variable=5" REPROD_SEED_POLICY=rank REPROD_VERBOSE=2 \
        LD_PRELOAD="$PRELOAD" "$PROGS/seed_libc" $S32 $S48 2>/tmp/reprod_seed_log.$$)
    log=$(cat /tmp/reprod_seed_log.$$)
    rm -f /tmp/reprod_seed_log.$$
    [ "$got" = "$(expected_for rank 5)" ] || fail "$variable=5: not seeded as rank 5"
    echo "$log" | grep -q "rank 5 from $variable)" || fail "$variable=5: log says: $log"
done
ok "the rank is read from RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK and SLURM_PROCID"

# A rank's seeds do not depend on the world size.
small=$(RANK=1 WORLD_SIZE=2 REPROD_SEED_POLICY=rank shimmed "$PROGS/seed_libc" $S32 $S48)
large=$(RANK=1 WORLD_SIZE=64 REPROD_SEED_POLICY=rank shimmed "$PROGS/seed_libc" $S32 $S48)
[ "$small" = "$large" ] || fail "rank 1 is seeded differently in world sizes 2 and 64"
ok "a rank's seeds are the same in every world size"

# No rank known: rank 0, and the log says so.
log=$(REPROD_SEED_POLICY=rank REPROD_VERBOSE=2 shimmed "$PROGS/seed_libc" $S32 $S48 2>&1 >/dev/null)
want="reprod[0]: seed: srand $S32 -> $(derive rank 0 32 $S32) (policy rank, rank 0: no rank known yet, 0 assumed)"
echo "$log" | grep -qxF "$want" ||
    fail "without a launcher variable the log does not say rank 0 was assumed: $log"
ok "a seeding call before any rank is known uses rank 0 and says so"

# The policies across 4 ranks: hash keeps a shared seed shared, rank separates base + rank,
# shared joins base + rank into one stream.
outputs() { # POLICY SEED_OF_RANK_EXPRESSION: every API's line on ranks 0..3
    for rank in 0 1 2 3; do
        seed=$(($2))
        RANK=$rank REPROD_SEED_POLICY=$1 shimmed "$PROGS/seed_libc" $seed $seed
    done
}
# 11 APIs: 11 distinct lines when all ranks agree, 44 when no two ranks share a stream.
[ "$(outputs hash "S32" | sort -u | wc -l)" -eq 11 ] || fail "hash: a shared seed differs across ranks"
[ "$(outputs rank "S32 + rank" | sort -u | wc -l)" -eq 44 ] || fail "rank: base + rank seeds collide"
[ "$(outputs shared "S32 + rank" | sort -u | wc -l)" -eq 11 ] || fail "shared: base + rank differ"
ok "hash keeps shared seeds shared, rank separates base + rank, shared joins it"
