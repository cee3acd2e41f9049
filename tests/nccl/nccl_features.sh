#!/usr/bin/env bash
# NCCL as real jobs use it, over the stand-ins, under the shim (tests/nccl/features.c checks
# every result against MPFR and every return code against NCCL's exact one): groups mixing
# coalesced and pass-through calls, two communicators on two threads, a Split child, a
# nonblocking communicator (ncclInProgress as NCCL returns it), a captured graph replayed, counts
# past REPROD_SCRATCH_MB (several pieces and rounds), a group's Send/Recv after a shimmed call;
# erroneous calls, also inside groups, get NCCL's own codes and drop their group; a group's
# scratch stays within REPROD_SCRATCH_MB; the application's own timeout runs and the shim never
# touches a communicator after ncclCommAbort; traces hash inputs in stream order; the summary
# counts the calls; traces of two configurations compare equal under `reprod diff`.
. tests/lib.sh

nccl_program features

# np=3 also runs the application's own timeout on a nonblocking communicator whose peer never
# comes, then ncclCommAbort (watchdog), and the same on a blocking one aborted by another
# thread while the call waits (watchdog-blocking): the stand-in aborts the process on any use
# of a communicator after ncclCommAbort.
scenarios="group threads split nonblocking graph large initall order premul-ranks bad bad-group p2p"
for np in 2 3; do
    extra=
    [ "$np" = 3 ] && extra="watchdog watchdog-blocking"
    run_mpi_shim "$np" -x LD_LIBRARY_PATH -x REPROD_SCRATCH_MB=1 -x REPROD_VERBOSE=1 -x NCCL_STANDIN_TIMEOUT=20 \
        "$program" $scenarios $extra >"$out/shim.$np" 2>"$out/err.$np" ||
        fail "np=$np: $(cat "$out/shim.$np") $(head -c 3000 "$out/err.$np")"
    for scenario in $scenarios $extra; do
        grep -q "^ok: $scenario\$" "$out/shim.$np" || fail "np=$np $scenario: $(cat "$out/shim.$np") $(head -c 2000 "$out/err.$np")"
    done
    grep -q "NCCL [1-9][0-9]* reproducible" "$out/err.$np" ||
        fail "np=$np: the summary does not count the NCCL calls: $(grep summary "$out/err.$np")"
    ok "np=$np: $scenarios${extra:+ $extra}: every element exact, every code NCCL's; $(grep -o 'NCCL [0-9]* reproducible, [0-9]* passed' "$out/err.$np" | head -1) (a rank)"
done

# Twelve grouped 4 MiB all-reduces hold at most REPROD_SCRATCH_MB of scratch at once (the
# stand-in's peak of stream-ordered memory, on every rank); two chained in-place all-reduces in
# one group: the second's input is traced as the first's output (hashed in stream order), not
# as the first's input.
run_mpi_shim 2 -x LD_LIBRARY_PATH -x REPROD_SCRATCH_MB=1 -x NCCL_STANDIN_REPORT=1 -x REPROD_TRACE="$out/trace" \
    "$program" scratch chain >"$out/scratch" 2>&1 || fail "scratch, chain: $(head -c 3000 "$out/scratch")"
grep -q '^ok: scratch$' "$out/scratch" && grep -q '^ok: chain$' "$out/scratch" ||
    fail "scratch, chain: $(head -c 3000 "$out/scratch")"
peaks=$(sed -n 's/.*peak stream-ordered device memory \([0-9]*\) bytes/\1/p' "$out/scratch")
[ "$(echo "$peaks" | wc -w)" -eq 2 ] || fail "scratch: no peak reported: $(grep report "$out/scratch")"
for peak in $peaks; do
    [ "$peak" -le 1048576 ] || fail "scratch: twelve grouped all-reduces held $peak bytes at once, past REPROD_SCRATCH_MB=1"
done
ok "twelve grouped 4 MiB all-reduces at REPROD_SCRATCH_MB=1: at most $(echo "$peaks" | sort -n | tail -1) bytes of scratch at once; $(grep -o 'sends [0-9]* receives [0-9]* peers [0-9]* collectives [0-9]*' "$out/scratch" | head -1) (a rank)"
hashes=$(grep 'api=ncclAllReduce .*count=5000 ' "$out/trace/rank0.trace" | sed -n 's/.* in=\([0-9a-f-]*\) out=\([0-9a-f-]*\).*/\1 \2/p')
first_out=$(echo "$hashes" | sed -n 1p | cut -d' ' -f2)
second_in=$(echo "$hashes" | sed -n 2p | cut -d' ' -f1)
[ "$(echo "$hashes" | wc -l)" -eq 2 ] && [ -n "$first_out" ] && [ "$first_out" != - ] && [ "$second_in" = "$first_out" ] ||
    fail "chain: the second all-reduce's input is not the first's output in the trace: $(grep count=5000 "$out/trace/rank0.trace")"
ok "two chained in-place all-reduces in a group: the second's traced input is the first's output ($second_in)"

# NCCL fails a call midway through a shimmed all-reduce of several pieces (the stand-in fails
# the third call issued on the communicator, on every rank): the all-reduce returns NCCL's
# error, and the shim issues nothing more on that communicator.
run_mpi_shim 2 -x LD_LIBRARY_PATH -x REPROD_SCRATCH_MB=1 -x NCCL_STANDIN_REPORT=1 -x NCCL_STANDIN_FAIL_CALL=3 \
    -x NCCL_STANDIN_TIMEOUT=20 "$program" fail-midway >"$out/fail" 2>&1 || fail "fail-midway: $(head -c 3000 "$out/fail")"
grep -q '^ok: fail-midway$' "$out/fail" || fail "fail-midway: $(head -c 3000 "$out/fail")"
after=$(sed -n 's/.*comm rank [0-9]* of 2: .* calls-after-error \([0-9]*\)$/\1/p' "$out/fail")
[ "$(echo $after)" = "0 0" ] ||
    fail "fail-midway: calls made on the communicator after NCCL failed one: '$after': $(grep report "$out/fail")"
ok "NCCL failing a call midway through a shimmed all-reduce: its error returned, no call made on the communicator after it"

# One rank without device memory for its scratch, nor pinned host memory to put it in: the job
# stops with a message naming the call (the other ranks are already in it), never hangs.
status=0
bounded 60 mpirun.openmpi --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x LD_PRELOAD="$PRELOAD" \
    -x STANDIN_FAIL_ALLOC_ASYNC_RANK=0 -x STANDIN_FAIL_HOST_ALLOC_RANK=0 -x REPROD_LOG="$out/nomem.%r.log" "$program" group \
    >"$out/nomem" 2>&1 || status=$?
[ "$status" -ne 0 ] && [ "$status" -ne 124 ] && [ "$status" -ne 137 ] ||
    fail "one rank out of scratch memory: $(status_text "$status" 60), expected a stop: $(tail -5 "$out/nomem")"
grep -q 'error: ncclAllReduce could not start on this rank (no device memory' "$out"/nomem.0.log ||
    fail "one rank out of scratch memory: no error line naming the call: $(cat "$out"/nomem.*.log)"
ok "one rank out of scratch memory: the job stops (status $status) with $(grep -o 'error: ncclAllReduce could not start[^;]*' "$out"/nomem.0.log)"

# Erroneous calls, alone and inside groups: the same codes as natively, no crash. The native
# run (no shim) passes the same code checks: they are NCCL's (the stand-in's) answers.
run_mpi 2 -x LD_LIBRARY_PATH -x NCCL_STANDIN_TIMEOUT=20 "$program" --native bad bad-group p2p nonblocking watchdog \
    watchdog-blocking >"$out/native.bad" 2>"$out/err" || fail "native: $(cat "$out/native.bad") $(head -c 2000 "$out/err")"
for kind in bad bad-group; do
    native_codes=$(grep "^$kind:" "$out/native.bad")
    shim_codes=$(grep "^$kind:" "$out/shim.2")
    [ -n "$native_codes" ] && [ "$native_codes" = "$shim_codes" ] ||
        fail "erroneous calls: natively '$native_codes', under the shim '$shim_codes'"
done
ok "invalid communicator, type, op, NULL buffer, destroyed PreMulSum op, bad root, destroyed stream: $(grep '^bad:' "$out/native.bad") as natively"
ok "the same inside a group (call/ncclGroupEnd, the group dropped): $(grep '^bad-group:' "$out/native.bad") as natively"

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
