#!/usr/bin/env bash
# NCCL as real jobs use it, over the stand-ins, under the shim (tests/nccl/features.c checks
# every result against MPFR): groups mixing coalesced and pass-through calls, two
# communicators on two threads, a Split child, a nonblocking communicator, a captured graph
# replayed, a count past REPROD_SCRATCH_MB; erroneous calls get NCCL's own codes; the summary
# counts the calls; traces of two configurations compare equal under `reprod diff`.
. tests/lib.sh

program=$BUILD/tests/nccl/features
[ -x "$program" ] || fail "$program is not built"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
use_standins

for np in 2 3; do
    run_mpi_shim "$np" -x LD_LIBRARY_PATH -x REPROD_SCRATCH_MB=1 -x REPROD_VERBOSE=1 "$program" \
        >"$out/shim.$np" 2>"$out/err.$np" || fail "np=$np: $(cat "$out/shim.$np") $(head -c 3000 "$out/err.$np")"
    for scenario in group threads split nonblocking graph large initall premul-ranks order bad; do
        grep -q "^ok: $scenario" "$out/shim.$np" || fail "np=$np $scenario: $(cat "$out/shim.$np") $(head -c 2000 "$out/err.$np")"
    done
    grep -q "NCCL [1-9][0-9]* reproducible" "$out/err.$np" ||
        fail "np=$np: the summary does not count the NCCL calls: $(grep summary "$out/err.$np")"
    ok "np=$np: group, threads, split, nonblocking, graph, large, initall, premul-ranks, order: every element exact; $(grep -o 'NCCL [0-9]* reproducible, [0-9]* passed' "$out/err.$np" | head -1) (rank 0)"
done

# One rank without device memory for its scratch, nor pinned host memory to put it in: the job
# stops with a message naming the call (the other ranks are already in it), never hangs.
status=0
timeout -k 5 60 mpirun.openmpi --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x LD_PRELOAD="$PRELOAD" \
    -x STANDIN_FAIL_ALLOC_ASYNC_RANK=0 -x STANDIN_FAIL_HOST_ALLOC_RANK=0 -x REPROD_LOG="$out/nomem.%r.log" "$program" group \
    >"$out/nomem" 2>&1 || status=$?
[ "$status" -ne 0 ] && [ "$status" -ne 124 ] && [ "$status" -ne 137 ] ||
    fail "one rank out of scratch memory: exit status $status (124: it hung): $(tail -5 "$out/nomem")"
grep -q 'error: ncclAllReduce could not start on this rank (no device memory' "$out"/nomem.0.log ||
    fail "one rank out of scratch memory: no error line naming the call: $(cat "$out"/nomem.*.log)"
ok "one rank out of scratch memory: the job stops (status $status) with $(grep -o 'error: ncclAllReduce could not start[^;]*' "$out"/nomem.0.log)"

# Erroneous calls: the same codes as natively, no crash.
run_mpi 2 -x LD_LIBRARY_PATH "$program" bad >"$out/native.bad" 2>"$out/err" || fail "native bad: $(head -c 2000 "$out/err")"
native_codes=$(grep '^bad:' "$out/native.bad")
shim_codes=$(grep '^bad:' "$out/shim.2")
[ -n "$native_codes" ] && [ "$native_codes" = "$shim_codes" ] ||
    fail "erroneous calls: natively '$native_codes', under the shim '$shim_codes'"
ok "invalid communicator, type, op, NULL buffer, destroyed PreMulSum op, bad root: $native_codes as natively"

# Traces: Ring and Tree compare equal under the shim; natively `reprod diff` finds where they part.
exactness=$BUILD/tests/nccl/exactness
for algorithm in Ring Tree; do
    run_mpi_shim 3 -x LD_LIBRARY_PATH -x NCCL_ALGO=$algorithm -x REPROD_TRACE="$out/trace.shim.$algorithm" \
        "$exactness" --quick >/dev/null 2>"$out/err" || fail "traced $algorithm: $(head -c 2000 "$out/err")"
    run_mpi_shim 3 -x LD_LIBRARY_PATH -x NCCL_ALGO=$algorithm -x REPROD_MODE=off -x REPROD_TRACE="$out/trace.off.$algorithm" \
        "$exactness" --quick --native >/dev/null 2>"$out/err" || fail "traced natively $algorithm: $(head -c 2000 "$out/err")"
done
"$BUILD/reprod" diff "$out/trace.shim.Ring" "$out/trace.shim.Tree" >"$out/diff.shim" 2>&1 ||
    fail "reprod diff of the shim's Ring and Tree traces: $(head -20 "$out/diff.shim")"
grep -q ncclAllReduce "$out/trace.shim.Ring"/* || fail "no ncclAllReduce line in the trace"
if "$BUILD/reprod" diff "$out/trace.off.Ring" "$out/trace.off.Tree" >"$out/diff.off" 2>&1; then
    fail "reprod diff found natively traced Ring and Tree runs identical"
fi
ok "traces: Ring and Tree identical under the shim; natively: $(head -3 "$out/diff.off" | tr '\n' ' ')"
