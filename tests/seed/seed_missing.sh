#!/usr/bin/env bash
# The seeding hooks when the library lacks what they want (never a NULL call; the job runs as
# without the shim, with a warning):
#   - a libtorch_cuda stand-in that hides the three callers whose seeds must pass unchanged
#     (set_state, clone_impl, createCUDAGenerator): the shim cannot tell a restored or copied
#     seed from a new one, so every CUDA seed passes unchanged: the native run's seeds;
#   - a libcurand stand-in without curandSetPseudoRandomGeneratorSeed, whose hook a program
#     finds in the global scope: cuRAND's error status, no crash, no seed derived or counted.
# (libc's seeding functions cannot be missing from glibc; their hooks check the same way.)
. tests/lib.sh

unset RANK OMPI_COMM_WORLD_RANK PMI_RANK PMIX_RANK SLURM_PROCID
PROGS=$BUILD/tests/progs
LACKING=$BUILD/tests/standins/lacking
for file in "$PROGS/seed_torch_standin" "$PROGS/seed_curand" "$LACKING/libtorchcuda.so" "$LACKING/libcurand.so"; do
    [ -e "$file" ] || fail "$file is not built"
done
log=$(mktemp)
trap 'rm -f "$log"' EXIT

native=$("$PROGS/seed_torch_standin" "$LACKING/libtorchcuda.so" 42 777) || fail "natively: $native"
got=$(REPROD_VERBOSE=2 LD_PRELOAD=$PRELOAD "$PROGS/seed_torch_standin" "$LACKING/libtorchcuda.so" 42 777 2>"$log") ||
    fail "under the shim: $got $(cat "$log")"
[ "$got" = "$native" ] ||
    fail "libtorch_cuda without its callers: seeds changed under the shim: $(diff <(echo "$native") <(echo "$got"))"
[ "$(grep -c 'warning: .*CUDAGeneratorImpl9set_state.* was not found .*seeds pass unchanged' "$log")" -eq 1 ] ||
    fail "no single warning that CUDA seeds pass unchanged: $(cat "$log")"
ok "libtorch_cuda hiding set_state, clone_impl, createCUDAGenerator: the native seeds, one warning"

status=0
"$PROGS/seed_curand" "$LACKING/libcurand.so" 42 >/dev/null 2>&1 || status=$?
[ "$status" = 2 ] || fail "natively, seed_curand on a libcurand without the seeding call: exit status $status"
status=0
got=$(REPROD_VERBOSE=2 LD_PRELOAD=$PRELOAD "$PROGS/seed_curand" "$LACKING/libcurand.so" 42 2>&1) || status=$?
[ "$status" = 1 ] && grep -q 'cuRAND status 999$' <<<"$got" ||
    fail "the hook of a missing curandSetPseudoRandomGeneratorSeed: exit status $status: $got"
grep -q 'warning: curandSetPseudoRandomGeneratorSeed: the real function was not found' <<<"$got" ||
    fail "no warning that the real seeding call is missing: $got"
! grep -q 'seed: curandSetPseudoRandomGeneratorSeed' <<<"$got" ||
    fail "a seed was derived for a call that reached no generator: $got"
ok "libcurand without its seeding call: CURAND_STATUS_INTERNAL_ERROR from the hook, a warning, no seed derived"
