# tests/lib.sh: what every test script shares. Source it from the repository root:
#     . tests/lib.sh
# Scripts exit 0 when they pass and print "FAIL: ..." with what differed when they do not; what
# cannot run here says "skipped: REASON" (skip, skip_part below; exit status 77 when nothing ran).

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

# Time limits (a hang fails its test, not the suite) scale with the machine: each limit a script
# names is multiplied by TEST_TIME_SCALE (1 by default; tools/run-sanitize sets 3: the instrumented
# shim is slower) and by the load a core when the script starts (1 to 4): a busy 2-core machine
# waits longer before it calls a slow job hung.
TIME_SCALE_PERCENT=$(awk -v scale="${TEST_TIME_SCALE:-1}" -v cores="$(nproc)" '{
    load = $1 / cores; if (load < 1) load = 1; if (load > 4) load = 4
    printf "%d\n", 100 * scale * load }' /proc/loadavg)

# limit SECONDS: SECONDS, scaled as above.
limit() {
    echo $(($1 * TIME_SCALE_PERCENT / 100))
}

# bounded SECONDS COMMAND...: COMMAND, stopped after SECONDS (scaled) with exit status 124 (137
# when it had to be killed) and the line "timed out after N s: COMMAND" on stderr.
bounded() {
    local seconds
    seconds=$(limit "$1")
    shift
    local status=0
    timeout -k 5 "$seconds" "$@" || status=$?
    local command="$*"
    case $status in
    124 | 137) echo "timed out after $seconds s: ${command:0:200}" >&2 ;;
    esac
    return $status
}

# status_text STATUS [SECONDS]: "exit status STATUS", or "timed out after N s" when STATUS is
# bounded's (SECONDS scaled; by default the MPI jobs' limit, MPI_TIMEOUT or 120).
status_text() {
    case $1 in
    124) echo "timed out after $(limit "${2:-${MPI_TIMEOUT:-120}}") s" ;;
    137) echo "killed (timed out after $(limit "${2:-${MPI_TIMEOUT:-120}}") s, or out of memory)" ;;
    *) echo "exit status $1" ;;
    esac
}

# use_standins: NCCL test programs find the host-memory stand-ins of libcuda, libcudart and
# libnccl (build/standins/); mpirun passes the path on with -x LD_LIBRARY_PATH.
use_standins() {
    export LD_LIBRARY_PATH=$BUILD/standins${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
}

# nccl_program NAME [SECONDS]: an NCCL test's common start: $program, the built
# tests/nccl/NAME (else the test fails), the stand-ins in use, $out a scratch directory removed
# at exit, and MPI_TIMEOUT SECONDS unless set (a script's run_mpi bound).
nccl_program() {
    program=$BUILD/tests/nccl/$1
    [ -x "$program" ] || fail "$program is not built"
    out=$(mktemp -d)
    trap 'rm -rf "$out"' EXIT
    use_standins
    if [ $# -gt 1 ]; then export MPI_TIMEOUT=${MPI_TIMEOUT:-$2}; fi
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
    bounded 20 env FAKE_HOSTNAME="$name" LD_PRELOAD="${PRELOAD_FIRST:+$PRELOAD_FIRST:}$standin:$SHIM" "$@"
}

# Skips: what cannot run here (not root, no torch, no AT_SECURE, a sanitizer in the way) is
# said, never passed in silence. `skip REASON` ends the script: with exit status 77 when no check
# passed before it (the whole script skipped), else with 0 after saying that the rest is skipped;
# `skip_part REASON` goes on with the rest. Both print "skipped: REASON" and add REASON to
# $TEST_SKIP_LOG, where tools/run-tests reads it: the group is counted skipped (in whole or in
# part), not passed, and CI fails on a skip that tests/allowed-skips does not list.
skip_part() {
    echo "skipped: $*"
    [ -z "${TEST_SKIP_LOG:-}" ] || echo "$*" >>"$TEST_SKIP_LOG"
}

skip() {
    [ "$CHECKS_PASSED" -eq 0 ] || { skip_part "the rest: $*" && exit 0; }
    skip_part "$@"
    exit 77
}

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

CHECKS_PASSED=0 # ok lines so far (skip tells a whole skip from a partial one by it)
ok() {
    echo "ok: $*"
    CHECKS_PASSED=$((CHECKS_PASSED + 1))
}

# mpirun NP ARGS...: a local Open MPI job of NP ranks (oversubscribed: CI has 2 cores), bounded in time
# so that a hang fails the test instead of the suite.
run_mpi() {
    local np=$1
    shift
    bounded "${MPI_TIMEOUT:-120}" mpirun.openmpi --oversubscribe --bind-to none -np "$np" "$@"
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
    bounded "${MPI_TIMEOUT:-120}" mpirun.mpich -np "$np" "$@"
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

# skip_setuid_if_sanitized: end a script's setuid part (a skip) when the shim under test is
# instrumented: a setuid process ignores LD_PRELOAD, so the sanitizer's runtime cannot come
# first there.
skip_setuid_if_sanitized() {
    sanitized && skip "an instrumented shim cannot be loaded into a setuid process (the loader" \
        "ignores LD_PRELOAD there, and the sanitizer's runtime must come first)"
    return 0
}
