#!/usr/bin/env bash
# Every way a framework loads NCCL reaches the shim: a program linked with libnccl; one that
# dlopens RTLD_LOCAL a library depending on libnccl (PyTorch's libtorch_cuda.so); one that
# dlopens libnccl and dlsyms its functions (XLA's stub). Each all-reduce is exact and the
# summary counts it as reproducible.
. tests/lib.sh

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
use_standins

for mode in link local dlsym; do
    program=$BUILD/tests/nccl/loaders_dynamic
    [ "$mode" = link ] && program=$BUILD/tests/nccl/loaders_linked
    [ -x "$program" ] || fail "$program is not built"
    run_mpi_shim 3 -x LD_LIBRARY_PATH -x REPROD_VERBOSE=1 "$program" "$mode" "$BUILD/tests/nccl" \
        >"$out/$mode" 2>"$out/err" || fail "$mode: $(head -c 2000 "$out/err")"
    grep -q "^ok: $mode" "$out/$mode" || fail "$mode: $(cat "$out/$mode") $(head -c 2000 "$out/err")"
    grep -q "NCCL 1 reproducible" "$out/err" || fail "$mode: the call did not reach the shim: $(grep summary "$out/err")"
    ok "$mode: $(cat "$out/$mode")"
done

# dlsym(RTLD_NEXT) keeps its meaning through the shim's dlsym: the caller's next object.
probe=$BUILD/tests/progs/dlsym_next
[ -x "$probe" ] || fail "$probe is not built"
LD_PRELOAD="$PRELOAD" "$probe" >"$out/next" 2>&1 || fail "dlsym(RTLD_NEXT) under the shim: $(cat "$out/next")"
ok "dlsym(RTLD_NEXT) under the shim: $(cat "$out/next")"
