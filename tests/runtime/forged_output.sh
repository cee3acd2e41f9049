#!/usr/bin/env bash
# Values that try to forge output: a newline, a carriage return, escape codes and the text of
# a counts: line inside every setting that reaches a message (REPROD_TRACE, REPROD_LOG, the
# host name of %h, unknown REPROD_* names, bad values that stop the process), and inside trace
# files and directory names given to `reprod diff`. Every message stays one line without a raw
# control byte, `reprod doctor` counts only the lines the shim wrote, and `reprod diff` refuses
# a trace line that is not a record the shim writes and never prints a control byte.
. tests/lib.sh

PROBE=$BUILD/tests/progs/lifecycle_probe
reprod=$BUILD/reprod
[ -x "$PROBE" ] || fail "$PROBE is not built"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
forged=$'reprod[0]: counts: pid=1 exact=7 MPI.made=7'
esc=$'\e'

# clean FILE WHAT [PREFIX]: every line of FILE is a line of the shim's (it starts with PREFIX,
# "reprod[0]: " unless given), none is a forged counts line, and no control byte but the newline
# is there.
clean() {
    local file=$1 what=$2 prefix=${3:-reprod[0]: }
    ! LC_ALL=C grep -q $'[\x01-\x09\x0b-\x1f\x7f]' "$file" ||
        fail "$what: a raw control byte in: $(od -c "$file" | head -20)"
    local line
    while IFS= read -r line; do
        [[ "$line" == "$prefix"* ]] || fail "$what: a line that is not the shim's: $line"
    done <"$file"
    ! grep -q "^reprod\[0\]: counts: pid=1 " "$file" || fail "$what: a forged counts line: $(cat "$file")"
}
probe() { # probe NAME=VALUE...: the probe (one seeding call) under the shim, stderr in $dir/err
    bounded 20 env "$@" LD_PRELOAD="$PRELOAD" "$PROBE" calls >/dev/null 2>"$dir/err"
}

# --- reprod doctor: the issue's REPROD_TRACE, and the same forged line after a blank or a CR.
for value in $'/proc/none\n'"$forged" "/proc/none $forged" $'/proc/none\r'"$forged" \
    $'/proc/none\e[2K\r'"$forged"; do
    "$reprod" doctor -- env REPROD_TRACE="$value" "$PROBE" calls >"$dir/doctor" 2>&1
    status=$?
    grep -q "^processes that reported: 1$" "$dir/doctor" &&
        grep -q "^MPI: 0 calls made deterministic, 0 passed through$" "$dir/doctor" &&
        grep -q "^seeding: 1 seeding calls re-derived$" "$dir/doctor" &&
        ! grep -q "every float reduction reached was made deterministic" "$dir/doctor" ||
        fail "doctor fooled by REPROD_TRACE=$(printf %q "$value") (exit $status): $(cat "$dir/doctor")"
done
ok "doctor counts only the shim's lines whatever REPROD_TRACE holds: $(grep verdict "$dir/doctor")"

# --- messages: REPROD_TRACE and REPROD_LOG values in the warnings about them.
probe REPROD_TRACE=$'/proc/none\e[2J\e[31m\n'"$forged" REPROD_VERBOSE=1
clean "$dir/err" "REPROD_TRACE's warning"
grep -q 'REPROD_TRACE: cannot use the directory /proc/none\\x1b\[2J\\x1b\[31m\\nreprod\[0\]: counts: pid=1 exact=7' "$dir/err" ||
    fail "REPROD_TRACE's value is not shown escaped: $(cat "$dir/err")"
ok "REPROD_TRACE in a warning: $(grep -F 'REPROD_TRACE' "$dir/err" | cut -c1-110)..."
probe REPROD_LOG=$'/proc/none/\e]0;title\a\r\n'"$forged" REPROD_VERBOSE=1
clean "$dir/err" "REPROD_LOG's warning"
grep -q 'REPROD_LOG: cannot use /proc/none/\\x1b\]0;title\\x07\\r\\nreprod\[0\]: counts' "$dir/err" ||
    fail "REPROD_LOG's value is not shown escaped: $(cat "$dir/err")"
ok "REPROD_LOG in a warning: $(grep -F 'REPROD_LOG' "$dir/err" | cut -c1-100)..."

# The host name of %h (a stand-in for gethostname preloaded before the shim).
with_host_name $'node\e[8m\n'"$forged" REPROD_LOG=/proc/none/%h.log REPROD_VERBOSE=1 \
    "$PROBE" calls >/dev/null 2>"$dir/err"
clean "$dir/err" "a host name in REPROD_LOG's warning"
grep -q 'cannot use /proc/none/node\\x1b\[8m\\nreprod\[0\]: counts: pid=1 exact=7 MPI.made=7.log' "$dir/err" ||
    fail "the host name is not shown escaped: $(cat "$dir/err")"
ok "a host name in a warning: escaped"

# --- unknown REPROD_* names: the "did you mean" warning and the one that names none.
probe $'REPROD_MOD\e=1' $'REPROD_X\e]0;pwned\a\nreprod[0]: counts: pid=1' # a name ends at '='
clean "$dir/err" "unknown names" "reprod: "
grep -q '^reprod: warning: unknown variable REPROD_MOD\\x1b; did you mean REPROD_MODE?$' "$dir/err" ||
    fail "the near name is not escaped: $(cat "$dir/err")"
grep -q '^reprod: warning: unknown variable REPROD_X\\x1b\]0;pwned\\x07\\nreprod\[0\]: counts: pid; no known name' "$dir/err" ||
    fail "the far name is not escaped: $(cat "$dir/err")"
[ "$(wc -l <"$dir/err")" -eq 2 ] || fail "not two warnings: $(cat "$dir/err")"
ok "unknown names: $(head -1 "$dir/err")"

# --- a bad value stops the process with one line, whatever the value holds; `reprod run` and
# `reprod settings` say the same.
bad=$'x\e[31m\r\n'"$forged"
for variable in REPROD_MODE REPROD_ROUNDING REPROD_STRICT REPROD_SEED_POLICY REPROD_ENTROPY \
    REPROD_VERBOSE REPROD_SCRATCH_MB REPROD_LOG; do
    value=$bad
    [ $variable = REPROD_LOG ] && value="/tmp/%z$bad"
    probe "$variable=$value"
    status=$?
    [ $status -eq 2 ] || fail "$variable=$(printf %q "$value"): exit status $status"
    clean "$dir/err" "the message about $variable" "reprod: "
    [ "$(wc -l <"$dir/err")" -eq 1 ] || fail "$variable: not one line: $(cat "$dir/err")"
    grep -q "^reprod: $variable=.*x\\\\x1b\[31m\\\\r\\\\nreprod\[0\]: counts: pid=1 exact=7 MPI.made=7 is not valid" "$dir/err" ||
        fail "$variable: the value is not shown escaped: $(cat "$dir/err")"
done
ok "a bad value of every setting stops the process with one line: $(cut -c1-90 "$dir/err")..."
"$reprod" run --mode "$bad" -- true 2>"$dir/err"
[ $? -eq 2 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] || fail "reprod run --mode: $(cat "$dir/err")"
clean "$dir/err" "reprod run's message" "reprod run: "
REPROD_LOG="/tmp/$bad" "$reprod" settings >"$dir/out" 2>&1 || fail "reprod settings: $(cat "$dir/out")"
! LC_ALL=C grep -q $'[\x01-\x09\x0b-\x1f\x7f]' "$dir/out" && grep -q '^REPROD_LOG=/tmp/x\\x1b\[31m' "$dir/out" ||
    fail "reprod settings shows a raw value: $(cat "$dir/out")"
ok "reprod run and reprod settings show the value escaped"

# --- reprod diff: traces of two runs agree; a line changed to hold an escape code, a second
# record behind a carriage return, or no header is refused (status 2); directory names are
# printed escaped.
probe REPROD_TRACE="$dir/a" && probe REPROD_TRACE="$dir/b" || fail "traced probe: $(cat "$dir/err")"
"$reprod" diff "$dir/a" "$dir/b" >"$dir/out" || fail "two runs part: $(cat "$dir/out")"
line=$(grep '^seq=1 api=srand action=seed' "$dir/a/rank0.trace") || fail "no seed record: $(cat "$dir/a/rank0.trace")"
changed() { # changed NAME LINE...: a copy of run a whose rank0.trace holds these lines
    mkdir -p "$dir/$1"
    printf '%s\n' "${@:2}" >"$dir/$1/rank0.trace"
}
changed escape "$(head -1 "$dir/a/rank0.trace")" "${line/api=srand/api=srand$esc[2J$esc[1;1H}"
changed carriage "$(head -1 "$dir/a/rank0.trace")" "$line"$'\r'"${line/in=/in=1}"
changed headless "$line"
for name in escape carriage headless; do
    "$reprod" diff "$dir/a" "$dir/$name" >"$dir/out" 2>&1
    status=$?
    [ $status -eq 2 ] && grep -q "rank0.trace: line [12] is not" "$dir/out" ||
        fail "diff took a changed trace ($name, exit $status): $(cat -v "$dir/out")"
    ! LC_ALL=C grep -q $'[\x01-\x09\x0b-\x1f\x7f]' "$dir/out" || fail "diff printed a control byte: $(cat -v "$dir/out")"
done
ok "diff refuses trace lines that are not the shim's: $(head -1 "$dir/out")"
odd=$dir/$'run\e[31m\nb'
probe REPROD_TRACE="$odd" REPROD_SEED_POLICY=off || fail "traced probe: $(cat "$dir/err")"
"$reprod" diff "$dir/a" "$odd" >"$dir/out" 2>&1
status=$?
[ $status -eq 1 ] && grep -q "the same seed, derived differently" "$dir/out" || fail "diff: $(cat -v "$dir/out")"
! LC_ALL=C grep -q $'[\x01-\x09\x0b-\x1f\x7f]' "$dir/out" && grep -q 'run\\x1b\[31m\\nb: srand seed 7' "$dir/out" ||
    fail "diff printed a directory name raw: $(cat -v "$dir/out")"
said=$(grep 'srand seed' "$dir/out" | tail -1)
empty=$dir/$'\e[2Jempty'
mkdir "$empty"
"$reprod" diff "$dir/a" "$empty" >"$dir/out" 2>&1
[ $? -eq 2 ] && ! LC_ALL=C grep -q $'[\x01-\x09\x0b-\x1f\x7f]' "$dir/out" ||
    fail "diff's error printed a control byte: $(cat -v "$dir/out")"
ok "diff prints directory names escaped: $said"
