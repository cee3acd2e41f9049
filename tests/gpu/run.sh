#!/usr/bin/env bash
# run.sh: the checks that need a real GPU (make test-gpu), under 8 minutes on one GPU. CI never
# runs them. Exit status 77 (skip) when there is no driver.
#   1. the kernels' stack per thread as ptxas built them (the build fails above 1 KiB) and the
#      PTX embedded for JIT
#   2. the kernels against the host engine, bitwise, every type, op and rounding, random and
#      adversarial data; a captured graph replayed; the device full (the scratch after a trim of
#      CUDA's pool, then in pinned host memory); the per-thread stack limit unchanged by the
#      launches; which path ran and why (REPROD_VERBOSE=1); the kernel's throughput as a share
#      of device-to-device copy bandwidth (target >= 0.6 for binary32, N = 8)
#   3. the same with CUDA_FORCE_PTX_JIT=1: the driver compiles the embedded PTX (or cannot, for
#      a GPU older than it): the path that runs, why, and the same bits
#   4. a one-rank torch.distributed NCCL job under the shim (if PyTorch with CUDA is present),
#      and the AllReduce path's overhead on one rank: native and shim interleaved, medians
set -u
BUILD=${BUILD:-build}
SHIM=$(pwd)/$BUILD/libreprod_shim.so
status=0

echo "=== the kernels as built (ptxas)"
if [ -s "$BUILD/cuda/kernel_limits.txt" ]; then
    cat "$BUILD/cuda/kernel_limits.txt"
else
    echo "note: this shim was built without nvcc: no kernels, every device reduction runs on the host"
fi

echo "=== kernels against the host engine"
REPROD_VERBOSE=1 "$BUILD/tests/gpu/check_kernels" || status=$?
if [ "$status" = 77 ]; then
    echo "note: no CUDA driver (libcuda.so.1) here: the GPU checks did not run"
    exit 77
fi

echo "=== the same with the PTX compiled by the driver (CUDA_FORCE_PTX_JIT=1)"
CUDA_FORCE_PTX_JIT=1 REPROD_VERBOSE=1 "$BUILD/tests/gpu/check_kernels" --any-path || status=1

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
