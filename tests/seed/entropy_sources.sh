#!/usr/bin/env bash
# REPROD_ENTROPY on every route a C program takes to the OS's entropy (hooks/seeding/entropy.c):
# getrandom, getentropy, arc4random*, open/openat/fopen/fdopen of /dev/urandom and
# /dev/random and reads through dup, F_DUPFD, readv, pread and fileno; fork children and
# threads. Each route repeats over runs with the same value and differs with another value and
# without. Regular files are never served from the stream, not even on a descriptor number
# that was /dev/urandom until closed behind the shim's back. REPROD_ENTROPY is refused in a
# setuid process and ignored under REPROD_MODE=off.
. tests/lib.sh

unset RANK OMPI_COMM_WORLD_RANK PMI_RANK PMIX_RANK SLURM_PROCID
PROBE=$BUILD/tests/progs/entropy_probe
[ -x "$PROBE" ] || fail "$PROBE is not built"
[ -f "$SHIM" ] || fail "$SHIM is not built"

probe() { env LD_PRELOAD="$PRELOAD" "$@" "$PROBE" all 2>/dev/null; }

first=$(probe REPROD_ENTROPY=7) || fail "entropy_probe failed under the shim"
second=$(probe REPROD_ENTROPY=7)
other=$(probe REPROD_ENTROPY=8)
free=$(probe)
native=$("$PROBE" all)
[ "$(echo "$first" | wc -l)" -eq 20 ] || fail "entropy_probe printed: $first"
[ "$first" = "$second" ] ||
    fail "REPROD_ENTROPY=7, two runs differ: $(diff <(echo "$first") <(echo "$second"))"
# Every line (route) must differ from the runs with another value, without, and natively.
for against in other free native; do
    same=$(comm -12 <(echo "$first" | sort) <(echo "${!against}" | sort) |
        grep -v '^arc4random_uniform' || true)
    [ -z "$same" ] || fail "these routes are not pinned (same as the '$against' run): $same"
done
ok "every route repeats with REPROD_ENTROPY=7 and differs with 8, without it and natively"

lines() { echo "$first" | sed -n "s/^$1: //p"; }
[ "$(lines 'fork child 1')" != "$(lines 'fork child 2')" ] || fail "two fork children share a stream"
[ "$(lines 'fork child 1')" != "$(lines 'fork parent')" ] || fail "fork child and parent share a stream"
[ "$(lines 'fork child 1')" != "$(lines 'getrandom')" ] || fail "a fork child restarts its parent's stream"
distinct=$(echo "$first" | sed 's/^[^:]*: //' | grep -v '^[0-9]*$' | sort | uniq -d)
[ -z "$distinct" ] || fail "two routes returned the same bytes: $distinct"
ok "fork children (first, second) and the parent draw different streams; no route repeats another"

# Regular files: unchanged, also on a descriptor number reused after a close the shim missed.
file=$BUILD/entropy_sources.data
printf 'regular file bytes, not entropy' >"$file"
expected=$("$PROBE" files "$file")
got=$(REPROD_ENTROPY=7 LD_PRELOAD="$PRELOAD" "$PROBE" files "$file" 2>/dev/null)
rm -f "$file"
[ "$got" = "$expected" ] || fail "reading a regular file under REPROD_ENTROPY: '$got' vs '$expected'"
echo "$got" | grep -q "^note:" && fail "the test did not get the descriptor number reused: $got"
ok "regular files read unchanged, also on a reused descriptor of /dev/urandom"

# REPROD_MODE=off: the shim changes nothing, and says that REPROD_ENTROPY is ignored.
modeoff=$(REPROD_MODE=off REPROD_ENTROPY=7 LD_PRELOAD="$PRELOAD" "$PROBE" all 2>"$BUILD/entropy_sources.err")
grep -q "REPROD_ENTROPY=7 ignored: REPROD_MODE=off" "$BUILD/entropy_sources.err" ||
    fail "REPROD_MODE=off with REPROD_ENTROPY: no message: $(cat "$BUILD/entropy_sources.err")"
[ -z "$(comm -12 <(echo "$first" | sort) <(echo "$modeoff" | sort) | grep -v '^arc4random_uniform')" ] ||
    fail "REPROD_MODE=off: entropy still pinned"
rm -f "$BUILD/entropy_sources.err"
ok "REPROD_MODE=off: REPROD_ENTROPY ignored, with a message"

# Secure execution: a setuid copy of the probe (owned by nobody, run by root: AT_SECURE=1).
# LD_PRELOAD is ignored there by the loader, so the probe loads the shim with dlopen.
if [ "$(id -u)" != 0 ]; then
    skip "the secure-execution part: not root, so no setuid-to-another-user copy can be made"
fi
skip_setuid_if_sanitized
setuid_copies "$PROBE"
work=$SETUID_DIR
trap 'rm -rf "$work"' EXIT
secure1=$(REPROD_ENTROPY=7 "$work/setuid" dlopen "$work/libreprod_shim.so" 2>"$work/err")
secure2=$(REPROD_ENTROPY=7 "$work/setuid" dlopen "$work/libreprod_shim.so" 2>/dev/null)
if ! echo "$secure1" | grep -q "^secure: 1"; then
    skip "the secure-execution part: a setuid binary does not run with AT_SECURE here (nosuid mount?)"
fi
grep -q "REPROD_ENTROPY=7 refused: this is a setuid or secure-execution process" "$work/err" ||
    fail "setuid process: no refusal message: $(cat "$work/err")"
[ "$secure1" != "$secure2" ] || fail "setuid process: REPROD_ENTROPY was applied: $secure1"
plain1=$(REPROD_ENTROPY=7 "$work/plain" dlopen "$work/libreprod_shim.so" 2>/dev/null)
plain2=$(REPROD_ENTROPY=7 "$work/plain" dlopen "$work/libreprod_shim.so" 2>/dev/null)
[ "$plain1" = "$plain2" ] || fail "the same probe, not setuid, is not pinned: $plain1 / $plain2"
ok "a setuid process refuses REPROD_ENTROPY with a message (the same probe without setuid pins)"
