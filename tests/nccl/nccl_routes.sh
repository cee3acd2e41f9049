#!/usr/bin/env bash
# The routes of an exact NCCL sum (docs/nccl.md, "Routes") over the stand-ins, at up to 32 ranks
# (the message and peer counts are nccl_routes_counts.sh's):
# 1. the same terms on 8, 16 and 32 ranks (tests/nccl/routes.c: eight sources, the rest -0) give
#    one result, equal to MPFR's, under REPROD_ROUTE=fixed, exchange and auto (natively not);
# 2. inside a group (the two-pass route) and captured into a graph (the one-pass route), the
#    same bits on both routes; the log and the trace name the route each call took;
# 3. features.c's groups, errors inside groups, nonblocking communicators, graphs and pieces
#    under REPROD_ROUTE=fixed;
# 4. the shim built without nvcc (the stages on the host): the same bits.
. tests/lib.sh

nccl_program routes 90

BIG=32
if sanitized; then BIG=16; fi

# 1. One result on 8, 16 and 32 ranks, on every route, each element MPFR's.
sizes="8 16 $BIG"
for run in "8 fixed" "8 exchange" "16 fixed" "$BIG fixed" "$BIG auto"; do
    set -- $run
    np=$1
    for route in $2; do
        run_mpi_shim "$np" -x LD_LIBRARY_PATH -x REPROD_ROUTE=$route "$program" spread >"$out/spread.$np.$route" 2>"$out/err" ||
            fail "spread np=$np $route: $(cat "$out/spread.$np.$route") $(head -c 2000 "$out/err")"
        grep -q '^spread cases [0-9]* wrong 0 ' "$out/spread.$np.$route" ||
            fail "spread np=$np $route: $(cat "$out/spread.$np.$route") $(head -c 2000 "$out/err")"
    done
done
for np in 8 $BIG; do
    run_mpi "$np" -x LD_LIBRARY_PATH "$program" spread >"$out/native.spread.$np" 2>/dev/null
done
digests=$(cat "$out"/spread.* | awk '{print $NF}' | sort -u)
[ "$(echo "$digests" | wc -l)" -eq 1 ] ||
    fail "np=$sizes x fixed/exchange/auto gave $(echo "$digests" | wc -l) results: $(grep . "$out"/spread.*)"
native=$(cat "$out"/native.spread.* | awk '/^spread/ {print $NF, $5}' | sort -u | wc -l)
[ "$native" -gt 1 ] || grep -q 'wrong [1-9]' "$out"/native.spread.* ||
    fail "natively every world size gave the exact results: the test shows nothing"
ok "np=$sizes x REPROD_ROUTE=fixed/exchange/auto (the exchange at 8, auto at $BIG): one result ($digests), every element MPFR's (AllReduce, ReduceScatter, Reduce; 4 types; sum, PreMulSum); natively $native"
run_mpi_shim 8 -x LD_LIBRARY_PATH -x REPROD_ROUTE=fixed -x REPROD_ROUNDING=down "$program" spread --rounding down >"$out/down" 2>"$out/err" ||
    fail "rounding down: $(cat "$out/down") $(head -c 2000 "$out/err")"
grep -q 'wrong 0 ' "$out/down" || fail "rounding down: $(cat "$out/down")"
ok "np=8, REPROD_ROUNDING=down on the fixed route: every element MPFR's"

# 2. Groups (two passes) and graphs (one pass): the same bits as the exchange, the route logged.
for np in 16; do
    for route in fixed exchange; do
        run_mpi_shim "$np" -x LD_LIBRARY_PATH -x REPROD_ROUTE=$route -x REPROD_VERBOSE=2 -x REPROD_TRACE="$out/trace.$route" "$program" group graph \
            >"$out/scenarios.$route" 2>"$out/err.$route" ||
            fail "group, graph np=$np $route: $(cat "$out/scenarios.$route") $(head -c 2000 "$out/err.$route")"
        for scenario in group graph; do
            grep -q "^$scenario cases [0-9]* wrong 0 " "$out/scenarios.$route" ||
                fail "$scenario np=$np $route: $(cat "$out/scenarios.$route") $(head -c 2000 "$out/err.$route")"
        done
    done
    cmp -s "$out/scenarios.fixed" "$out/scenarios.exchange" ||
        fail "group, graph np=$np: the routes differ: $(cat "$out/scenarios.fixed" "$out/scenarios.exchange")"
    grep -Eq "route fixed( \(|$)" "$out/err.fixed" || fail "np=$np: the two-pass route not logged: $(grep -m3 route "$out/err.fixed")"
    grep -q "route fixed one-pass$" "$out/err.fixed" || fail "np=$np: the one-pass route not logged under capture: $(grep -m3 route "$out/err.fixed")"
    grep -q "route exchange" "$out/err.exchange" || fail "np=$np: the exchange not logged"
    grep -q " route=fixed$" "$out/trace.fixed/rank0.trace" && grep -q " route=fixed-one-pass$" "$out/trace.fixed/rank0.trace" &&
        grep -q " route=exchange$" "$out/trace.exchange/rank0.trace" ||
        fail "np=$np: the traces do not name the routes: $(grep -m4 api=nccl "$out/trace.fixed/rank0.trace")"
    "$BUILD/reprod" diff "$out/trace.fixed" "$out/trace.exchange" >"$out/diff" ||
        fail "np=$np: reprod diff of the two routes' traces: $(cat "$out/diff")"
    ok "np=$np: a group of four calls (two passes) and a captured graph replayed (one pass): every element MPFR's, the same bits as the exchange, the route in the log and the trace, the two routes' traces agree under reprod diff"
done

# 3. features.c under the fixed route: groups mixing calls, errors in groups (NCCL's codes, the
# group dropped), nonblocking communicators (one pass), graphs, several pieces.
scenarios="group nonblocking graph large bad bad-group premul-ranks"
run_mpi_shim 3 -x LD_LIBRARY_PATH -x REPROD_ROUTE=fixed -x REPROD_SCRATCH_MB=1 -x NCCL_STANDIN_TIMEOUT=20 \
    "$BUILD/tests/nccl/features" $scenarios >"$out/features" 2>"$out/err" ||
    fail "features under REPROD_ROUTE=fixed: $(cat "$out/features") $(head -c 2000 "$out/err")"
for scenario in $scenarios; do
    grep -q "^ok: $scenario\$" "$out/features" || fail "features $scenario under REPROD_ROUTE=fixed: $(cat "$out/features")"
done
ok "np=3 REPROD_ROUTE=fixed REPROD_SCRATCH_MB=1: $scenarios: every element exact, every code NCCL's"

# 4. The shim built without nvcc runs the fixed route's stages on the host (cuda_host.c, the
# kernel's own source): the same bits.
if [ -n "${TEST_SHIM:-}" ]; then
    skip_part "the shim built without nvcc: the shim under test ($TEST_SHIM) has no such twin"
elif [ -f "$BUILD/nonvcc/libreprod_shim.so" ]; then
    run_mpi 16 -x LD_LIBRARY_PATH -x LD_PRELOAD="$BUILD/nonvcc/libreprod_shim.so" -x REPROD_ROUTE=fixed -x REPROD_VERBOSE=1 \
        "$program" spread group graph >"$out/nonvcc" 2>"$out/err" || fail "no-nvcc shim: $(cat "$out/nonvcc") $(head -c 2000 "$out/err")"
    grep -q "built without nvcc" "$out/err" || fail "the no-nvcc shim did not say that it runs on the host: $(head -c 500 "$out/err")"
    grep -q "run on the host" "$out/err.fixed" && fail "the default build did not run its kernels: $(head -c 500 "$out/err.fixed")"
    { grep "^spread .* $digests\$" "$out/nonvcc" && cat "$out/scenarios.fixed"; } | cmp -s - "$out/nonvcc" ||
        fail "no-nvcc shim: $(cat "$out/nonvcc") against the kernels': $digests $(cat "$out/scenarios.fixed")"
    # Several pieces, each in several sub-pieces (REPROD_SCRATCH_MB=1), in place and with
    # PreMulSum: the host stages copy back what a sub-piece's rounding leaves alone as it was.
    run_mpi 3 -x LD_LIBRARY_PATH -x LD_PRELOAD="$BUILD/nonvcc/libreprod_shim.so" -x REPROD_ROUTE=fixed \
        -x REPROD_SCRATCH_MB=1 "$BUILD/tests/nccl/features" large premul-ranks >"$out/nonvcc.large" 2>"$out/err" ||
        fail "no-nvcc shim, features large premul-ranks: $(cat "$out/nonvcc.large") $(head -c 2000 "$out/err")"
    for scenario in large premul-ranks; do
        grep -q "^ok: $scenario\$" "$out/nonvcc.large" || fail "no-nvcc shim, features $scenario: $(cat "$out/nonvcc.large")"
    done
    ok "the shim built without nvcc (the stages on the host): the same bits on the fixed route, spread, group and graph; large and premul-ranks in sub-pieces exact"
fi
