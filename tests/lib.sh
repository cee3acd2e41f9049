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

# use_standins: NCCL test programs find the host-memory stand-ins of libcuda, libcudart and
# libnccl (build/standins/); mpirun passes the path on with -x LD_LIBRARY_PATH.
use_standins() {
    export LD_LIBRARY_PATH=$BUILD/standins${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
}

# derive POLICY RANK WIDTH SEED (or "-": one "POLICY RANK WIDTH SEED" a line on stdin): the seed
# the shim must hand the real function, computed without the shim from docs/seeding.md's formula
# (tests/seed/seed_reference.py): what the seeding tests compare with.
derive() {
    "$PYTHON" -S "$ROOT/tests/seed/seed_reference.py" "$@"
}

# with_host_name NAME [VAR=VALUE...] PROGRAM ARGS...: run PROGRAM under the shim with gethostname
# answering NAME (tests/standins/gethostname.c, preloaded before the shim), bounded in time.
with_host_name() {
    local name=$1 standin=$BUILD/tests/standins/libgethostname.so
    shift
    [ -f "$standin" ] || fail "$standin is not built"
    timeout -k 2 20 env FAKE_HOSTNAME="$name" LD_PRELOAD="${PRELOAD_FIRST:+$PRELOAD_FIRST:}$standin:$SHIM" "$@"
}

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

ok() {
    echo "ok: $*"
}

# mpirun NP ARGS...: a local Open MPI job of NP ranks (oversubscribed: CI has 2 cores), bounded in time
# so that a hang fails the test instead of the suite.
run_mpi() {
    local np=$1
    shift
    timeout -k 5 "${MPI_TIMEOUT:-120}" mpirun.openmpi --oversubscribe --bind-to none -np "$np" "$@"
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

# run_mpich NP ARGS...: a local MPICH job of NP ranks (Hydra; -env NAME VALUE sets a variable in
# every rank), bounded in time like run_mpi.
run_mpich() {
    local np=$1
    shift
    timeout -k 5 "${MPI_TIMEOUT:-120}" mpirun.mpich -np "$np" "$@"
}

# run_mpich_shim NP ARGS...: the same, with the shim preloaded into every rank.
run_mpich_shim() {
    local np=$1
    shift
    run_mpich "$np" -env LD_PRELOAD "$PRELOAD" "$@"
}

# setuid_copies PROGRAM: a new directory, $SETUID_DIR (the caller removes it), readable by
# all, holding the shim and two copies of PROGRAM: "setuid", owned by nobody with the setuid
# bit (run by root, it runs with AT_SECURE=1; the loader then ignores LD_PRELOAD, so PROGRAM
# must load the shim with dlopen), and "plain". Only root can make them.
setuid_copies() {
    SETUID_DIR=$(mktemp -d)
    chmod 755 "$SETUID_DIR"
    cp "$SHIM" "$SETUID_DIR/libreprod_shim.so"
    chmod 644 "$SETUID_DIR/libreprod_shim.so"
    cp "$1" "$SETUID_DIR/setuid"
    cp "$1" "$SETUID_DIR/plain"
    chown nobody "$SETUID_DIR/setuid" && chmod 4755 "$SETUID_DIR/setuid" ||
        fail "cannot make a setuid copy of $1"
}

# skip_setuid_if_sanitized: end a script's setuid part (exit 0 with a note) when the shim under
# test is instrumented: a setuid process ignores LD_PRELOAD, so the sanitizer's runtime cannot
# come first there.
skip_setuid_if_sanitized() {
    if sanitized; then
        echo "note: an instrumented shim cannot be loaded into a setuid process (the loader ignores"
        echo "      LD_PRELOAD there, and the sanitizer's runtime must come first): skipped"
        exit 0
    fi
}
