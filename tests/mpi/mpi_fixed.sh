#!/usr/bin/env bash
# The fixed-point route (REPROD_ROUTE=fixed): every float sum (all-reduce, in place too, reduce,
# reduce-scatter of both kinds, scan, exclusive scan, nonblocking all-reduce, reduce, scan and
# reduce-scatter, persistent all-reduce) on float, double and both complex types equals MPFR's correctly rounded
# sum in each of the four directions (tests/mpi/fixed.c checks every element in every run), on
# 2 to 32 ranks of Open MPI and 2 and 3 of MPICH (whose ranks poll: slow oversubscribed); and
# one result, bit for bit:
#   - across world sizes: the "pairs" cases have the same exact sum on every world size;
#   - across the two routes: REPROD_ROUTE=exchange gives the fixed route's bits;
#   - across Open MPI's all-reduce algorithms (coll_tuned_allreduce_algorithm 1 to 6);
#   - across the two libraries.
. tests/lib.sh

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

openmpi=$BUILD/tests/mpi/fixed
mpich=$BUILD/tests/mpich/fixed
[ -x "$openmpi" ] && [ -x "$mpich" ] || fail "$openmpi or $mpich is not built"
fast=(--mca btl self,vader)

# ompi NAME NP ROUTE DIRECTION [MPIRUN ARGS...]: one run, its lines in $out/NAME ($program_args:
# the program's own arguments).
program_args=()
ompi() {
    local name=$1 np=$2 route=$3 direction=$4
    shift 4
    run_mpi_shim "$np" "${fast[@]}" -x REPROD_ROUTE="$route" -x REPROD_ROUNDING="$direction" \
        "$@" "$openmpi" "${program_args[@]}" >"$out/$name" 2>"$out/err" ||
        fail "Open MPI np=$np route=$route rounding=$direction $*: $(head -c 2000 "$out/err")"
}

mpich() {
    local name=$1 np=$2 route=$3 direction=$4
    run_mpich_shim "$np" -env REPROD_ROUTE "$route" -env REPROD_ROUNDING "$direction" \
        "$mpich" >"$out/$name" 2>"$out/err" ||
        fail "MPICH np=$np route=$route rounding=$direction: $(head -c 2000 "$out/err")"
}

# same A B WHAT [PATTERN]: the lines of runs A and B (those matching PATTERN) are identical.
same() {
    local pattern=${4:-.}
    cmp -s <(grep "$pattern" "$out/$1") <(grep "$pattern" "$out/$2") ||
        fail "$3: $(diff <(grep "$pattern" "$out/$1") <(grep "$pattern" "$out/$2") | head -6)"
}

# Every direction, against the oracle, on 2 and 5 ranks; to nearest on 3 and 8.
directions="nearest zero up down"
if sanitized; then directions="nearest down"; fi
for np in 2 5; do
    for direction in $directions; do
        ompi "ompi.$np.$direction" "$np" fixed "$direction"
    done
done
ompi ompi.8.nearest 8 fixed nearest
# np=3 with large calls: 2^21 + 77 floats (two segments of pass 1), double terms across the
# whole binary64 range (about 35 words an element: two pieces of pass 2).
program_args=(--large)
ompi ompi.3.nearest 3 fixed nearest
ompi ompi.3.exchange 3 exchange nearest
program_args=()
same ompi.3.nearest ompi.3.exchange "np=3 with large calls: REPROD_ROUTE=exchange and =fixed differ"
ok "Open MPI np 2 and 5 rounding $directions, np 3 (large calls too) and 8 to nearest: every call, type and element equals MPFR's sum, both routes the same bits"

# Larger worlds (oversubscribed), to nearest; the pairs' sum is the same on every world size.
for np in 16 32; do
    ompi "ompi.$np.nearest" "$np" fixed nearest
done
for np in 2 3 5 8 16; do
    same "ompi.$np.nearest" ompi.32.nearest "pairs: np=$np and np=32 differ" '^pairs'
done
ok "Open MPI np=16 and 32 equal MPFR's sum; the pairs cases give the same bits on 2 to 32 ranks"

# The exchange gives the fixed route's bits, every case; at np=5 the traces name each call's
# route and `reprod diff` finds the two runs' traces agree.
mkdir -p "$out/trace.fixed" "$out/trace.exchange"
ompi ompi.5.traced 5 fixed nearest -x REPROD_TRACE="$out/trace.fixed"
ompi ompi.5.exchange 5 exchange nearest -x REPROD_TRACE="$out/trace.exchange"
same ompi.5.nearest ompi.5.traced "np=5: a traced run differs"
same ompi.5.nearest ompi.5.exchange "np=5: REPROD_ROUTE=exchange and =fixed differ"
for expected in "MPI_Allreduce .* route=fixed$" "MPI_Iallreduce .* route=fixed-one-pass$" \
    "MPI_Scan .* route=fixed-one-pass$"; do
    grep -q "api=$expected" "$out/trace.fixed/rank0.trace" ||
        fail "the fixed run's trace has no line like 'api=$expected': $(head -3 "$out/trace.fixed/rank0.trace")"
done
# Under REPROD_ROUTE=fixed every call of the program takes a fixed route, and says so (the
# nonblocking reduce-scatter's one pass once said "exchange").
! grep "route=exchange$" "$out/trace.fixed/rank0.trace" | head -1 | grep . ||
    fail "the fixed run's trace names the exchange (above)"
grep -q "api=MPI_Allreduce .* route=exchange$" "$out/trace.exchange/rank0.trace" ||
    fail "the exchange run's trace does not name its route: $(head -3 "$out/trace.exchange/rank0.trace")"
"$BUILD/reprod" diff "$out/trace.fixed" "$out/trace.exchange" >"$out/diff" 2>&1 ||
    fail "reprod diff of the two routes' traces: $(head -5 "$out/diff")"
ompi ompi.16.exchange 16 exchange nearest
same ompi.16.nearest ompi.16.exchange "np=16: REPROD_ROUTE=exchange and =fixed differ"
ompi ompi.5.exchange.down 5 exchange down
same ompi.5.down ompi.5.exchange.down "np=5 rounding down: the two routes differ"
ok "the exchange and the fixed route: the same bits (np 5 and 16, nearest and down); traces name the route and agree"

# Every Open MPI all-reduce algorithm under the fixed route's own integer sums.
for algorithm in 1 2 3 4 5 6; do
    ompi "ompi.5.algorithm$algorithm" 5 fixed nearest --mca coll_tuned_use_dynamic_rules 1 \
        --mca coll_tuned_allreduce_algorithm "$algorithm"
    same ompi.5.nearest "ompi.5.algorithm$algorithm" "np=5: allreduce algorithm $algorithm differs"
done
ok "Open MPI's all-reduce algorithms 1 to 6 at np=5: one result"

# MPICH: the oracle in every direction on 2 ranks, to nearest on 3; Open MPI's bits.
for direction in $directions; do
    mpich "mpich.2.$direction" 2 fixed "$direction"
    same "ompi.2.$direction" "mpich.2.$direction" "np=2 rounding $direction: MPICH and Open MPI differ"
done
mpich mpich.3.nearest 3 fixed nearest
same ompi.3.nearest mpich.3.nearest "np=3: MPICH and Open MPI differ" '^case\|^pairs'
ok "MPICH np=2 ($directions) and np=3: MPFR's sum, and Open MPI's bits"

# The job's floating-point environment: at 5 ranks under REPROD_ROUTE=auto the route is the cost
# model's choice, computed in binary64: a job trapping FE_INEXACT must take no signal from it,
# and an exact sum must leave every exception flag clear. And ranks that disagree on
# REPROD_ROUNDING (a misconfiguration) still lay out the same words: sums exact in every
# direction come back right on every rank, without MPI_ERR_TRUNCATE.
fenv_program=$BUILD/tests/mpi/fenv_route
[ -x "$fenv_program" ] || fail "$fenv_program is not built"
for what in trap flags; do
    run_mpi_shim 5 "${fast[@]}" "$fenv_program" "$what" >"$out/fenv.$what" 2>&1 ||
        fail "np=5, route auto, $what: $(head -c 2000 "$out/fenv.$what")"
    grep -qx ok "$out/fenv.$what" || fail "np=5, route auto, $what: $(head -c 2000 "$out/fenv.$what")"
done
mixed=(-x LD_PRELOAD="$PRELOAD" -x REPROD_ROUTE=fixed -np 1 env) # each app context its own -x
bounded "${MPI_TIMEOUT:-120}" mpirun.openmpi --oversubscribe --bind-to none "${fast[@]}" \
    "${mixed[@]}" REPROD_ROUNDING=nearest "$fenv_program" mixed : \
    "${mixed[@]}" REPROD_ROUNDING=down "$fenv_program" mixed >"$out/fenv.mixed" 2>&1 ||
    fail "ranks rounding nearest and down: $(head -c 2000 "$out/fenv.mixed")"
grep -qx ok "$out/fenv.mixed" || fail "ranks rounding nearest and down: $(head -c 2000 "$out/fenv.mixed")"
ok "the job's floating-point environment untouched at 5 ranks (FE_INEXACT trapped, flags clear); ranks rounding nearest and down agree on the words"
