#!/usr/bin/env bash
# `reprod run` and `reprod doctor`. run: the shim appended to LD_PRELOAD (what was there kept),
# the options passed as REPROD_* settings, CMD's exit status returned, a bad value refused,
# every rank reached under mpirun. doctor: an MPI job is reached and made deterministic
# (exit 0); /bin/true reaches nothing (exit 1); a Fortran program of each MPI family is
# reported reached; an MPI linked into the program itself and a setuid program are reported
# out of reach; a job whose float sums pass through (REPROD_MODE=off) is not given a pass.
. tests/lib.sh

reprod=$BUILD/reprod
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
libm=$(ls /lib/x86_64-linux-gnu/libm.so.6 /usr/lib/*/libm.so.6 2>/dev/null | head -1)

# --- run
out=$(LD_PRELOAD=$libm "$reprod" run --mode ordered --rounding up --seed-policy rank --trace rel \
    --verbose 1 -- sh -c 'echo "$LD_PRELOAD|$REPROD_MODE|$REPROD_ROUNDING|$REPROD_SEED_POLICY|$REPROD_TRACE|$REPROD_VERBOSE"; exit 7')
status=$?
[ "$status" -eq 7 ] || fail "reprod run returned $status, not the command's 7"
[ "$out" = "$libm:$BUILD/libreprod_shim.so|ordered|up|rank|$ROOT/rel|1" ] || fail "reprod run set: $out"
ok "run: LD_PRELOAD appended, settings passed, exit status 7 returned: $out"
out=$(unset LD_PRELOAD; "$reprod" run -- sh -c 'echo "$LD_PRELOAD"')
[ "$out" = "$BUILD/libreprod_shim.so" ] || fail "LD_PRELOAD without an earlier value: $out"
out=$(LD_PRELOAD=$BUILD/libreprod_shim.so "$reprod" run -- sh -c 'echo "$LD_PRELOAD"')
[ "$out" = "$BUILD/libreprod_shim.so" ] || fail "the shim was preloaded twice: $out"
"$reprod" run --mode fast -- true 2>"$dir/err"
[ $? -eq 2 ] && grep -q "REPROD_MODE=fast is not valid; allowed values: exact, ordered, off, audit" "$dir/err" ||
    fail "a bad mode was not refused: $(cat "$dir/err")"
"$reprod" run -- /nonexistent/program 2>/dev/null
[ $? -eq 127 ] || fail "a missing command did not give 127"
"$reprod" run --help | grep -q "mpirun -np 4 reprod run -- ./solver" || fail "run --help"
ok "run: no duplicate preload, a bad value refused (2), a missing command 127, --help"
# Options: "--" is never an option's value; --verbose alone is 1; --option=value.
show_settings='echo "$REPROD_VERBOSE|$REPROD_MODE"'
for args in "--verbose --|1|" "--verbose 2 --|2|" "--verbose=0 --|0|" "--mode=ordered --verbose|1|ordered" \
    "--verbose --mode off --|1|off"; do
    out=$("$reprod" run ${args%%|*} sh -c "$show_settings" 2>&1)
    [ "$out" = "${args#*|}" ] || fail "run ${args%%|*} sh: set $out, expected ${args#*|}"
done
"$reprod" run --mode -- true 2>"$dir/err"
[ $? -eq 2 ] && grep -q "^reprod run: --mode needs a value" "$dir/err" || fail "run --mode --: $(cat "$dir/err")"
"$reprod" run --mood=exact -- true 2>"$dir/err"
[ $? -eq 2 ] && grep -q "^reprod run: --mood=exact is not an option" "$dir/err" || fail "run --mood: $(cat "$dir/err")"
ok "run: --verbose -- CMD is REPROD_VERBOSE=1, not --; --option=value; --mode -- refused (2)"
run_mpi 2 "$reprod" run --verbose 1 -- "$BUILD/tests/mpi/trace_job" >/dev/null 2>"$dir/err" || fail "mpirun reprod run: $(cat "$dir/err")"
[ "$(grep -c 'summary: 8 calls exact' "$dir/err")" -eq 2 ] || fail "not every rank was reached: $(cat "$dir/err")"
ok "mpirun -np 2 reprod run -- job: both ranks under the shim"

# --- doctor
doctor() { # doctor NAME CMD...: runs reprod doctor, output in $dir/NAME, status in $status
    local name=$1
    shift
    "$reprod" doctor -- "$@" >"$dir/$name" 2>"$dir/$name.err"
    status=$?
}
doctor mpi mpirun.openmpi --oversubscribe -np 2 "$BUILD/tests/mpi/trace_job"
[ $status -eq 0 ] || fail "doctor of an MPI job exited $status: $(cat "$dir/mpi")"
grep -q "^MPI: 16 calls made deterministic, 2 passed through$" "$dir/mpi" || fail "doctor MPI: $(cat "$dir/mpi")"
grep -q "^verdict: every float reduction reached was made deterministic" "$dir/mpi" || fail "verdict: $(cat "$dir/mpi")"
ok "doctor, Open MPI job: $(grep '^MPI' "$dir/mpi")"

doctor true /bin/true
[ $status -eq 1 ] || fail "doctor /bin/true exited $status"
grep -q "^verdict: nothing was reached" "$dir/true" || fail "doctor /bin/true: $(cat "$dir/true")"
ok "doctor /bin/true: $(grep verdict "$dir/true")"

doctor off mpirun.openmpi --oversubscribe -np 2 -x REPROD_MODE=off "$BUILD/tests/mpi/trace_job"
[ $status -eq 1 ] && grep -q "not deterministic: mode-off 18" "$dir/off" || fail "doctor under REPROD_MODE=off: $status $(cat "$dir/off")"
ok "doctor, float sums passed through: $(grep verdict "$dir/off")"

for family in openmpi mpich; do
    program=$(ls "$BUILD"/tests/fortran/$family/sum_* | head -1)
    [ -x "$program" ] || fail "no Fortran program built for $family"
    if [ $family = openmpi ]; then
        doctor fortran-$family mpirun.openmpi --oversubscribe -np 2 "$program"
    else
        doctor fortran-$family mpirun.mpich -np 2 "$program"
    fi
    [ $status -eq 0 ] || fail "doctor of $program exited $status: $(cat "$dir/fortran-$family")"
    grep -q "Fortran bindings: reached" "$dir/fortran-$family" || fail "$family Fortran: $(cat "$dir/fortran-$family")"
done
grep -q "MPICH family: reached" "$dir/fortran-mpich" || fail "MPICH not named: $(cat "$dir/fortran-mpich")"
ok "doctor, Fortran programs of Open MPI and MPICH: reached"

cat >"$dir/static_mpi.c" <<'C'
#include <stdio.h>
int MPI_Init(int *argc, char ***argv) { (void)argc, (void)argv; return 0; }
int main(void) { MPI_Init(0, 0); puts("an MPI of its own"); return 0; }
C
cc -o "$dir/static_mpi" "$dir/static_mpi.c" -rdynamic || fail "cannot build the static-MPI stand-in"
doctor static "$dir/static_mpi"
[ $status -eq 1 ] && grep -q "out of reach: $dir/static_mpi defines MPI_Init itself" "$dir/static" ||
    fail "an MPI linked in was not reported: $status $(cat "$dir/static")"
ok "doctor, a program with its own MPI_Init: $(grep 'out of reach' "$dir/static" | cut -c1-80)..."
if [ "$(id -u)" != 0 ]; then
    skip_part "doctor of a setuid program: not root, so no setuid-to-another-user copy can be made"
elif sanitized; then
    skip_part "doctor of a setuid program: an instrumented shim cannot be loaded into a setuid process"
else
    cp /bin/true "$dir/setuid_true" && chown nobody "$dir/setuid_true" && chmod 4755 "$dir/setuid_true"
    chmod 755 "$dir"
    doctor setuid "$dir/setuid_true"
    [ $status -eq 1 ] && grep -q "out of reach: $dir/setuid_true is setuid" "$dir/setuid" ||
        fail "a setuid program was not reported: $(cat "$dir/setuid")"
    ok "doctor, a setuid program: out of reach"
fi
"$reprod" doctor --help | grep -q "^Exit status" || fail "doctor --help"
