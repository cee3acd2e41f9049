#!/usr/bin/env bash
# NCCL where the device side is hard (tests/nccl/devices.c over the stand-ins, which model
# per-thread current devices, a kernel faulting on another device's memory, a device's memory
# and CUDA's stream-ordered pool): one thread driving three devices on stream 0 in a group; a
# device full but for its pool's free blocks, or full outright; a driver older than the kernels;
# a CUDA or NCCL library lacking a function the shim wants (stand-ins built without it); libnccl
# in a link-map namespace of its own (dlmopen). Every result exact, or exactly the native one
# when the shim passes through, and the log says which and why.
. tests/lib.sh

program=$BUILD/tests/nccl/devices
for built in "$program" "$BUILD/tests/nccl/namespaces" "$BUILD/standins/without-ncclSend/libnccl.so.2"; do
    [ -e "$built" ] || fail "$built is not built"
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
use_standins
standins=$LD_LIBRARY_PATH

# run NAME [VAR=VALUE...] -- ARGS: the program under the shim (REPROD_VERBOSE=1, its log in
# $out/NAME.log, its output in $out/NAME); fails the test on a non-zero exit.
run() {
    local name=$1
    shift
    local settings=()
    while [ "$1" != -- ]; do settings+=("$1"); shift; done
    shift
    bounded 120 env "${settings[@]}" LD_PRELOAD="$PRELOAD" REPROD_VERBOSE=1 REPROD_LOG="$out/$name.log" \
        "$program" "$@" >"$out/$name" 2>"$out/$name.err" ||
        fail "$name: $(status_text $? 120): $(cat "$out/$name" "$out/$name.err" "$out/$name.log" 2>/dev/null | head -c 3000)"
}

# exact NAME: the run's every element was the exact sum.
exact() {
    grep -q "^ok: .* inexact=0 " "$out/$1" || fail "$1: not exact: $(cat "$out/$1" "$out/$1.err" | head -c 2000)"
}

# logged NAME TEXT: the run's log says TEXT.
logged() {
    grep -qF -- "$2" "$out/$1.log" || fail "$1: the log does not say '$2': $(head -c 3000 "$out/$1.log")"
}

digest() {
    sed -n 's/^ok: .* digest=\([0-9a-f]*\)$/\1/p' "$1"
}

# The native results, for the runs that must pass through.
bounded 120 "$program" group-end 3 >"$out/native" 2>"$out/native.err" ||
    fail "native group-end: $(cat "$out/native.err")"

# One thread, three devices, stream 0, the calls grouped while each device is current in turn:
# each communicator's scratch, kernels and copies on its own device (a kernel on the device
# current at ncclGroupEnd reading another device's memory faults).
run group-end -- group-end 3
exact group-end
ok "one thread, three devices, stream 0, grouped and ungrouped: every element exact ($(head -c 60 "$out/group-end"))"

# A full device: the pool holds free 6 MiB blocks, an 8 MiB scratch fits after a trim; then
# nothing left but 4 MiB: the scratch goes to pinned host memory. The same bits either way.
run pool-trim STANDIN_DEVICE_MEMORY_MB=64 REPROD_SCRATCH_MB=8 -- pool-trim 3
exact pool-trim
logged pool-trim "trimming CUDA's stream-ordered pool made room"
run device-full STANDIN_DEVICE_MEMORY_MB=64 REPROD_SCRATCH_MB=8 -- device-full 3
exact device-full
logged device-full "is in pinned host memory"
ok "device full: after a trim of CUDA's pool, then in pinned host memory: every element exact"

# Which path runs, and why: the kernels (with nvcc), or the host path because the driver is
# older than the toolkit that built the kernels, or because the shim was built without nvcc.
# (The build records whether the shim embeds kernels: config/kernels begins "yes".)
if grep -q "^yes" "$BUILD/config/kernels" 2>/dev/null; then
    run kernels -- plain 3
    exact kernels
    logged kernels "device kernels loaded: device reductions run on the GPU"
    grep -q "counts: .* device=kernels" "$out/kernels.log" || fail "kernels: no device=kernels in the counts"
    run old-driver STANDIN_CUDA_DRIVER_VERSION=12040 -- plain 3
    exact old-driver
    logged old-driver "the driver supports CUDA 12.4, older than the CUDA"
    grep -q "counts: .* device=host:driver-older-than-kernels" "$out/old-driver.log" ||
        fail "old driver: the counts do not say why: $(grep counts "$out/old-driver.log")"
    LD_PRELOAD= STANDIN_CUDA_DRIVER_VERSION=12040 "$BUILD/reprod" doctor -- "$program" plain 3 >"$out/doctor" 2>&1 ||
        fail "reprod doctor, old driver: $(cat "$out/doctor")"
    grep -q "device reductions: on the host path .*driver older than kernels" "$out/doctor" ||
        fail "reprod doctor does not say where device reductions ran: $(cat "$out/doctor")"
    ok "kernels loaded and said so; a driver older than the kernels: the host path, exact, and why (log, counts, doctor)"
    nonvcc=$BUILD/nonvcc/libreprod_shim.so
else
    nonvcc=$SHIM
fi
[ -e "$nonvcc" ] || fail "$nonvcc is not built"
PRELOAD=${PRELOAD_FIRST:+$PRELOAD_FIRST:}$nonvcc run nonvcc -- plain 3
exact nonvcc
grep -q "counts: .* device=host:built-without-nvcc" "$out/nonvcc.log" ||
    fail "a shim without nvcc: the counts do not say why: $(grep counts "$out/nonvcc.log")"
ok "a shim built without nvcc: the host path, exact, and why"

# A library lacking a function the shim wants: the shim passes the reductions through (the
# native bits) and names the function; an optional one changes only the way.
# lacking NAME: the stand-ins with the build that lacks NAME first, for `run`'s settings.
lacking() {
    echo "LD_LIBRARY_PATH=$BUILD/standins/without-$1:$standins"
}
for missing in cuMemAllocAsync ncclSend; do
    run "no-$missing" "$(lacking $missing)" -- group-end 3
    [ "$(digest "$out/no-$missing")" = "$(digest "$out/native")" ] ||
        fail "without $missing: not the native results: $(cat "$out/no-$missing") natively $(cat "$out/native")"
    logged "no-$missing" "lacks $missing"
    grep -q "counts: .* pass.unsupported=12" "$out/no-$missing.log" ||
        fail "without $missing: the calls are not counted as passed through: $(grep counts "$out/no-$missing.log")"
done
ok "a libcuda without cuMemAllocAsync, a libnccl without ncclSend: passed through with the native results, the function named"
run no-device "$(lacking ncclCommCuDevice)" -- group-end 3
exact no-device
logged no-device "lacks ncclCommCuDevice"
run no-trim "$(lacking cuMemPoolTrimTo)" STANDIN_DEVICE_MEMORY_MB=64 REPROD_SCRATCH_MB=8 -- pool-trim 3
exact no-trim
logged no-trim "is in pinned host memory"
ok "a libnccl without ncclCommCuDevice (each device from its init), a libcuda without cuMemPoolTrimTo (pinned host scratch): exact"
run no-premul "$(lacking ncclRedOpCreatePreMulSum)" -- premul-op 3
grep -q "^premul-op code=2$" "$out/no-premul" || fail "a hook without its real function: $(cat "$out/no-premul")"
logged no-premul "no loaded NCCL library defines ncclRedOpCreatePreMulSum"
ok "a hooked function the library lacks: NCCL's error code (2), logged, never a call through NULL"

# libnccl loaded with dlmopen into a namespace of its own, looked up with dlsym: the shim's
# hooks serve only its own namespace, so the library's own functions answer.
"$BUILD/tests/nccl/namespaces" >"$out/ns.native" 2>&1 || fail "namespaces natively: $(cat "$out/ns.native")"
LD_PRELOAD="$PRELOAD" "$BUILD/tests/nccl/namespaces" >"$out/ns" 2>&1 || fail "namespaces under the shim: $(cat "$out/ns")"
ok "under the shim, $(cut -c5- "$out/ns")"
