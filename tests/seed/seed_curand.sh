#!/usr/bin/env bash
# cuRAND's curandSetPseudoRandomGeneratorSeed under the shim (hooks/seeding/curand.c), with libcurand
# loaded RTLD_LOCAL: a host generator seeded with s under the shim gives what it gives without
# the shim seeded with the policy's derivation of s (tests/seed/seed_reference.py,
# docs/seeding.md's formula, computed without the shim). On the host-only stand-in, and on
# the real libcurand (its host generator needs no GPU) when CUDA's is installed.
. tests/lib.sh

unset RANK OMPI_COMM_WORLD_RANK PMI_RANK PMIX_RANK SLURM_PROCID
PROGS=$BUILD/tests/progs
for program in seed_curand; do
    [ -x "$PROGS/$program" ] || fail "$PROGS/$program is not built"
done

libraries=("$BUILD/tests/standins/libcurand.so")
[ -f "${libraries[0]}" ] || fail "${libraries[0]} is not built"
for real in "${CUDA_HOME:-/usr/local/cuda}/lib64/libcurand.so" /usr/lib/x86_64-linux-gnu/libcurand.so; do
    if [ -f "$real" ]; then
        libraries+=("$real")
        break
    fi
done
[ ${#libraries[@]} -gt 1 ] || skip_part "the real libcurand: none found; the stand-in only"

SEED=42
for library in "${libraries[@]}"; do
    name=$library
    case $library in */standins/*) name="the libcurand stand-in" ;; esac
    plain=$("$PROGS/seed_curand" "$library" $SEED) || fail "$name: seed_curand failed"
    for policy in hash rank; do
        got=$(RANK=2 REPROD_SEED_POLICY=$policy REPROD_VERBOSE=2 LD_PRELOAD="$PRELOAD" \
            "$PROGS/seed_curand" "$library" $SEED 2>"$BUILD/seed_curand.log") ||
            fail "$name: seed_curand failed under the shim: $(cat "$BUILD/seed_curand.log")"
        derived=$(derive $policy 2 64 $SEED)
        expected=$("$PROGS/seed_curand" "$library" "$derived")
        [ "$got" = "$expected" ] ||
            fail "$name, policy $policy: '$got' under the shim, '$expected' seeded with $derived"
        [ "$got" != "$plain" ] || fail "$name, policy $policy: the seed was not replaced"
        grep -qF "seed: curandSetPseudoRandomGeneratorSeed $SEED -> $derived (policy $policy, rank 2 from RANK)" \
            "$BUILD/seed_curand.log" || fail "$name: no log line: $(cat "$BUILD/seed_curand.log")"
    done
    off=$(REPROD_SEED_POLICY=off LD_PRELOAD="$PRELOAD" "$PROGS/seed_curand" "$library" $SEED)
    [ "$off" = "$plain" ] || fail "$name: REPROD_SEED_POLICY=off changed the generator"
    ok "$name: seeded as the reference derivation says (hash, rank), unchanged under off"
done
rm -f "$BUILD/seed_curand.log"
