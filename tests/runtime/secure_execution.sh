#!/usr/bin/env bash
# In a secure-execution process (setuid, setgid, file capabilities: AT_SECURE) no setting may
# name a file: REPROD_LOG and REPROD_TRACE are ignored, each with one line on stderr, and
# messages go to stderr. (REPROD_ENTROPY's refusal is tested in entropy_sources.sh.)
. tests/lib.sh

PROBE=$BUILD/tests/progs/lifecycle_probe
[ -x "$PROBE" ] || fail "$PROBE is not built"
if [ "$(id -u)" != 0 ]; then
    skip "not root: cannot make a setuid-to-another-user copy"
fi
skip_setuid_if_sanitized
# A setuid copy of the probe (owned by nobody, run by root: AT_SECURE=1), which loads the
# shim with dlopen, as a program linked to it would.
setuid_copies "$PROBE"
work=$SETUID_DIR
trap 'rm -rf "$work"' EXIT
mkdir -m 777 "$work/out" # where the setuid process could write, if it listened

run() { # run PROGRAM NAME: the probe, logging a seeding call, with a log and a trace setting
    REPROD_VERBOSE=2 REPROD_LOG="$work/out/$2.log" REPROD_TRACE="$work/out/$2.trace" \
        bounded 20 "$work/$1" dlopen "$work/libreprod_shim.so" 2>"$work/$2.err"
}
out=$(run setuid secure) || fail "the setuid probe failed: $(cat "$work/secure.err")"
if ! grep -q "^secure: 1" <<<"$out"; then
    skip "a setuid binary does not run with AT_SECURE here (nosuid mount?)"
fi
err=$(cat "$work/secure.err")
[ ! -e "$work/out/secure.log" ] || fail "a setuid process wrote REPROD_LOG: $(cat "$work/out/secure.log")"
for variable in REPROD_LOG REPROD_TRACE; do
    [ "$(grep -c "^reprod: $variable ignored: this is a setuid or secure-execution process" <<<"$err")" -eq 1 ] ||
        fail "setuid process: not one line saying $variable is ignored: $err"
done
grep -q "seed: srand 7" <<<"$err" || fail "setuid process: the log line did not go to stderr: $err"
ok "a setuid process ignores REPROD_LOG and REPROD_TRACE, saying so once each; messages go to stderr"

out=$(run plain plain) || fail "the probe failed: $(cat "$work/plain.err")"
grep -q "^secure: 0" <<<"$out" || fail "the plain copy runs with AT_SECURE: $out"
grep -q "seed: srand 7" "$work/out/plain.log" || fail "without setuid REPROD_LOG is not used: $(cat "$work/plain.err")"
! grep -q "ignored" "$work/plain.err" || fail "without setuid a setting was ignored: $(cat "$work/plain.err")"
ok "the same probe without setuid writes REPROD_LOG"
