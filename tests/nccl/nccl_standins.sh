#!/usr/bin/env bash
# The CUDA and NCCL stand-ins (build/standins/, tests/standins_nccl/) natively, without the
# shim: every collective, send/recv, groups, threads, split, nonblocking communicators and graph
# capture at 1, 2, 3, 4 and 8 ranks, with NCCL's exact error codes, groups failed by a bad call,
# ncclInProgress until a nonblocking launch is done, a communicator's work in issue order across
# streams (tests/nccl/standin_selftest.c); the counts they report for tests (messages, peers,
# collectives, peak stream-ordered memory); a use after ncclCommDestroy caught; a 1 MiB
# all-reduce well under 100 ms at 8 ranks, and the native reduction order changing with
# NCCL_ALGO, NCCL_MAX_NCHANNELS and the rank count, as NCCL's does: the float sum of the same 24
# random contributions must come out in more than one bit pattern.
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

# What the stand-ins count for tests: 3 sends and 3 receives with each ring neighbour, 2
# collectives, a peak of 4 MiB of stream-ordered memory (tests/nccl/standin_selftest.c, count).
for np in 2 3; do
    run_mpi "$np" -x NCCL_STANDIN_REPORT=1 "$program" count >"$out" 2>&1 || fail "count at np $np: $(cat "$out")"
    peers=$((np == 2 ? 1 : 2))
    line=$(grep -m1 "process 0 comm rank 0 of $np:" "$out")
    [ "$line" = "NCCL stand-in report: process 0 comm rank 0 of $np: sends 3 receives 3 peers $peers collectives 2 calls-after-error 0" ] ||
        fail "count at np $np: $(grep 'stand-in report' "$out")"
    grep -q "process 0: peak stream-ordered device memory 4194304 bytes" "$out" ||
        fail "count at np $np: peak memory: $(grep 'stand-in report' "$out")"
    ok "np $np: the stand-ins count: ${line#*: }, a peak of 4 MiB"
done

# A call on a destroyed communicator is a use after free: reported, and the process aborts.
if run_mpi 1 "$program" after-destroy >"$out" 2>&1; then
    fail "a call on a destroyed communicator went unnoticed: $(cat "$out")"
fi
grep -q "NCCL stand-in: ncclAllReduce: communicator .* used after ncclCommDestroy or ncclCommAbort" "$out" ||
    fail "a call on a destroyed communicator: no report: $(head -c 2000 "$out")"
ok "a call on a destroyed communicator: $(grep -o 'NCCL stand-in: ncclAllReduce: .*' "$out" | head -1)"

# The stand-ins stay fast enough for the suite: 100 ms a call, scaled as time limits are
# (sanitizers, a busy machine).
run_mpi 8 "$program" time >"$out" 2>&1 || fail "timing run: $(cat "$out")"
milliseconds=$(sed -n 's/^time: \([0-9.]*\) ms.*/\1/p' "$out")
awk -v ms="$milliseconds" -v most="$(limit 100)" 'BEGIN { exit !(ms != "" && ms < most) }' ||
    fail "1 MiB all-reduce at np 8 took $milliseconds ms (at most $(limit 100))"
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
