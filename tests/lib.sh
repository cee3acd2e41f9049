# tests/lib.sh: what every test script shares. Source it from the repository root:
#     . tests/lib.sh
# Scripts exit 0 when they pass and print "FAIL: ..." with what differed when they do not.

set -u
ROOT=$(pwd)
BUILD=$ROOT/build
# The shim under test, and what must be preloaded before it. By default the build's shim
# alone; make test-sanitize names an instrumented shim (TEST_SHIM) and the sanitizer's
# runtime (TEST_PRELOAD_FIRST, colon-separated), which must come first in a program that is
# not instrumented itself. (Not REPROD_* names: the shim warns about unknown ones.)
SHIM=${TEST_SHIM:-$ROOT/build/libreprod_shim.so}
PRELOAD_FIRST=${TEST_PRELOAD_FIRST:-}
PRELOAD=${PRELOAD_FIRST:+$PRELOAD_FIRST:}$SHIM # LD_PRELOAD of a process under the shim
PYTHON=/usr/bin/python3 # Debian's, with numpy, torch and mpi4py

# Open MPI refuses root unless told; CI runs as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# No REPROD_* setting of the caller's may leak into a test.
for variable in $(env | sed -n 's/^\(REPROD_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$variable"; done

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

ok() {
    echo "ok: $*"
}

# mpirun NP ARGS...: a local job of NP ranks (oversubscribed: CI has 2 cores), bounded in time
# so that a hang fails the test instead of the suite.
run_mpi() {
    local np=$1
    shift
    timeout -k 5 "${MPI_TIMEOUT:-120}" mpirun --oversubscribe --bind-to none -np "$np" "$@"
}

# run_mpi_shim NP ARGS...: the same, with the shim preloaded into every rank.
run_mpi_shim() {
    local np=$1
    shift
    run_mpi "$np" -x LD_PRELOAD="$PRELOAD" "$@"
}

# with_sanitizer_runtime ARGS...: run ARGS with the sanitizer's runtime preloaded (plainly when
# the shim is not instrumented): for programs that dlopen the shim rather than preload it.
with_sanitizer_runtime() {
    if [ -n "$PRELOAD_FIRST" ]; then
        env LD_PRELOAD="$PRELOAD_FIRST" "$@"
    else
        "$@"
    fi
}

# sanitized: whether the shim under test is an instrumented build (its link-time dependencies
# include the sanitizer's runtime, and a setuid process cannot load it).
sanitized() {
    [ -n "$PRELOAD_FIRST" ]
}
