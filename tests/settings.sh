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
