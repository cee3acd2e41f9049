#!/usr/bin/env bash
# The CUDA and NCCL stand-ins (build/standins/, tests/standins_nccl/) natively, without the
# shim: every collective, send/recv, groups, threads, split, nonblocking communicators and graph
# capture at 1, 2, 3, 4 and 8 ranks (tests/nccl/standin_selftest.c), a 1 MiB all-reduce well
# under 100 ms at 8 ranks, and the native reduction order changing with NCCL_ALGO,
# NCCL_MAX_NCHANNELS and the rank count, as NCCL's does: the float sum of the same 24 random
# contributions must come out in more than one bit pattern.
. tests/lib.sh

export MPI_TIMEOUT=${MPI_TIMEOUT:-60}
use_standins
program=$BUILD/tests/nccl/standin_selftest
out=$(mktemp)
trap 'rm -f "$out"' EXIT

for np in 1 2 3 4 8; do
    run_mpi "$np" "$program" check >"$out" 2>&1 || {
        grep -E 'FAIL|standin|NCCL|rror' "$out" | head -n 20 >&2
        fail "standin_selftest at np $np"
    }
    grep -q "^standin_selftest: np $np: ok" "$out" || fail "standin_selftest at np $np printed no ok line"
    ok "collectives, send/recv, groups, threads, split, nonblocking, graphs at np $np"
done

run_mpi 8 "$program" time >"$out" 2>&1 || fail "timing run: $(cat "$out")"
milliseconds=$(sed -n 's/^time: \([0-9.]*\) ms.*/\1/p' "$out")
awk -v ms="$milliseconds" 'BEGIN { exit !(ms != "" && ms < 100) }' || fail "1 MiB all-reduce at np 8 took $milliseconds ms"
ok "1 MiB all-reduce at np 8: $milliseconds ms"

declare -A patterns=()
for np in 2 3 4 8; do
    for algo in Ring Tree; do
        for channels in 1 4 32; do
            NCCL_ALGO=$algo NCCL_MAX_NCHANNELS=$channels run_mpi "$np" -x NCCL_ALGO -x NCCL_MAX_NCHANNELS \
                "$program" sum >"$out" 2>&1 || fail "sum at np $np $algo $channels: $(cat "$out")"
            pattern=$(sed -n 's/^sum: //p' "$out")
            [ -n "$pattern" ] || fail "sum at np $np $algo $channels printed nothing"
            patterns[$pattern]=1
        done
    done
done
count=${#patterns[@]}
[ "$count" -gt 1 ] || fail "every setting gave the same float sum: the native order does not vary"
ok "the float sum came out in $count distinct bit patterns over {Ring,Tree} x {1,4,32} channels x np {2,3,4,8}"
