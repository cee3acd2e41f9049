#!/usr/bin/env bash
# The build follows its configuration (Makefile, "The build's configuration"): a shim built
# while a family's headers were missing is rebuilt once they are there, and supports the family
# then; what a change does not concern is not rebuilt (a new nvcc remakes the kernels, not the
# MPI hooks); `make` without a family's headers stops before compiling anything and says what to
# install; each family's file refuses the other family's mpi.h. Builds only the shim, into a
# temporary BUILD seeded with this build's objects (NVCC= or a stand-in nvcc: no real one runs).
. tests/lib.sh

if sanitized; then
    skip "the build's configuration does not depend on the shim under test: checked by make test"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The make that runs this script (if any) must not hand it its own settings or job server.
unset MAKEFLAGS MFLAGS MAKELEVEL
shim=$tmp/libreprod_shim.so

# Seed: this build's objects without nvcc, with the records of what they were built with.
seed=$BUILD/nonvcc
[ -d "$seed/config" ] || seed=$BUILD
[ -d "$seed/config" ] || fail "$seed/config is missing: build first (make)"
cp -a "$seed/obj" "$seed/config" "$tmp/" || fail "cannot copy $seed's objects"
find "$tmp/obj" -name '*.d' -delete # they name $seed's objects

# build ARGS...: make the shim in $tmp with ARGS; $rebuilt: the objects (and fatbin) it
# compiled, relative to $tmp, sorted; $output: what make said. Fails the test if make fails.
build() {
    touch "$tmp/before"
    sleep 0.01
    output=$(make --no-print-directory -j2 BUILD="$tmp" "$@" "$shim" 2>&1) ||
        fail "make $* failed: $output"
    rebuilt=$(cd "$tmp" && find obj cuda -newer before \( -name '*.o' -o -name '*.fatbin' \) 2>/dev/null | sort | tr '\n' ' ')
}

# run_job SHIM: tests/mpi/handle_registers.c on 3 MPICH ranks under SHIM; $job its output,
# $job_log the shim's log.
run_job() {
    job=$(run_mpich 3 -env LD_PRELOAD "$1" -env REPROD_VERBOSE 1 "$BUILD/tests/mpich/handle_registers" 2>"$tmp/log") ||
        fail "handle_registers under $1: $job $(cat "$tmp/log")"
    job_log=$(cat "$tmp/log")
}
[ -x "$BUILD/tests/mpich/handle_registers" ] || fail "$BUILD/tests/mpich/handle_registers is not built"

build NVCC=
ok "seeded: the shim linked from $seed's objects (recompiled: ${rebuilt:-none})"

# 1. Without MPICH's headers (the shim for Open MPI alone), then with them.
build NVCC= MPICC_MPICH=/nonexistent MPI_FAMILIES=openmpi
[ "$rebuilt" = "obj/hooks/mpi/abi/mpi_abi_mpich.o " ] ||
    fail "without MPICH's headers, recompiled '$rebuilt', not hooks/mpi/abi/mpi_abi_mpich.o alone"
grep -qx 'not built' "$tmp/config/mpich" || fail "config/mpich: $(cat "$tmp/config/mpich")"
run_job "$shim"
grep -q "built without MPICH's headers" <<<"$job_log" && grep -q ' inexact$' <<<"$job" ||
    fail "the shim built without MPICH's headers did not pass the MPICH job through: $job $job_log"
ok "without MPICH's headers: only hooks/mpi/abi/mpi_abi_mpich.o recompiled; an MPICH job passes through, logged"

build NVCC=
[ "$rebuilt" = "obj/hooks/mpi/abi/mpi_abi_mpich.o " ] ||
    fail "with MPICH's headers back, recompiled '${rebuilt:-nothing}', not hooks/mpi/abi/mpi_abi_mpich.o alone"
grep -q '/mpi\.h (from [^)]*): -I' "$tmp/config/mpich" || fail "config/mpich: $(cat "$tmp/config/mpich")"
run_job "$shim"
calls=$(grep -c . <<<"$job") # one line per call the program makes, each naming its result
[ "$calls" -gt 0 ] && [ "$(grep -c ' exact$' <<<"$job")" -eq "$calls" ] &&
    [ "$(grep -c "counts: .* exact=$calls ordered=0 passed=0 " <<<"$job_log")" -eq 3 ] ||
    fail "with MPICH's headers back, the MPICH job was not made exact: $job $job_log"
ok "with MPICH's headers back: hooks/mpi/abi/mpi_abi_mpich.o recompiled, the MPICH job exact on every rank"

build NVCC=
[ -z "$rebuilt" ] && ! grep -q 'libreprod_shim.so' <<<"$output" ||
    fail "nothing changed, yet make rebuilt: ${rebuilt:-the shim}: $output"
ok "nothing changed: nothing rebuilt"

# 2. nvcc (a stand-in: its version is what it prints): a change remakes the kernels alone.
# Its output passes the build's kernel check (tests/gpu/kernel_limits.sh): ptxas's report of
# each kernel's stack on stderr (the reduction and the fixed route's stages), and a fatbin of
# one empty PTX entry for compute_100.
{
    printf '\x50\xed\x55\xba\x01\x00\x10\x00\x40\x00\x00\x00\x00\x00\x00\x00'
    printf '\x01\x00\x00\x00\x40\x00\x00\x00\x00\x00\x00\x00'
    printf '\x00%.0s' $(seq 16)
    printf '\x64\x00\x00\x00'
    printf '\x00%.0s' $(seq 32)
} >"$tmp/nvcc.fatbin"
cat >"$tmp/nvcc" <<'EOF'
#!/bin/sh
# A stand-in nvcc: --version prints its release; otherwise a canned ptxas report on stderr and
# a canned fatbin at -o's file.
[ "$1" = --version ] && { echo "Cuda compilation tools, release $(cat "$0.release")"; exit 0; }
echo "ptxas info    : Compiling entry function 'reprod_reduce' for 'sm_90'" >&2
echo "ptxas info    : Used 40 registers, 848 bytes cumulative stack size" >&2
echo "ptxas info    : Compiling entry function 'reprod_fixed' for 'sm_90'" >&2
echo "ptxas info    : Used 38 registers, 480 bytes cumulative stack size" >&2
while [ $# -gt 1 ]; do [ "$1" = -o ] && { cp "$0.fatbin" "$2"; exit 0; }; shift; done
exit 1
EOF
chmod +x "$tmp/nvcc"
echo 1.0 >"$tmp/nvcc.release"
build NVCC="$tmp/nvcc"
[ "$rebuilt" = "cuda/reprod_kernels.fatbin obj/shim/device/cuda_image.o obj/shim/device/cuda_module.o " ] ||
    fail "with nvcc, recompiled '$rebuilt', not the kernels, their image and cuda_module.o"
echo 2.0 >"$tmp/nvcc.release"
build NVCC="$tmp/nvcc"
# cuda_module.o too: it names the toolkit's version when the kernels cannot load.
[ "$rebuilt" = "cuda/reprod_kernels.fatbin obj/shim/device/cuda_image.o obj/shim/device/cuda_module.o " ] ||
    fail "a new nvcc recompiled '$rebuilt', not the kernels, their image and cuda_module.o alone"
ok "a new nvcc: the kernels, their image and cuda_module.o rebuilt, nothing else (the MPI hooks untouched)"
build NVCC=
[ "$rebuilt" = "obj/shim/device/cuda_module.o " ] || fail "without nvcc again, recompiled '$rebuilt'"

# 3. A family's headers missing: make stops before compiling anything, and says what to get.
touch "$tmp/before"
status=0
output=$(make --no-print-directory -j2 BUILD="$tmp" NVCC= MPICC_MPICH=/nonexistent CFLAGS=-DCHANGED "$shim" 2>&1) ||
    status=$?
[ "$status" -ne 0 ] || fail "make without MPICH's headers succeeded: $output"
[ -z "$(find "$tmp/obj" -newer "$tmp/before" -name '*.o')" ] ||
    fail "make without MPICH's headers compiled something before it stopped"
grep -q 'apt-get install -y libmpich-dev$' <<<"$output" && grep -q 'MPI_FAMILIES=openmpi' <<<"$output" ||
    fail "make without MPICH's headers does not say what to install: $output"
ok "without MPICH's headers, make stops before compiling: $(grep -m1 'apt-get' <<<"$output" | sed 's/^reprod: *//')"

# 4. The wrong mpi.h: Open MPI's wrapper missing, MPICH's mpi.h on the compiler's path (the
# issue's CPATH case): make stops; with MPI_FAMILIES=mpich it builds without Open MPI's headers,
# and an Open MPI job passes through unchanged.
mpich_include=$(sed -n 's/.*(from [^)]*): -I\([^ ]*\).*/\1/p' "$tmp/config/mpich")
status=0
output=$(CPATH=$mpich_include make --no-print-directory BUILD="$tmp" NVCC= MPICC=/nonexistent "$shim" 2>&1) ||
    status=$?
[ "$status" -ne 0 ] && grep -q 'libopenmpi-dev' <<<"$output" ||
    fail "without Open MPI's wrapper and MPICH's mpi.h on CPATH, make did not stop: $output"
CPATH=$mpich_include build NVCC= MPICC=/nonexistent MPI_FAMILIES=mpich
[ "$rebuilt" = "obj/hooks/mpi/abi/mpi_abi_openmpi.o " ] ||
    fail "without Open MPI's headers, recompiled '$rebuilt', not hooks/mpi/abi/mpi_abi_openmpi.o alone"
got=$(run_mpi 3 -x LD_PRELOAD="$shim" -x REPROD_VERBOSE=1 "$BUILD/tests/mpi/handle_registers" 2>"$tmp/log") ||
    fail "an Open MPI job under the shim built without Open MPI's headers: $got $(cat "$tmp/log")"
native=$(run_mpi 3 "$BUILD/tests/mpi/handle_registers") || fail "Open MPI natively: $native"
[ "$got" = "$native" ] && grep -q "the MPI library is Open MPI, and this shim was built without Open MPI's headers" "$tmp/log" ||
    fail "an Open MPI job under the shim without Open MPI's headers: '$got' (natively '$native'): $(cat "$tmp/log")"
ok "Open MPI's wrapper missing: make stops; with MPI_FAMILIES=mpich an Open MPI job passes through, logged"

# Each family's file refuses the other family's mpi.h.
openmpi_flags=$(sed -n 's/.*(from [^)]*): //p' "$BUILD/config/openmpi")
[ -n "$openmpi_flags" ] || fail "$BUILD/config/openmpi names no Open MPI headers"
for case in "mpi_abi_openmpi.c -I$mpich_include" "mpi_abi_mpich.c $openmpi_flags"; do
    read -r file flags <<<"$case"
    # shellcheck disable=SC2086 # the flags are words
    if output=$(${CC:-cc} -std=c11 -D_GNU_SOURCE -Iinclude -Ishim -Ihooks $flags -c "hooks/mpi/abi/$file" -o "$tmp/wrong.o" 2>&1); then
        fail "hooks/mpi/abi/$file compiled against the other family's mpi.h ($flags)"
    fi
    grep -q "#error.*needs" <<<"$output" || fail "hooks/mpi/abi/$file: refused, but not by its check: $output"
done
ok "each family's file refuses the other family's mpi.h at compile time"
