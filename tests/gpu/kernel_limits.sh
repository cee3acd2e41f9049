#!/bin/sh
# kernel_limits.sh PTXAS_LOG FATBIN [LIMIT_BYTES]: the build's check of the device kernels
# (Makefile, after nvcc). Fails when, for any architecture ptxas built, a kernel (the reduction,
# the fixed route's stages) needs more stack per thread than LIMIT_BYTES (1024: CUDA's default;
# a larger frame makes the first launch grow local memory for the whole device, with a
# device-wide synchronisation), or when the fatbin embeds no PTX (a GPU newer than the built
# architectures runs the kernels only by compiling the PTX). Prints one line per kernel and
# architecture: make test-gpu shows them.
set -u
log=$1
fatbin=$2
limit=${3:-1024}
status=0

# ptxas -v: "Compiling entry function 'K' for 'sm_90'", then "Used ... N bytes cumulative stack
# size" (no such phrase: no stack).
for kernel in reprod_reduce reprod_fixed; do
    frames=$(awk -v kernel=$kernel '
        /Compiling entry function/ {
            split($0, q, "\047"); entry = q[2]; arch = q[4]
            if (entry == kernel) stack[arch] = 0
        }
        /bytes cumulative stack size/ && entry == kernel {
            for (i = 1; i <= NF; i++) if ($i == "cumulative") stack[arch] = $(i - 2)
        }
        END { for (a in stack) print a, stack[a] }' "$log" | sort)
    if [ -z "$frames" ]; then
        echo "kernel_limits: no ptxas report of $kernel in $log" >&2
        exit 1
    fi
    echo "$frames" | while read -r arch bytes; do
        if [ "$bytes" -gt "$limit" ]; then
            echo "$kernel $arch: $bytes bytes of stack per thread, above the $limit-byte default: FAIL" >&2
            exit 1
        fi
        echo "$kernel $arch: $bytes bytes of stack per thread (the default limit is $limit)"
    done || status=1
done

# The fatbin: a 16-byte header (magic 0xba55ed50, version, header size, payload size), then
# entries of kind 1 (PTX) or 2 (ELF), each a header (its size at +4, the payload's at +8, the
# architecture at +28) and its payload.
u16() { od -An -tu2 -j "$2" -N2 "$1" | tr -d ' '; }
u32() { od -An -tu4 -j "$2" -N4 "$1" | tr -d ' '; }
u64() { od -An -tu8 -j "$2" -N8 "$1" | tr -d ' '; }
if [ "$(u32 "$fatbin" 0)" != "$((0xba55ed50))" ]; then
    echo "kernel_limits: $fatbin is not a fatbin" >&2
    exit 1
fi
offset=$(u16 "$fatbin" 6)
end=$((offset + $(u64 "$fatbin" 8)))
ptx=""
while [ "$offset" -lt "$end" ]; do
    kind=$(u16 "$fatbin" "$offset")
    [ "$kind" = 1 ] && ptx="$ptx compute_$(u32 "$fatbin" $((offset + 28)))"
    offset=$((offset + $(u32 "$fatbin" $((offset + 4))) + $(u32 "$fatbin" $((offset + 8)))))
done
if [ -z "$ptx" ]; then
    echo "kernel_limits: $fatbin embeds no PTX: a GPU newer than the built architectures could not run the kernels" >&2
    status=1
else
    echo "PTX embedded for JIT:$ptx"
fi
exit $status
