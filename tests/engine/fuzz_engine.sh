#!/usr/bin/env bash
# The engine's fuzzer against MPFR, briefly (a few seconds): the same iterations on every run
# unless FUZZ_SEED or FUZZ_ITERATIONS say otherwise. `make fuzz` runs it for long.
. tests/lib.sh

# The fuzzer built like the shim under test (instrumented too under make test-sanitize).
FUZZER=$(dirname "$SHIM")/tests/fuzz_engine
[ -x "$FUZZER" ] || fail "$FUZZER is not built"
"$FUZZER" "${FUZZ_ITERATIONS:-2000}" "${FUZZ_SEED:-20261201}" ||
    fail "the engine differs from MPFR or from the rank-order loop (the inputs are above)"
ok "the engine fuzzer found nothing"
