#!/usr/bin/env bash
# PyTorch's generators under the shim (hooks/seeding/torch.c). torch.manual_seed(s) and
# torch.Generator().manual_seed(s): torch.rand is the same over two runs, and equal to a run
# WITHOUT the shim seeded with the policy's derivation of s (tests/seed/seed_reference.py,
# docs/seeding.md's formula, computed without the shim): proof that the preloaded
# at::CPUGeneratorImpl::set_current_seed takes the vtable slot of the RTLD_LOCAL libtorch_cpu.
# Seeding again with the seed a generator reports (torch.manual_seed(torch.initial_seed()))
# keeps its stream: the shim does not derive its own seed a second time.
# CUDA generators, on a stand-in with PyTorch's symbols and vtable: manual_seed is derived;
# manual_seed(initial_seed()), clone, set_rng_state and a new generator's default seed are not.
. tests/lib.sh

unset RANK OMPI_COMM_WORLD_RANK PMI_RANK PMIX_RANK SLURM_PROCID
PROGS=$BUILD/tests/progs
STANDIN=$BUILD/tests/standins/libtorchcuda.so
for program in "$PROGS/seed_torch_standin" "$STANDIN"; do
    [ -e "$program" ] || fail "$program is not built"
done

# CUDA generator semantics, on the stand-in (no GPU needed).
SEED=42
STATE_SEED=777
RECORDED="unchanged: the shim produced or handed out this seed earlier"
standin_steps() { # SEED AFTER_MANUAL_SEED STATE_SEED: what the stand-in should print
    printf 'created: 67280421310721\nmanual_seed: %s\nmanual_seed(initial_seed): %s\n' "$2" "$2"
    printf 'clone: %s\nset_rng_state: %s\nclone after set_rng_state: %s' "$2" "$3" "$3"
}
plain=$("$PROGS/seed_torch_standin" "$STANDIN" $SEED $STATE_SEED)
[ "$plain" = "$(standin_steps $SEED $SEED $STATE_SEED)" ] ||
    fail "the stand-in misbehaves without the shim: $plain"
got=$(REPROD_VERBOSE=2 LD_PRELOAD=$PRELOAD "$PROGS/seed_torch_standin" "$STANDIN" $SEED $STATE_SEED 2>"$BUILD/seed_torch.log")
log=$(cat "$BUILD/seed_torch.log")
rm -f "$BUILD/seed_torch.log"
derived=$(derive hash 0 64 $SEED)
expected=$(standin_steps $SEED "$derived" $STATE_SEED)
[ "$got" = "$expected" ] ||
    fail "CUDA generator stand-in under the shim: $(diff <(echo "$expected") <(echo "$got"))"
echo "$log" | grep -qF "at::CUDAGeneratorImpl::set_current_seed $SEED -> $derived (policy hash" ||
    fail "no log line for the CUDA generator's manual_seed: $log"
echo "$log" | grep -qF "set_current_seed $derived -> $derived (policy hash, rank 0: no rank known yet, 0 assumed, $RECORDED)" ||
    fail "manual_seed(initial_seed()) is not logged as the shim's own seed: $log"
echo "$log" | grep -qF "set_current_seed $STATE_SEED -> $STATE_SEED (unchanged: restoring a saved state" ||
    fail "set_rng_state's seed is not logged as unchanged: $log"
echo "$log" | grep -qF "set_current_seed $STATE_SEED -> $STATE_SEED (unchanged: copying a generator (CUDAGeneratorImpl::clone_impl))" ||
    fail "clone's seed is not logged as unchanged: $log"
ok "CUDA generator (stand-in): manual_seed derived; manual_seed(initial_seed()), clone," \
    "set_rng_state and the default seed unchanged"

if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
    skip "the PyTorch part: $PYTHON has no torch"
fi

# For each seed: torch.rand after torch.manual_seed(s), then after
# torch.Generator().manual_seed(s); whether seeding again with the seed a generator reports
# (torch.manual_seed(torch.initial_seed()), and a second Generator seeded with the first's
# initial_seed()) replays the same stream; and whether a CPU state saved and restored under the
# shim replays (set_state is not a seeding call), also through torch.random.fork_rng. One
# process per environment: importing torch is the slow part.
read -r -d '' PROGRAM <<'EOF'
import sys, torch
for seed in map(int, sys.argv[1:]):
    torch.manual_seed(seed)
    first = torch.rand(4).tolist()
    print("manual_seed", torch.initial_seed(), first)
    torch.manual_seed(torch.initial_seed())
    print("manual_seed(initial_seed()) replays", torch.rand(4).tolist() == first,
          torch.initial_seed())
    generator = torch.Generator()
    generator.manual_seed(seed)
    first = torch.rand(4, generator=generator).tolist()
    print("Generator", generator.initial_seed(), first)
    again = torch.Generator()
    again.manual_seed(generator.initial_seed())
    print("Generator seeded with initial_seed() replays",
          torch.rand(4, generator=again).tolist() == first, again.initial_seed())
    state = torch.get_rng_state()
    first = torch.rand(4).tolist()
    torch.set_rng_state(state)
    print("set_rng_state replays", torch.rand(4).tolist() == first)
    torch.set_rng_state(state)
    with torch.random.fork_rng():
        torch.manual_seed(seed + 1)
        torch.rand(4)
    print("fork_rng restores", torch.rand(4).tolist() == first)
EOF
LINES_PER_SEED=6

run_torch() { "$PYTHON" -c "$PROGRAM" "$@"; }

hash_seed=$(derive hash 0 64 $SEED)
rank_seed=$(derive rank 3 64 $SEED)
[ "$hash_seed" != $SEED ] && [ "$rank_seed" != $SEED ] || fail "derivation left $SEED unchanged"
without=$(run_torch "$hash_seed" "$rank_seed") || fail "python with torch failed"
without_hash=$(echo "$without" | head -$LINES_PER_SEED)
without_rank=$(echo "$without" | tail -$LINES_PER_SEED)
echo "$without_hash" | grep -q "^manual_seed $hash_seed " || fail "unexpected output: $without"

first=$(LD_PRELOAD=$PRELOAD run_torch $SEED) || fail "python with torch failed under the shim"
second=$(LD_PRELOAD=$PRELOAD run_torch $SEED)
[ "$first" = "$second" ] || fail "two runs under the shim differ: '$first' vs '$second'"
for check in "set_rng_state replays" "fork_rng restores"; do
    echo "$first" | grep -qx "$check True" || fail "$check: $first"
done
for check in "manual_seed(initial_seed()) replays" "Generator seeded with initial_seed() replays"; do
    echo "$first" | grep -qxF "$check True $hash_seed" ||
        fail "$check: not the stream of the first seeding, or not seed $hash_seed: $first"
done
[ "$first" = "$without_hash" ] ||
    fail "torch.manual_seed($SEED) under the shim is not torch.manual_seed($hash_seed =" \
        "the reference derivation of $SEED, rank 0, hash) without it: '$first' vs '$without_hash'"
ok "torch.manual_seed and Generator.manual_seed: repeat, and equal seeding with the reference derivation"
ok "torch.manual_seed(torch.initial_seed()) keeps the stream; get/set_rng_state and fork_rng replay"

got=$(RANK=3 REPROD_SEED_POLICY=rank REPROD_VERBOSE=2 LD_PRELOAD=$PRELOAD run_torch $SEED 2>"$BUILD/seed_torch.log")
log=$(cat "$BUILD/seed_torch.log")
rm -f "$BUILD/seed_torch.log"
[ "$got" = "$without_rank" ] ||
    fail "policy rank on rank 3: not seeded with $rank_seed: '$got' vs '$without_rank'"
want="seed: at::CPUGeneratorImpl::set_current_seed $SEED -> $rank_seed (policy rank, rank 3 from RANK)"
[ "$(echo "$log" | grep -cF "$want")" -eq 2 ] ||
    fail "expected two log lines '$want' for the two manual_seed calls: $log"
want="seed: at::CPUGeneratorImpl::set_current_seed $rank_seed -> $rank_seed (policy rank, rank 3 from RANK, $RECORDED)"
[ "$(echo "$log" | grep -cF "$want")" -eq 2 ] ||
    fail "expected two log lines '$want' for the two seedings with initial_seed(): $log"
ok "policy rank on rank 3: seeded with the reference derivation ($SEED, 3, rank), each call logged"
