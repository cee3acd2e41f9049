#!/usr/bin/env bash
# The shim's first calls from several threads at once (seeding, entropy, the engine choosing
# its kernels): every thread computes the same bits, and as many threads compute what one does.
# make test-tsan runs this under ThreadSanitizer.
. tests/lib.sh

PROBE=$BUILD/tests/progs/threads_probe
[ -x "$PROBE" ] || fail "$PROBE is not built"
[ -f "$SHIM" ] || fail "$SHIM is not built"

one=$(LD_PRELOAD="$PRELOAD" "$PROBE" 1) || fail "threads_probe, one thread, under the shim: $one"
many=$(LD_PRELOAD="$PRELOAD" "$PROBE" 8) || fail "threads_probe, 8 threads, under the shim: $many"
[ "$one" = "$many" ] || fail "8 threads computed other bits than one: '$many' vs '$one'"
ok "8 threads starting together compute what one thread does"

pinned=$(REPROD_ENTROPY=7 LD_PRELOAD="$PRELOAD" "$PROBE" 8 2>/dev/null) ||
    fail "threads_probe with REPROD_ENTROPY=7: $pinned"
[ "$pinned" = "$one" ] || fail "REPROD_ENTROPY changed what the threads computed"
ok "the same with the entropy hooks pinned"
