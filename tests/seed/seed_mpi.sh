#!/usr/bin/env bash
# Seeding under mpirun: each rank is seeded as the reference derivation (tests/seed/seed_reference.py,
# docs/seeding.md's formula) says for its rank (from the
# launcher's variable before MPI_Init, from MPI after it), rank r's seeds are the same in
# worlds of 2 and 3 ranks, and a process without a launcher learns its rank from MPI_Init.
. tests/lib.sh

unset RANK OMPI_COMM_WORLD_RANK PMI_RANK PMIX_RANK SLURM_PROCID \
    WORLD_SIZE OMPI_COMM_WORLD_SIZE PMI_SIZE SLURM_NTASKS
PROGS=$BUILD/tests/progs
AFTER_INIT=$BUILD/tests/mpi/seed_after_init
for program in "$PROGS/seed_libc" "$AFTER_INIT"; do
    [ -x "$program" ] || fail "$program is not built"
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Every rank writes its generators' output to $work/NAME.RANK (the launcher's variable names
# the file, the shim reads the same variable).
run_ranks() { # NP NAME POLICY SEED_EXPRESSION
    local np=$1 name=$2 policy=$3 expression=$4
    run_mpi_shim "$np" -x REPROD_SEED_POLICY="$policy" sh -c \
        'seed=$(('"$expression"')); "$0" $seed $seed > "$1/$2.$OMPI_COMM_WORLD_RANK"' \
        "$PROGS/seed_libc" "$work" "$name" || fail "mpirun -np $np failed ($name)"
}

run_ranks 2 rank2 rank "42 + OMPI_COMM_WORLD_RANK"
for rank in 0 1; do
    seed=$((42 + rank))
    expected=$("$PROGS/seed_libc" "$(derive rank $rank 32 $seed)" "$(derive rank $rank 48 $seed)")
    [ "$(cat "$work/rank2.$rank")" = "$expected" ] ||
        fail "mpirun rank $rank: not seeded as the reference derives (42 + $rank, $rank, rank)"
done
shared_lines=$(comm -12 <(sort "$work/rank2.0") <(sort "$work/rank2.1"))
[ -z "$shared_lines" ] || fail "policy rank: ranks 0 and 1 share these streams: $shared_lines"
ok "mpirun -np 2, policy rank: each rank seeded as the reference says, streams distinct"

run_ranks 3 rank3 rank "42 + OMPI_COMM_WORLD_RANK"
for rank in 0 1; do
    cmp -s "$work/rank2.$rank" "$work/rank3.$rank" ||
        fail "rank $rank is seeded differently with 2 and with 3 ranks"
done
ok "a rank's seeds are the same with 2 and 3 ranks"

run_ranks 2 hash hash 42
cmp -s "$work/hash.0" "$work/hash.1" || fail "policy hash: a shared seed differs across ranks"
run_ranks 2 shared shared "42 + OMPI_COMM_WORLD_RANK"
cmp -s "$work/shared.0" "$work/shared.1" || fail "policy shared: base + rank differs across ranks"
ok "hash keeps a shared seed shared across ranks, shared joins base + rank"

# An MPI program seeding before and after MPI_Init. Without a launcher (singleton MPI_Init)
# the rank is unknown before MPI_Init, then comes from MPI.
export REPROD_SEED_POLICY=rank
expected=$(derive rank 0 32 42)
log=$(REPROD_VERBOSE=2 LD_PRELOAD=$PRELOAD bounded 60 "$AFTER_INIT" 42 2>&1 >"$work/singleton")
echo "$log" | grep -q "seed: srand 42 -> $expected (policy rank, rank 0: no rank known yet, 0 assumed)" ||
    fail "before MPI_Init without a launcher, the log does not say rank 0 was assumed: $log"
echo "$log" | grep -q "seed: srand 42 -> $expected (policy rank, rank 0 from the library)" ||
    fail "after MPI_Init, the rank does not come from MPI: $log"
ok "without a launcher: rank 0 assumed before MPI_Init, the rank from MPI after"

log=$(REPROD_VERBOSE=2 run_mpi_shim 2 -x REPROD_SEED_POLICY -x REPROD_VERBOSE "$AFTER_INIT" 42 2>&1)
for rank in 0 1; do
    derived=$(derive rank $rank 32 42)
    prefix="reprod[$rank]: seed: srand 42 -> $derived (policy rank, rank $rank"
    echo "$log" | grep -qxF "$prefix from OMPI_COMM_WORLD_RANK)" ||
        fail "mpirun rank $rank before MPI_Init: $log"
    echo "$log" | grep -qxF "$prefix from the library)" || fail "mpirun rank $rank after MPI_Init: $log"
    line=$(echo "$log" | grep "^rank $rank: ")
    value=$(echo "$line" | sed 's/.*before MPI_Init \([0-9]*\), after \([0-9]*\)/\1 \2/')
    want=$("$PROGS/seed_libc" "$derived" 0 | sed -n 's/^srand: \([0-9]*\) .*/\1/p')
    [ "$value" = "$want $want" ] || fail "mpirun rank $rank: rand() gave '$line', expected $want"
done
ok "mpirun -np 2: the rank from OMPI_COMM_WORLD_RANK before MPI_Init, from MPI after"
