#!/usr/bin/env bash
# run.sh: the checks that need a real GPU (make test-gpu), under 8 minutes on one GPU. CI never
# runs them. Exit status 77 (skip) when there is no driver.
#   1. the kernels against the host engine, bitwise, every type, op and rounding, random and
#      adversarial data; a captured graph replayed; the kernel's throughput as a share of
#      device-to-device copy bandwidth (target >= 0.6 for binary32, N = 8)
#   2. a one-rank torch.distributed NCCL job under the shim (if PyTorch with CUDA is present),
#      and the AllReduce path's overhead on one rank: native and shim interleaved, medians
set -u
BUILD=${BUILD:-build}
SHIM=$(pwd)/$BUILD/libreprod_shim.so
status=0

echo "=== kernels against the host engine"
"$BUILD/tests/gpu/check_kernels" || status=$?
[ "$status" = 77 ] && exit 77

PYTHON=${PYTHON:-python3}
if $PYTHON -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() and torch.distributed.is_nccl_available() else 1)' 2>/dev/null; then
    echo "=== torch.distributed, one rank, under the shim"
    log=$(mktemp)
    if LD_PRELOAD=$SHIM REPROD_VERBOSE=1 REPROD_LOG=$log $PYTHON tests/gpu/torch_one_rank.py check; then
        grep summary "$log" || true
        grep -q "NCCL [0-9]* reproducible, [1-9]" "$log" || { echo "FAIL: the shim saw no NCCL call"; status=1; }
    else
        status=1
    fi
    rm -f "$log"
    echo "=== 64 MiB all_reduce on one rank, median seconds, native vs shim (interleaved)"
    native=() shim=()
    for round in 1 2 3; do
        native+=("$($PYTHON tests/gpu/torch_one_rank.py time)")
        shim+=("$(LD_PRELOAD=$SHIM $PYTHON tests/gpu/torch_one_rank.py time)")
    done
    printf '%s\n' "${native[@]}" | sort -n | sed -n 2p >/tmp/reprod_native.$$
    printf '%s\n' "${shim[@]}" | sort -n | sed -n 2p >/tmp/reprod_shim.$$
    awk -v n="$(cat /tmp/reprod_native.$$)" -v s="$(cat /tmp/reprod_shim.$$)" \
        'BEGIN { printf "native %.6f s, shim %.6f s, shim/native %.2f\n", n, s, s / n }'
    rm -f /tmp/reprod_native.$$ /tmp/reprod_shim.$$
else
    echo "note: no PyTorch with CUDA and NCCL here: the torch.distributed check did not run"
fi
exit $status
