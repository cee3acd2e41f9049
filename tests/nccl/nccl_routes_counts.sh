#!/usr/bin/env bash
# What each rank of an exact NCCL all-reduce would send under real NCCL, counted by the stand-in's
# model of NCCL's ring and tree (tests/standins_nccl/nccl_model.c, NCCL_STANDIN_COUNTS), at 32
# ranks: on the fixed route (two of NCCL's own collectives) at most 2x native + 4 messages and 2x
# native + 2 peers per rank; the exchange talks to all N-1 peers above 64 KiB. The model itself
# is pinned: a ring's 2(N-1) messages to two neighbours, a tree's parent and two children.
. tests/lib.sh

nccl_program routes 90

BIG=32
if sanitized; then BIG=16; fi

# counts NAME NP ARGS...: run `routes count` with NCCL_STANDIN_COUNTS; "$out/NAME" holds one line a
# rank, sorted by rank: "RANK MESSAGES BYTES PEERS".
counts() {
    local name=$1 np=$2
    shift 2
    mkdir -p "$out/c.$name"
    run_mpi "$np" -x LD_LIBRARY_PATH -x NCCL_STANDIN_COUNTS="$out/c.$name" "$@" >"$out/log.$name" 2>&1 ||
        fail "$name: $(head -c 2000 "$out/log.$name")"
    cat "$out/c.$name"/counts.* | awk '{print $2, $6, $8, $10}' | sort -n >"$out/$name"
    [ "$(wc -l <"$out/$name")" -eq "$np" ] || fail "$name: counts of $(wc -l <"$out/$name") ranks, not $np"
}

# Messages and peers, per rank, natively and under the shim: 8 B and 1 MiB of float32 on the
# ring, 8 B on the tree.
for run in "Ring 2 fixed" "Ring 262144 fixed exchange" "Tree 2 fixed"; do
    set -- $run
    algo=$1 elements=$2
    shift 2
    args=(-x NCCL_ALGO=$algo "$program" count $elements)
    counts native.$algo.$elements $BIG "${args[@]}"
    for route in "$@"; do
        counts $route.$algo.$elements $BIG -x LD_PRELOAD="$PRELOAD" -x REPROD_ROUTE=$route "${args[@]}"
    done
    if [ $algo = Ring ]; then
        awk -v n=$BIG '$2 != 2 * (n - 1) || $4 != 2 { exit 1 }' "$out/native.$algo.$elements" ||
            fail "the stand-in's ring model: $(head -3 "$out/native.$algo.$elements")"
    else
        awk '$2 > 3 || $4 > 3 { exit 1 }' "$out/native.$algo.$elements" ||
            fail "the stand-in's tree model: $(head -3 "$out/native.$algo.$elements")"
    fi
    paste -d' ' "$out/native.$algo.$elements" "$out/fixed.$algo.$elements" |
        awk '$6 > 2 * $2 + 4 || $8 > 2 * $4 + 2 { print; exit 1 }' >"$out/bad" ||
        fail "np=$BIG $algo $elements floats, fixed route: rank, native messages bytes peers, shim's: $(cat "$out/bad")"
    line() { awk '$1 == 1 {print $2 "/" $4 "/" $3}' "$out/$1.$algo.$elements"; }
    summary="native $(line native), fixed $(line fixed)"
    if [ -f "$out/exchange.$algo.$elements" ]; then
        awk -v n=$BIG '$4 != n - 1 { exit 1 }' "$out/exchange.$algo.$elements" ||
            fail "np=$BIG: the exchange's peers are not N-1: $(head -3 "$out/exchange.$algo.$elements")"
        summary="$summary, exchange $(line exchange)"
    fi
    ok "np=$BIG $algo $((elements * 4)) B, messages/peers/bytes of rank 1: $summary"
done

# narrow TYPE SCENARIO ELEMENTS RATIO WORDS: 1 MiB of TYPE of similar magnitudes (routes SCENARIO
# ELEMENTS) on the ring, natively and on the fixed route: the shim's bytes RATIO x native's
# (within 1%), the model's figure, messages and peers as above; every 997th element of the
# result as MPFR rounds the exact sum. WORDS says what the route takes, for the log.
narrow() {
    local type=$1 scenario=$2 elements=$3 ratio=$4 words=$5
    local args=(-x NCCL_ALGO=Ring "$program" "$scenario" "$elements")
    counts native.$type $BIG "${args[@]}"
    counts fixed.$type $BIG -x LD_PRELOAD="$PRELOAD" -x REPROD_ROUTE=fixed "${args[@]}" --exact
    paste -d' ' "$out/native.$type" "$out/fixed.$type" |
        awk -v r="$ratio" '$7 > 1.005 * r * $3 || $7 < 0.995 * r * $3 || $6 > 2 * $2 + 4 || $8 > 2 * $4 + 2 { print; exit 1 }' >"$out/bad" ||
        fail "np=$BIG 1 MiB of $type, fixed route, not ${ratio}x: rank, native messages bytes peers, shim's: $(cat "$out/bad")"
    # The cost model prices the same words: its shim/native bytes (NCCL's tree there) as measured.
    local model measured
    model=$("$BUILD/reprod" cost --ranks $BIG --bytes 1M --type "$type" --library nccl --route fixed |
        awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^bytes=/) b[$1] = substr($i, 7) }
             END { printf "%.3f", b["shim"] / b["native"] }')
    measured=$(paste -d' ' "$out/native.$type" "$out/fixed.$type" | awk '$1 == 1 { printf "%.3f", $7 / $3 }')
    [ "$model" = "$measured" ] || fail "1 MiB of $type at np=$BIG: the model's shim/native bytes $model, measured $measured"
    ok "np=$BIG Ring 1 MiB of $type, messages/peers/bytes of rank 1: native $(awk '$1 == 1 {print $2 "/" $4 "/" $3}' "$out/native.$type"), fixed $(awk '$1 == 1 {print $2 "/" $4 "/" $3}' "$out/fixed.$type") ($words; shim/native bytes $measured, the model's $model)"
}

# bfloat16 within 4 binades: one int32 word an element (the narrow words, W = 31 -
# ceil(log2 N)), so a rank moves 2 bytes of codes (a 16-bit type's lo is its element's) and 4 of
# words an element where native moves 2: 3x native's bytes (int64 words would be 5x).
narrow bfloat16 count16 524288 3 "one int32 word an element"
# binary64 within 4 binades: two int64 words an element (60 bits past W = 58) or three narrow
# ones (26 bits each), 12 bytes instead of 16: 1 1/8 bytes of codes (a lo a block of 8) + 12
# where native moves 8, 1.640625x (int64 words would be 2.14x; codes of 2 bytes an element
# 1.75x).
narrow float64 count64 131072 1.640625 "three int32 words an element"

# Each element takes its own words (the per-element layout), so a few far-apart elements cost
# their own words only. apart TYPE SIMILAR FAR ELEMENTS EXTRA WHAT: the bytes of ELEMENTS of
# scenario FAR must be those of SIMILAR plus EXTRA words' bytes through the ring, EXTRA x 2 (N -
# 1) / N (within 10%; a piece's widest element for all of them, the stride layout, would add a
# MiB and more), in as many messages; FAR's far-apart elements, and every 997th, as MPFR rounds
# them (the scenario checks).
args=(-x NCCL_ALGO=Ring -x REPROD_SCRATCH_MB=1 -x LD_PRELOAD="$PRELOAD" -x REPROD_ROUTE=fixed "$program")
apart() {
    local type=$1 similar=$2 far=$3 elements=$4 extra=$5 what=$6
    counts similar.$type $BIG "${args[@]}" "$similar" "$elements" --exact
    counts far.$type $BIG "${args[@]}" "$far" "$elements"
    paste -d' ' "$out/similar.$type" "$out/far.$type" |
        awk -v n=$BIG -v e="$extra" 'BEGIN { extra = 2 * (n - 1) / n * e }
            $7 - $3 < 0.9 * extra || $7 - $3 > 1.1 * extra || $6 != $2 { print; exit 1 }' >"$out/bad" ||
        fail "np=$BIG $elements elements of $type, $what: rank, similar data's messages bytes peers, with them: $(cat "$out/bad")"
    ok "np=$BIG $elements elements of $type, $what: every one of them as MPFR rounds it, rank 1's bytes $(awk '$1 == 1 {print $3}' "$out/similar.$type") -> $(awk '$1 == 1 {print $3}' "$out/far.$type") (the words they add only)"
}
# REPROD_SCRATCH_MB=1 cuts 2 MiB of bfloat16 into pieces of 208,768 elements; the odd ranks'
# elements 2^19 .. 2^19 + 63, in the third piece, are 2^40 smaller than the even ranks': each of
# those 64 takes two narrow words, every other element one.
apart bfloat16 count16 switch16 1048576 $((64 * 4)) "64 far apart in pieces"
# binary32's similar elements (27 bits) take one int64 word at 32 ranks (two narrow ones would
# take as many bytes) and one narrow word of 27 bits at 16 (the sanitized run's); every 1,024th
# element of the odd ranks is 2^60 smaller: 256 of 262,144 take 87 bits, and so do the 7 others
# of each one's block of codes (a binary32 lo covers 8 elements): 2,048 elements of two int64
# words (8 bytes more) or four narrow ones (12 more).
apart float32 count32 sparse32 262144 $((256 * 8 * (BIG > 16 ? 8 : 12))) "256 far apart, in 256 blocks of codes"
