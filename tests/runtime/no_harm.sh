#!/usr/bin/env bash
# A preloaded shim must not change processes that never use what it intercepts, and must not
# depend at link time on MPI, NCCL, CUDA, cuRAND or PyTorch.
. tests/lib.sh

[ -f "$SHIM" ] || fail "$SHIM is not built"

# Link-time dependencies: libc, libdl, libpthread, libm only (and a sanitizer's runtime in an
# instrumented build).
needed=$(readelf -d "$SHIM" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
for library in $needed; do
    case $library in
    libc.so.* | libdl.so.* | libpthread.so.* | libm.so.* | ld-linux*) ;;
    libasan.so.* | libubsan.so.* | libtsan.so.*) sanitized || fail "the shim needs $library" ;;
    *) fail "the shim needs $library at link time (needs: $needed)" ;;
    esac
done
ok "link-time dependencies: $needed"

# No undefined reference to an MPI, NCCL, CUDA or torch symbol (Open MPI's MPI_FLOAT is the
# address of ompi_mpi_float: a reference would fail to resolve in a process without MPI).
undefined=$(nm -D --undefined-only "$SHIM" | awk '{print $NF}' |
    grep -E '^(P?MPI_|ompi_|opal_|nccl|cuda|cu[A-Z]|curand|_ZN2at|_ZN3c10|torch)' || true)
[ -z "$undefined" ] || fail "the shim refers to symbols of other libraries: $undefined"
ok "no undefined MPI/NCCL/CUDA/torch symbols"

# Processes that never load MPI: same status, same output, nothing on stderr.
expect_unchanged() {
    local description=$1
    shift
    local native_out native_err native_status shim_out shim_err shim_status
    native_out=$("$@" 2>/tmp/reprod_native_err.$$)
    native_status=$?
    shim_out=$(LD_PRELOAD=$PRELOAD "$@" 2>/tmp/reprod_shim_err.$$)
    shim_status=$?
    native_err=$(cat /tmp/reprod_native_err.$$)
    shim_err=$(cat /tmp/reprod_shim_err.$$)
    rm -f /tmp/reprod_native_err.$$ /tmp/reprod_shim_err.$$
    [ "$native_status" = "$shim_status" ] ||
        fail "$description: exit status $shim_status under the shim, $native_status without"
    [ "$native_out" = "$shim_out" ] || fail "$description: stdout differs under the shim"
    [ "$native_err" = "$shim_err" ] ||
        fail "$description: stderr differs under the shim: '$shim_err' vs '$native_err'"
    ok "$description runs unchanged"
}
expect_unchanged "/bin/true" /bin/true
expect_unchanged "/bin/false" /bin/false
expect_unchanged "sh -c 'echo hi; exit 3'" sh -c 'echo hi; exit 3'
expect_unchanged "python -c pass" "$PYTHON" -c pass
expect_unchanged "python with numpy" "$PYTHON" -c 'import numpy; print(numpy.arange(5).sum())'
expect_unchanged "REPROD_VERBOSE=1 /bin/true (nothing intercepted: no summary)" \
    env REPROD_VERBOSE=1 /bin/true

# mpirun itself (and its daemons) under the shim: the job runs as before.
native=$(run_mpi 2 /bin/echo hello 2>&1)
shim=$(LD_PRELOAD=$PRELOAD run_mpi 2 /bin/echo hello 2>&1)
[ "$native" = "$shim" ] || fail "mpirun with the shim preloaded: '$shim' vs '$native'"
ok "mpirun with the shim preloaded runs unchanged"

# The public API works by linking, without preloading (it is also the engine's entry point).
nm -D --defined-only "$SHIM" | grep -q ' T reprod_reduce_exact$' || fail "reprod_reduce_exact not exported"
leaked=$(nm -D --defined-only "$SHIM" | awk '$2 ~ /[TDBR]/ {print $3}' |
    grep -vE '^(reprod_|P?MPIX?_|nccl|srand|rand|init|seed|lcong|getrandom|getentropy|open|fopen|read|close|dup|curand|_ZN|fork|arc4random|fdopen|fcntl|pread|__open|__read_chk|__pread|dlsym$)' || true)
[ -z "$leaked" ] || fail "the shim exports symbols it should keep hidden: $leaked"
ok "exports only the intercepted calls and the reprod_ API"
