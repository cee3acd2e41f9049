#!/usr/bin/env bash
# A bad setting stops the process before main with exit status 2 and one line naming the
# variable; an unknown REPROD_ variable gets a warning naming the nearest known one.
. tests/lib.sh

check_refused() {
    local setting=$1 variable=${1%%=*}
    local err status
    err=$(env "$setting" LD_PRELOAD="$PRELOAD" /bin/echo main-ran 2>&1 >/dev/null)
    status=$?
    [ "$status" -eq 2 ] || fail "$setting: exit status $status, expected 2"
    [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "$setting: more than one line: $err"
    grep -q "$variable" <<<"$err" || fail "$setting: message does not name $variable: $err"
    out=$(env "$setting" LD_PRELOAD="$PRELOAD" /bin/echo main-ran 2>/dev/null)
    [ -z "$out" ] || fail "$setting: main ran before the process stopped"
    ok "$setting refused: $err"
}
check_refused REPROD_MODE=fast
check_refused REPROD_ROUNDING=even
check_refused REPROD_STRICT=2
check_refused REPROD_SEED_POLICY=random
check_refused REPROD_ENTROPY=seven
check_refused REPROD_VERBOSE=9
check_refused REPROD_LOG=/tmp/x.%z

# A value with a space at an end is shown in quotes: unquoted, "REPROD_MODE=exact  is not
# valid" reads as a refusal of "exact".
err=$(REPROD_MODE="exact " LD_PRELOAD="$PRELOAD" /bin/echo main-ran 2>&1 >/dev/null)
grep -qF 'REPROD_MODE="exact " is not valid' <<<"$err" || fail "the trailing space is not shown: $err"
out=$(REPROD_TRACE="/tmp/trace " "$BUILD/reprod" settings) || fail "reprod settings with REPROD_TRACE='/tmp/trace '"
grep -qxF 'REPROD_TRACE="/tmp/trace "' <<<"$out" || fail "reprod settings hides the space: $(grep REPROD_TRACE <<<"$out")"
ok "a trailing space is shown, in quotes: $err"

# Leading zeros, any number of them, as REPROD_ENTROPY takes them: 0064 and 00000064 are 64.
for value in 64 0064 00000064; do
    out=$(REPROD_SCRATCH_MB=$value "$BUILD/reprod" settings 2>&1) || fail "REPROD_SCRATCH_MB=$value refused: $out"
    grep -qx "REPROD_SCRATCH_MB=64" <<<"$out" || fail "REPROD_SCRATCH_MB=$value: $(grep SCRATCH <<<"$out")"
done
check_refused REPROD_SCRATCH_MB=00000000
ok "REPROD_SCRATCH_MB=0064 and 00000064 are both 64; 00000000 is refused"

# Under mpirun the job stops at start too, with status 2 from the ranks.
err=$(run_mpi 2 -x REPROD_MODE=fast -x LD_PRELOAD="$PRELOAD" /bin/echo main-ran 2>&1)
status=$?
[ "$status" -ne 0 ] || fail "mpirun with REPROD_MODE=fast succeeded"
grep -q "REPROD_MODE=fast" <<<"$err" || fail "mpirun: the message does not name the variable: $err"
! grep -q main-ran <<<"$err" || fail "mpirun: main ran despite the bad setting"
ok "under mpirun a bad setting stops the job (status $status)"

# Unknown variable: a warning with the nearest known name; the process still runs.
out=$(REPROD_MOD=exact LD_PRELOAD="$PRELOAD" /bin/echo main-ran 2>&1)
grep -q "unknown variable REPROD_MOD; did you mean REPROD_MODE?" <<<"$out" ||
    fail "no warning for REPROD_MOD: $out"
grep -q main-ran <<<"$out" || fail "REPROD_MOD stopped the process"
ok "unknown variable warned about: $(head -1 <<<"$out")"

# `reprod settings` says the same as the shim, and what it will do.
"$BUILD/reprod" settings >/dev/null || fail "reprod settings failed with no settings"
REPROD_ROUNDING=up "$BUILD/reprod" settings | grep -q "REPROD_ROUNDING=up" ||
    fail "reprod settings does not show REPROD_ROUNDING=up"
REPROD_ROUNDING=sideways "$BUILD/reprod" settings 2>/dev/null && fail "reprod settings accepted a bad value"
ok "reprod settings validates and prints the settings"

# --markdown prints the table alone, whatever the environment holds (README's table is this);
# an unknown argument is named, never ignored.
REPROD_ROUNDING=sideways "$BUILD/reprod" settings --markdown | grep -q '^| `REPROD_ROUNDING` | `nearest`, ' ||
    fail "reprod settings --markdown: no REPROD_ROUNDING row, or it read the environment"
err=$("$BUILD/reprod" settings --markdwon 2>&1 >/dev/null)
status=$?
[ "$status" -eq 2 ] && grep -q "unknown argument '--markdwon'" <<<"$err" ||
    fail "reprod settings --markdwon: status $status, $err"
ok "reprod settings --markdown prints the table; an unknown argument is refused: $(head -1 <<<"$err")"

# The log pattern: %h, %p and %r expand, and the file receives the lines.
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
run_mpi 2 -x LD_PRELOAD="$PRELOAD" -x REPROD_VERBOSE=1 -x REPROD_LOG="$dir/log.%h.%r.%p" \
    "$BUILD/tests/mpi/exactness" >/dev/null 2>"$dir/stderr" || fail "exactness under the shim failed: $(cat "$dir/stderr")"
files=$(ls "$dir" | grep -c "^log\.$(hostname)\.[01]\.[0-9]*$")
[ "$files" -eq 2 ] || fail "expected one log file per rank, got: $(ls "$dir")"
grep -q "summary:" "$dir"/log.* || fail "the log files have no summary line"
! grep -q "summary:" "$dir/stderr" || fail "the summary went to stderr despite REPROD_LOG"
ok "REPROD_LOG expands %h %r %p, one file per rank"

# REPROD_ENTROPY is a decimal or 0x hexadecimal number and nothing else: no sign, no blanks.
check_refused REPROD_ENTROPY=+5
check_refused "REPROD_ENTROPY= 5"
check_refused "REPROD_ENTROPY=5 "
check_refused REPROD_ENTROPY=0x

# An unknown name too far from every known one (here longer than 63 characters) says so.
long=REPROD_$(printf 'X%.0s' $(seq 70))
out=$(env "$long=1" LD_PRELOAD="$PRELOAD" /bin/echo main-ran 2>&1)
grep -q "unknown variable $long; no known name is close (known: REPROD_MODE," <<<"$out" ||
    fail "no proper warning for a 77-character unknown name: $out"
! grep -q "(null)" <<<"$out" || fail "the warning names (null): $out"
ok "an unknown name that is close to none: $(head -c 100 <<<"$out")..."

# A log that cannot be used falls back to stderr with one warning: a missing directory, a
# FIFO (opening it must not block, with or without a reader), a symbolic link (its target is
# not written). /dev/null is a fine log. An existing log is appended to, never truncated.
PROBE=$BUILD/tests/progs/lifecycle_probe
logged() { # logged LOG: a seeding call logged at REPROD_VERBOSE=2 to LOG; stderr in $dir/err
    bounded 10 env REPROD_VERBOSE=2 REPROD_LOG="$1" LD_PRELOAD="$PRELOAD" "$PROBE" calls \
        >/dev/null 2>"$dir/err"
}
check_log_refused() { # check_log_refused LOG WHY
    logged "$1"
    status=$?
    [ "$status" -eq 0 ] || fail "REPROD_LOG=$1 ($2): $(status_text "$status" 10) (blocked?): $(cat "$dir/err")"
    [ "$(grep -c 'warning: REPROD_LOG' "$dir/err")" -eq 1 ] ||
        fail "REPROD_LOG=$1 ($2): not one warning: $(cat "$dir/err")"
    grep -q "seed: srand 7" "$dir/err" || fail "REPROD_LOG=$1 ($2): messages lost: $(cat "$dir/err")"
    ok "REPROD_LOG $2: $(grep 'warning: REPROD_LOG' "$dir/err")"
}
check_log_refused "$dir/missing/log" "in a missing directory"
mkfifo "$dir/fifo"
check_log_refused "$dir/fifo" "a FIFO without a reader"
timeout "$(limit 20)" cat "$dir/fifo" >"$dir/fifo.read" &
reader=$!
check_log_refused "$dir/fifo" "a FIFO with a reader"
kill "$reader" 2>/dev/null
wait "$reader" 2>/dev/null
[ ! -s "$dir/fifo.read" ] || fail "the log was written into a FIFO: $(cat "$dir/fifo.read")"
echo "not a log" >"$dir/victim"
ln -s "$dir/victim" "$dir/link"
check_log_refused "$dir/link" "a symbolic link"
[ "$(cat "$dir/victim")" = "not a log" ] || fail "the symbolic link's target was written: $(cat "$dir/victim")"
logged /dev/null || fail "REPROD_LOG=/dev/null failed: $(cat "$dir/err")"
[ ! -s "$dir/err" ] || fail "REPROD_LOG=/dev/null: $(cat "$dir/err")"
echo "an earlier line" >"$dir/existing"
logged "$dir/existing" || fail "REPROD_LOG on an existing file failed: $(cat "$dir/err")"
[ "$(head -1 "$dir/existing")" = "an earlier line" ] && grep -q "seed: srand 7" "$dir/existing" ||
    fail "an existing log was not appended to: $(cat "$dir/existing")"
ok "REPROD_LOG=/dev/null is quiet; an existing log is appended to"
