#!/usr/bin/env bash
# `reprod plan`: the arithmetic (G / W per device, G / (W * M) accumulation steps), the world
# sizes that cannot keep G marked (exit 1), and the truth about accumulation: when the number
# of micro-batches per rank changes with W, plan says the rank's own sum escapes the shim and
# what to do; when it does not (one micro-batch per rank), no caution.
. tests/lib.sh
reprod=$BUILD/reprod

out=$("$reprod" plan --global-batch 256 --micro-batch 8 --world-sizes 1,2,4,8)
[ $? -eq 0 ] || fail "plan 256/8 on 1,2,4,8 exited non-zero: $out"
for row in "1 256 32" "2 128 16" "4 64 8" "8 32 4"; do
    grep -qE "^ +${row// / +}$" <<<"$out" || fail "plan: no row '$row': $out"
done
grep -q "a rank sums its 4 to 32 micro-batch gradients itself" <<<"$out" || fail "no accumulation caution: $out"
grep -q "all-reduces each micro-batch's gradient" <<<"$out" || fail "no remedy: $out"
grep -q "float64" <<<"$out" || fail "no float64 accumulation advice: $out"
ok "plan 256/8 on 1,2,4,8: rows right, accumulation caution given"

out=$("$reprod" plan --global-batch 96 --micro-batch 8 --world-sizes 2,3,5,24)
[ $? -eq 1 ] || fail "plan with impossible world sizes exited $?: $out"
grep -qE "^ +2 +48 +6$" <<<"$out" && grep -qE "^ +3 +32 +4$" <<<"$out" || fail "plan 96/8: $out"
grep -q "5   cannot keep the global batch: 96 is not a multiple of 5" <<<"$out" || fail "W=5 not refused: $out"
grep -q "24   cannot keep the global batch: per-device batch 4 is not a multiple of the micro-batch 8 (96 is not a multiple of 24 x 8)" <<<"$out" ||
    fail "W=24 not refused: $out"
grep -q "World sizes marked above cannot keep the global batch 96" <<<"$out" || fail "no closing line: $out"
ok "plan 96/8: W=5 and W=24 marked, exit 1"

out=$("$reprod" plan --global-batch 64 --micro-batch 8 --world-sizes 8)
[ $? -eq 0 ] && ! grep -q "Caution" <<<"$out" || fail "one micro-batch per rank still cautioned: $out"
"$reprod" plan --global-batch 0 --micro-batch 8 >/dev/null 2>&1
[ $? -eq 2 ] || fail "a zero global batch was accepted"
"$reprod" plan --help | grep -q "^usage: reprod plan" || fail "plan --help"
ok "one micro-batch per rank: no caution; bad arguments exit 2; --help"

# refused OPTION MESSAGE ARGS...: plan ARGS exits 2, saying MESSAGE (naming OPTION), no table.
refused() {
    local option=$1 message=$2
    shift 2
    local out
    out=$("$reprod" plan "$@" 2>&1)
    [ $? -eq 2 ] || fail "plan $*: accepted: $out"
    grep -qF -- "$message" <<<"$out" || fail "plan $*: no '$message': $out"
    grep -qF -- "$option" <<<"$(head -1 <<<"$out")" || fail "plan $*: the first line does not name $option: $out"
    ! grep -q "accumulation steps$" <<<"$out" || fail "plan $*: a table despite the bad value: $out"
}
refused --global-batch "no larger than 9223372036854775807, got 99999999999999999999" \
    --global-batch 99999999999999999999 --micro-batch 8
refused --micro-batch "no larger than" --global-batch 64 --micro-batch 9223372036854775808
refused --world-sizes 'got "": it is empty' --global-batch 64 --micro-batch 8 --world-sizes ""
refused --world-sizes "got 1,,2: an item is empty" --global-batch 64 --micro-batch 8 --world-sizes 1,,2
refused --world-sizes "an item is empty" --global-batch 64 --micro-batch 8 --world-sizes 2,
refused --world-sizes "needs a positive integer, got x" --global-batch 64 --micro-batch 8 --world-sizes 1,x
refused --world-sizes "--world-sizes needs a value" --global-batch 64 --micro-batch 8 --world-sizes
refused --global-batch 'got " 64"' --global-batch " 64" --micro-batch 8
refused --micro-batch "--micro-batch is needed" --global-batch 64
refused --batch "--batch is not an option" --batch 64
ok "too large a number, an empty or partly empty --world-sizes, a missing value or option: refused (2), naming the option"

out=$("$reprod" bogus 2>&1)
[ $? -eq 2 ] && [ "$(head -1 <<<"$out")" = "reprod: bogus is not a command" ] && grep -q "^usage: reprod settings" <<<"$out" ||
    fail "reprod bogus: $out"
ok "reprod bogus: named, then the usage (2)"
