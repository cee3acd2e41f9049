#!/usr/bin/env bash
# The cost model (shim/runtime/cost.c, `reprod cost`) against what Open MPI really sends: a job
# of six MPI_Allreduce calls (float and double at 8 B, 4 KiB, 1 MiB: tests/mpi/cost_counts.c) at
# np=16 and np=32 (and its float calls at np=24, a non-power of two) under Open MPI's pml
# monitoring, natively and under the shim. Each rank's messages and bytes to each peer come from
# the monitoring's files (one count a run: Open MPI 4.1.4 drops the monitoring's MPI_T variables,
# see cost_counts.c); the model's lines for that rank (`reprod cost --rank R`) are summed.
# Messages and peers must match exactly, rank by rank; bytes within BYTES_TOLERANCE_PERCENT (the
# model prices the Bruck and neighbour all-gather-v with the average chunk). Then the model's
# own claims: the exchange at 2 and 4 ranks, the targets at 1,024 and 16,384 ranks (memory
# independent of N; shim/native time at most 2 but for the misses listed and bounded below),
# and its refusal of bad arguments. No timing: every figure is a count or the model's arithmetic.
. tests/lib.sh
reprod=$BUILD/reprod
program=$BUILD/tests/mpi/cost_counts
BYTES_TOLERANCE_PERCENT=1
[ -x "$program" ] || fail "$program is not built"

# field NAME LINE: the value of NAME=... in LINE.
field() {
    sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"
}

# model NP LABEL ROUTE TYPES [SIZES]: one line a rank, "rank messages bytes peers", the model's
# figures of that rank for the calls of TYPES (float32 float64) at SIZES (default 8 B, 4 KiB and
# 1 MiB): messages and bytes summed, the peers those calls send to counted once (`reprod cost
# --rank all` lists them).
model() {
    local np=$1 label=$2 route=$3 types=$4 sizes=${5:-8 4096 1048576} type size
    for type in $types; do
        for size in $sizes; do
            "$reprod" cost --ranks "$np" --bytes "$size" --type "$type" --route "$route" --rank all ||
                fail "reprod cost --ranks $np --bytes $size --type $type --rank all failed"
        done
    done | awk -v label="$label" '$1 == label {
            for (i = 2; i <= NF; i++) { split($i, kv, "="); value[kv[1]] = kv[2] }
            r = value["rank"]; messages[r] += value["messages"]; bytes[r] += value["bytes"]
            n = split(value["peer_list"], list, ",")
            for (j = 1; j <= n; j++) if (!((r, list[j]) in seen)) { seen[r, list[j]] = 1; peers[r]++ }
            delete value }
        END { for (r in messages) printf "%d %d %d %d\n", r, messages[r], bytes[r], peers[r] + 0 }' | sort -n
}

# measured NP TYPE [MPIRUN OPTIONS...]: one line a rank, "rank messages bytes peers", from the
# monitoring files of one run of the job (TYPE: float, double or both; SIZE, when set: that one
# call) at NP ranks.
measured() {
    local np=$1 type=$2 dir
    shift 2
    dir=$(mktemp -d)
    local args=()
    [ "$type" = both ] || args=("$type" ${SIZE:+"$SIZE"})
    run_mpi "$np" --mca pml_monitoring_enable 1 --mca pml_monitoring_enable_output 3 \
        --mca pml_monitoring_filename "$dir/prof" "$@" "$program" "${args[@]}" >"$dir/out" 2>&1 ||
        { cat "$dir/out" >&2; rm -rf "$dir"; fail "the job at np=$np $*: $(status_text $?)"; }
    # E lines: "E <rank> <peer> <bytes> bytes <messages> msgs sent ..."
    awk -F'\t' '$1 == "E" { split($4, b, " "); split($5, m, " ");
            messages[$2] += m[1]; bytes[$2] += b[1]; if (m[1] > 0) peers[$2]++ }
        END { for (r in messages) printf "%d %d %d %d\n", r, messages[r], bytes[r], peers[r] }' \
        "$dir"/prof.*.prof | sort -n
    rm -rf "$dir"
}

# compare WHAT MEASURED MODELLED: rank by rank, messages and peers equal, bytes within the
# tolerance; a failure names the first rank that differs.
compare() {
    local what=$1 measured_lines=$2 modelled_lines=$3
    [ "$(wc -l <<<"$measured_lines")" = "$(wc -l <<<"$modelled_lines")" ] ||
        fail "$what: $(wc -l <<<"$measured_lines") ranks counted, $(wc -l <<<"$modelled_lines") modelled"
    local differs
    differs=$(paste -d' ' <(echo "$measured_lines") <(echo "$modelled_lines") | awk -v tolerance=$BYTES_TOLERANCE_PERCENT '{
        d = $3 - $7; if (d < 0) d = -d
        if ($1 != $5 || $2 != $6 || $4 != $8 || d * 100 > $7 * tolerance) {
            printf "rank %d: measured messages/bytes/peers %d %d %d, modelled %d %d %d", $1, $2, $3, $4, $6, $7, $8; exit } }')
    [ -z "$differs" ] || fail "$what: $differs"
    ok "$what: every rank's messages, bytes and peers as modelled (rank 0: $(head -1 <<<"$measured_lines" | cut -d' ' -f2-))"
}

# ---- The model alone ------------------------------------------------------------------------
line=$("$reprod" cost --ranks 32 --bytes 4096 --type float32)
[ "$(field messages "$(grep '^native ' <<<"$line")")" = 10 ] || fail "np=32 4 KiB native: $line"
grep -q '^shim .*route=fixed' <<<"$line" || fail "np=32: not the fixed route: $line"
grep -q '^model: ' <<<"$line" || fail "no line of assumptions: $line"
for np in 2 4; do
    for size in 8 1024 4096 65536 1048576 67108864; do
        for type in float32 float64; do
            line=$("$reprod" cost --ranks $np --bytes $size --type $type | grep '^shim ')
            grep -q 'route=exchange' <<<"$line" || fail "np=$np $size B $type: not the exchange: $line"
        done
    done
done
ok "the exchange at np=2 and 4 for every size (make bench keeps its ratios), the fixed route at 32"

# Targets at 1,024 and 16,384 ranks (issue 19): shim/native time at most 2 for every size, memory
# independent of N. The time target is missed where KNOWN_MISSED says (docs/performance.md, "The
# cost model", says why: two passes of latency, 2.5x the bytes of binary32, 5x of bfloat16, and
# the MPI route's pieces below 32 MiB); each listed cell carries today's figure, and a cell
# that gets 5% worse, or one missed that is not listed, fails.
KNOWN_MISSED="1024:float32:4096:2.02 1024:float32:65536:2.01 1024:float32:1048576:2.18
1024:float32:16777216:2.72 1024:float32:268435456:2.93 1024:float32:1073741824:2.94
1024:float64:4096:2.02 1024:float64:1048576:2.14 1024:float64:16777216:2.61
1024:float64:268435456:2.75 1024:float64:1073741824:2.75 1024:bfloat16:4096:2.94
1024:bfloat16:65536:2.08 1024:bfloat16:1048576:3.00 1024:bfloat16:16777216:5.67
1024:bfloat16:268435456:6.27 1024:bfloat16:1073741824:6.31 16384:float32:4096:2.02
16384:float32:1048576:2.13 16384:float32:16777216:2.74 16384:float32:268435456:3.04
16384:float32:1073741824:3.06 16384:float64:4096:2.02 16384:float64:1048576:2.11
16384:float64:16777216:2.63 16384:float64:268435456:2.84 16384:float64:1073741824:2.86
16384:bfloat16:4096:2.11 16384:bfloat16:65536:2.06 16384:bfloat16:1048576:2.74
16384:bfloat16:16777216:5.63 16384:bfloat16:268435456:6.49 16384:bfloat16:1073741824:6.55"
missed=""
for np in 1024 16384; do
    for type in float32 float64 bfloat16; do
        memory=""
        for size in 8 1024 4096 65536 1048576 16777216 268435456 1073741824; do
            out=$("$reprod" cost --ranks $np --bytes $size --type $type)
            native=$(field time_us "$(grep '^native ' <<<"$out")")
            shim=$(field time_us "$(grep '^shim ' <<<"$out")")
            ratio=$(awk -v s="$shim" -v n="$native" 'BEGIN { printf "%.2f", s / n }')
            if awk -v r="$ratio" 'BEGIN { exit !(r > 2) }'; then
                known=$(tr ' ' '\n' <<<"$KNOWN_MISSED" | sed -n "s/^$np:$type:$size:\(.*\)/\1/p")
                [ -n "$known" ] || fail "np=$np $size B $type: shim/native time $ratio, above 2 and not a known miss"
                awk -v r="$ratio" -v k="$known" 'BEGIN { exit !(r > k * 1.05) }' &&
                    fail "np=$np $size B $type: shim/native time $ratio, worse than the known $known"
                missed="$missed $np:$type:$size:$ratio"
            fi
        done
        for size in 8 65536 1073741824; do
            m1=$(field memory "$("$reprod" cost --ranks 1024 --bytes $size --type $type | grep '^shim ')")
            m2=$(field memory "$("$reprod" cost --ranks 16384 --bytes $size --type $type | grep '^shim ')")
            [ "$m1" = "$m2" ] || fail "$size B $type: shim memory $m1 at 1,024 ranks, $m2 at 16,384"
        done
    done
done
ok "np=1,024 and 16,384: shim memory independent of N; shim/native time at most 2 but for the known misses"
echo "target missed (shim/native time above 2, issue 19; np:type:bytes:ratio):$missed"

# Bad arguments: exit 2, the option named. Each case: OPTION|ARGUMENTS.
while IFS='|' read -r option args; do
    out=$("$reprod" cost $args 2>&1)
    status=$?
    [ $status -eq 2 ] && grep -q -- "$option" <<<"$out" || fail "reprod cost $args: exit $status, '$out' (no $option)"
done <<'CASES'
--ranks|--ranks 0 --bytes 8 --type float32
--ranks|--ranks 4x --bytes 8 --type float32
--bytes|--ranks 4 --bytes 6 --type float64
--bytes|--ranks 4 --bytes 8x --type float32
--type|--ranks 4 --bytes 8 --type float128
--type|--ranks 4 --bytes 8
--inter-gbps|--ranks 4 --bytes 8 --type float32 --inter-gbps -1
--route|--ranks 4 --bytes 8 --type float32 --route sideways
--words|--ranks 4 --bytes 8 --type float32 --words 0
--colour|--ranks 4 --bytes 8 --type float32 --colour red
--library|--ranks 4 --bytes 8 --type float32 --library gloo
--fixed-ns|--ranks 4 --bytes 8 --type float32 --fixed-ns 0
--engine-ns|--ranks 4 --bytes 8 --type float32 --engine-ns x
CASES
ok "bad arguments refused (exit 2), each naming its option"

# --fixed-ns prices the fixed route's conversion (host buffers): at 1,024 ranks a 1 MiB float32
# call is 262,144 elements of one word, so 2.3 ns an element and word instead of 0.05 adds
# 262,144 x 2.25 ns = 589.824 us to the shim's time and nothing to native's.
gpu=$("$reprod" cost --ranks 1024 --bytes 1M --type float32)
host=$("$reprod" cost --ranks 1024 --bytes 1M --type float32 --fixed-ns 2.3)
[ "$(field time_us "$(grep '^native ' <<<"$gpu")")" = "$(field time_us "$(grep '^native ' <<<"$host")")" ] ||
    fail "--fixed-ns changed native's time: $gpu / $host"
awk -v a="$(field time_us "$(grep '^shim ' <<<"$gpu")")" -v b="$(field time_us "$(grep '^shim ' <<<"$host")")" \
    'BEGIN { d = b - a - 589.824; exit !(d > -0.01 && d < 0.01) }' ||
    fail "--fixed-ns 2.3: the shim's time should grow by 589.824 us: $gpu / $host"
ok "--fixed-ns prices the fixed route's conversion, and only the shim's"

# ---- Measured: Open MPI's pml monitoring at np=16 and np=32 ---------------------------------
ompi_info --param pml monitoring --level 9 2>/dev/null | grep -q pml_monitoring_enable ||
    skip "Open MPI without its pml monitoring component"
compare "np=24 native, float (a non-power of two)" "$(measured 24 float)" "$(model 24 native auto float32)"
for np in 16 32; do
    compare "np=$np native" "$(measured $np both)" "$(model $np native auto "float32 float64")"
    compare "np=$np shim, REPROD_ROUTE=exchange" \
        "$(measured $np both -x LD_PRELOAD="$PRELOAD" -x REPROD_ROUTE=exchange)" "$(model $np shim exchange "float32 float64")"
done
if grep -q reprod_route_choose hooks/mpi/*.c 2>/dev/null; then
    for np in 16 32; do
        compare "np=$np shim, its own route" "$(measured $np both -x LD_PRELOAD="$PRELOAD")" \
            "$(model $np shim auto "float32 float64")"
    done
else
    skip "the MPI hooks take no route but the exchange yet (issue 19's fixed route not merged)"
fi

# A size where Open MPI's decision degenerates: at 32 ranks it runs a ring for totals below 128
# bytes (20 floats' 40 bytes of codes: 62 messages) and Rabenseifner falls back to a linear
# reduce below 32 elements (their 20 words: 31 messages to rank 0, 31 peers). The route hands it
# padded counts (cost.h): O(log N) messages and peers, each rank as modelled.
lines=$(SIZE=80 measured 32 float -x LD_PRELOAD="$PRELOAD")
compare "np=32 shim, its own route, 80 B of float (padded out of ring and linear)" "$lines" \
    "$(model 32 shim auto float32 80)"
most=$(awk '$2 > m { m = $2 } $4 > p { p = $4 } END { print m + 0, p + 0 }' <<<"$lines")
[ "${most% *}" -le 24 ] && [ "${most#* }" -le 7 ] ||
    fail "np=32, 80 B of float: $most messages and peers at most, above 2 (2 log2 N + 2) and log2 N + 2"
ok "np=32, 80 B of float: at most $most messages and peers a rank (O(log N))"
