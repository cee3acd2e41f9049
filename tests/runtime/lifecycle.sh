#!/usr/bin/env bash
# The shim never hangs its host: a hooked call that re-enters the shim while it initialises
# (the host's getenv, which the shim calls, calling srand, getrandom and open) returns; fork
# children of a process whose threads are resolving symbols (walking the loaded objects) can
# resolve too. A hang shows as a timeout.
. tests/lib.sh

PROBE=$BUILD/tests/progs/lifecycle_probe
[ -x "$PROBE" ] || fail "$PROBE is not built"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# Re-entry during initialisation, with a log file and every call logged (the log's own open
# and write must not re-enter either).
for entropy in "" 7; do
    out=$(bounded 20 env LIFECYCLE_REENTER=1 REPROD_ENTROPY=$entropy REPROD_VERBOSE=2 \
        REPROD_LOG="$dir/log" LD_PRELOAD="$PRELOAD" "$PROBE" calls 2>"$dir/err")
    status=$?
    [ "$status" -ne 124 ] && [ "$status" -ne 137 ] ||
        fail "re-entry during initialisation hangs (REPROD_ENTROPY='$entropy')"
    [ "$status" -eq 0 ] && [ "$out" = "calls: main ran" ] ||
        fail "re-entry during initialisation (REPROD_ENTROPY='$entropy'): status $status, '$out', $(cat "$dir/err")"
    [ "$(grep -c "seed: srand 7" "$dir/log")" -eq 1 ] ||
        fail "not one seeding call logged (main's: those made inside the shim pass straight): $(cat "$dir/log")"
    rm -f "$dir/log"
done
ok "hooked calls that re-enter the shim's initialisation return, unchanged; main runs"

# Fork while other threads walk the loaded objects; every child walks too. Three runs: each
# fork has a good chance to land inside a walk. Not under AddressSanitizer, whose own
# dl_iterate_phdr interceptor and allocator locks make a threaded fork hang without the shim's
# part (the plain build runs it in make test).
if sanitized; then
    skip "fork under resolving threads: not run with a sanitizer runtime"
fi
for run in 1 2 3; do
    out=$(bounded 60 env LD_PRELOAD="$PRELOAD" "$PROBE" fork 2>&1)
    status=$?
    [ "$status" -ne 124 ] && [ "$status" -ne 137 ] || fail "a fork child hangs resolving a symbol (run $run)"
    [ "$status" -eq 0 ] || fail "fork under resolving threads, run $run: $(status_text "$status" 60): $out"
done
ok "fork children of resolving threads resolve and exit: $out"
