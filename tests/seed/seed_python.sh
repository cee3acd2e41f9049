#!/usr/bin/env bash
# Python's own generators under the shim (hooks/seeding/python.c, python_bootstrap.py), with
# LD_PRELOAD alone: random.seed, Random(s), Random.seed, NumPy's legacy seeding (np.random.seed,
# RandomState(s), RandomState.seed), SeedSequence(s) and every bit generator and default_rng
# built from a seed. A run under the shim seeded with s prints what a run WITHOUT the shim prints
# seeded with the reference's derivation of s (tests/seed/seed_reference.py: docs/seeding.md's
# formula, computed without the shim), for each policy, in Debian's python3 (_random built in)
# and in the other CPython (python3 on PATH: _random a shared object, no NumPy). Seeds that are
# not integers in range pass unchanged; REPROD_MODE=off and REPROD_SEED_POLICY=off are native;
# the ctypes recipe changes nothing; python -I -S, multiprocessing (fork, spawn, forkserver), a
# sub-interpreter and the JAX/TensorFlow stand-ins are derived too; the program sees the same
# sys.path, os.environ, sys.modules (in the same order), meta path and no output.
. tests/lib.sh

unset RANK OMPI_COMM_WORLD_RANK PMI_RANK PMIX_RANK SLURM_PROCID PYTHONPATH
"$PYTHON" -c 'import numpy' 2>/dev/null || skip "$PYTHON has no numpy"
SEEDS=$ROOT/tests/seed/python_seeds.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# shim_run ENV... -- PROGRAM...: PROGRAM under the shim with the variables ENV, bounded.
under_shim() { bounded 60 env LD_PRELOAD="$PRELOAD" "$@"; }
native() { bounded 60 env "$@"; }

# Each policy at rank 3 (and hash at rank 0), Debian's python3: random and NumPy.
for case in "hash 0" "hash 3" "rank 3" "shared 3"; do
    set -- $case
    policy=$1 rank=$2
    got=$(under_shim RANK=$rank REPROD_SEED_POLICY=$policy "$PYTHON" "$SEEDS" derived 42 42) ||
        fail "$policy, rank $rank: the program failed under the shim"
    expected=$(native "$PYTHON" "$SEEDS" derived "$(derive $policy $rank 64 42)" "$(derive $policy $rank 32 42)")
    [ "$got" = "$expected" ] ||
        fail "policy $policy, rank $rank: not seeded as the reference derives 42: $(diff <(echo "$expected") <(echo "$got"))"
    native_42=$(native "$PYTHON" "$SEEDS" derived 42 42)
    [ "$got" != "$native_42" ] || fail "policy $policy, rank $rank: the seeds were not derived at all"
done
ok "Debian's python3, policies hash (ranks 0, 3), rank and shared (rank 3): random, NumPy legacy," \
    "SeedSequence, default_rng, PCG64, PCG64DXSM, MT19937, Philox, SFC64, Generator equal a native run" \
    "seeded with the reference's derivation"

# The other CPython: _random is a shared object there; an interpreter without NumPy.
# (Its executable itself, not a wrapper script on PATH such as pyenv's: what the shim is tested in.)
OTHER=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null || true)
if [ -n "$OTHER" ] && [ "$(readlink -f "$OTHER")" != "$(readlink -f "$PYTHON")" ]; then
    for policy in hash rank shared; do
        got=$(under_shim RANK=3 REPROD_SEED_POLICY=$policy "$OTHER" "$SEEDS" random 42)
        expected=$(native "$OTHER" "$SEEDS" random "$(derive $policy 3 64 42)")
        [ "$got" = "$expected" ] || fail "$OTHER, policy $policy: $(diff <(echo "$expected") <(echo "$got"))"
    done
    ok "$OTHER (_random a shared object): random derived as the reference says, each policy"
else
    OTHER=""
    skip_part "a second CPython: python3 on PATH is $PYTHON"
fi

# One log line a call, with literal values pinned (docs/seeding.md: H(42) = 13679457532755275413;
# the 32-bit derivation of 42 is 3997597525), counted in the summary.
log=$(under_shim REPROD_VERBOSE=2 "$PYTHON" -c '
import random, numpy as np
random.seed(42); np.random.seed(42); np.random.default_rng(42); np.random.PCG64(42)' 2>&1)
for line in "random.Random.seed 42 -> 13679457532755275413" "numpy.random.RandomState.seed 42 -> 3997597525"; do
    echo "$log" | grep -qxF "reprod[0]: seed: $line (policy hash, rank 0: no rank known yet, 0 assumed)" ||
        fail "no log line '$line': $log"
done
[ "$(echo "$log" | grep -cF 'seed: numpy.random.SeedSequence 42 -> 13679457532755275413 (policy hash')" = 2 ] ||
    fail "default_rng(42) and PCG64(42): not one SeedSequence line each: $log"
[ "$(echo "$log" | grep -c 'seed: ')" = 4 ] || fail "not one log line per seeding call: $log"
echo "$log" | grep -q "summary: .* 4 seeding calls" || fail "the summary does not count 4 seeding calls: $log"
ok "one log line per seeding call (pinned: 42 -> 13679457532755275413, 32-bit 3997597525), counted"

# Seeds that are not integers in range pass unchanged (str, bytes, float, negative, >= 2^64,
# version=1 text, lists, arrays, states, pickles, SeedSequence entropy lists, spawn keys).
got=$(under_shim REPROD_SEED_POLICY=rank RANK=3 "$PYTHON" "$SEEDS" unchanged) || fail "unchanged: failed"
expected=$(native "$PYTHON" "$SEEDS" unchanged)
[ "$got" = "$expected" ] || fail "seeds that are not integers changed: $(diff <(echo "$expected") <(echo "$got"))"
ok "non-integer, negative and >= 2^64 seeds, lists, arrays, states and pickles unchanged"

# REPROD_MODE=off and REPROD_SEED_POLICY=off: as without the shim, and no log line.
expected=$(native "$PYTHON" "$SEEDS" derived 42 42)
for setting in REPROD_MODE=off REPROD_SEED_POLICY=off; do
    got=$(under_shim RANK=3 REPROD_VERBOSE=2 $setting "$PYTHON" "$SEEDS" derived 42 42 2>"$work/log")
    [ "$got" = "$expected" ] || fail "$setting: not native: $(diff <(echo "$expected") <(echo "$got"))"
    ! grep -q "seed:" "$work/log" || fail "$setting: seeding calls logged: $(cat "$work/log")"
done
ok "REPROD_MODE=off and REPROD_SEED_POLICY=off: native values, nothing logged"

# The ctypes recipe (README): loading the shim into a running Python changes no generator, and
# its reprod_seed_derive gives the seed that reproduces a run under the shim.
read -r -d '' RECIPE <<'EOF'
import ctypes, runpy, sys
shim = ctypes.CDLL(sys.argv[1])
shim.reprod_seed_derive.restype = ctypes.c_uint64
shim.reprod_seed_derive.argtypes = [ctypes.c_uint64, ctypes.c_int, ctypes.c_int]
print("derive:", shim.reprod_seed_derive(42, 0, 0), shim.reprod_seed_derive(42, 3, 1))
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
EOF
got=$(REPROD_VERBOSE=2 with_sanitizer_runtime "$PYTHON" -c "$RECIPE" "$SHIM" "$SEEDS" derived 42 42 2>"$work/log")
[ "$got" = "derive: 13679457532755275413 $(derive rank 3 64 42)
$expected" ] || fail "ctypes.CDLL(shim) changed a generator or derives otherwise: $got"
! grep -q "seed:" "$work/log" || fail "ctypes.CDLL(shim): seeding calls logged: $(cat "$work/log")"
ok "ctypes.CDLL(shim): no generator changed; reprod_seed_derive(42, 0, hash) = 13679457532755275413"

# Traces: each Python seeding call is a trace line, and `reprod diff` of two runs seeded 42 and
# 43 names random's seeding call.
for seed in 42 43; do
    under_shim RANK=0 REPROD_TRACE="$work/trace$seed" "$PYTHON" -c "
import random, numpy
random.seed($seed); numpy.random.default_rng(7); numpy.random.seed(7)" || fail "traced run $seed failed"
done
trace=$(cat "$work/trace42/rank0.trace")
for line in "seq=1 api=random.Random.seed action=seed detail=hash count=0 ranks=0 in=000000000000002a out=$(printf '%016x' "$(derive hash 0 64 42)")" \
    "seq=2 api=numpy.random.SeedSequence action=seed detail=hash count=0 ranks=0 in=0000000000000007 out=$(printf '%016x' "$(derive hash 0 64 7)")" \
    "seq=3 api=numpy.random.RandomState.seed action=seed detail=hash count=0 ranks=0 in=0000000000000007 out=$(printf '%016x' "$(derive hash 0 32 7)")"; do
    grep -qxF "$line" <<<"$trace" || fail "trace line '$line' missing: $trace"
done
out=$("$BUILD/reprod" diff "$work/trace42" "$work/trace43")
grep -q "the runs were seeded differently at call 1 of rank 0 (random.Random.seed)" <<<"$out" ||
    fail "reprod diff does not name random's seeding call: $out"
ok "traces list random, SeedSequence and legacy seeding calls; reprod diff names them"

# A seed the shim produced is not derived twice: random.seed(d) with the d it made of 42.
d=$(derive hash 0 64 42)
got=$(under_shim REPROD_VERBOSE=2 "$PYTHON" -c "
import random
random.seed(42); first = random.random()
random.seed($d); print(first == random.random(), random.random())" 2>"$work/log")
expected=$(native "$PYTHON" -c "import random; random.seed($d); random.random(); print(True, random.random())")
[ "$got" = "$expected" ] || fail "random.seed(derived): derived again ($got, expected $expected)"
grep -qF "random.Random.seed $d -> $d (policy hash, rank 0: no rank known yet, 0 assumed, unchanged: the shim produced or handed out this seed earlier)" "$work/log" ||
    fail "random.seed(derived) is not logged as the shim's own seed: $(cat "$work/log")"
ok "random.seed with a seed the shim produced keeps its stream (logged unchanged)"

# python -I and -S, and a script importing random through importlib.
for flags in "-I" "-S" "-I -S"; do
    got=$(under_shim REPROD_SEED_POLICY=rank RANK=3 "$PYTHON" $flags "$SEEDS" random 42)
    expected=$(native "$PYTHON" $flags "$SEEDS" random "$(derive rank 3 64 42)")
    [ "$got" = "$expected" ] || fail "python $flags: not derived: $got"
done
got=$(under_shim "$PYTHON" -c 'import importlib; r = importlib.import_module("random"); r.seed(42); print(r.random())')
expected=$(native "$PYTHON" -c "import random; random.seed($d); print(random.random())")
[ "$got" = "$expected" ] || fail "importlib.import_module('random'): not derived: $got"
ok "python -I, -S, -I -S and importlib.import_module('random'): derived"

# multiprocessing: fork (the parent's wrapped modules), spawn and forkserver (new interpreters
# that inherit LD_PRELOAD); a sub-interpreter (its own _random, wrapped on its import).
read -r -d '' CHILDREN <<'EOF'
import multiprocessing, sys
def child(queue):
    import random, numpy
    random.seed(42)
    queue.put((random.random(), numpy.random.default_rng(42).random()))
if __name__ == "__main__":
    for method in ("fork", "spawn", "forkserver"):
        context = multiprocessing.get_context(method)
        queue = context.Queue()
        process = context.Process(target=child, args=(queue,))
        process.start()
        print(method, *queue.get())
        process.join()
    import _xxsubinterpreters as interpreters, os
    reader, writer = os.pipe()
    interpreter = interpreters.create()
    interpreters.run_string(interpreter, "import os, random; random.seed(42); "
                            "os.write(%d, repr(random.random()).encode())" % writer)
    os.close(writer)
    print("subinterpreter", os.read(reader, 100).decode())
EOF
printf '%s\n' "$CHILDREN" >"$work/children.py"
got=$(under_shim "$PYTHON" "$work/children.py") || fail "multiprocessing under the shim failed: $got"
values=$(native "$PYTHON" -c "import random, numpy; random.seed($d); print(random.random(), numpy.random.default_rng($d).random())")
random_value=${values%% *}
expected="fork $values
spawn $values
forkserver $values
subinterpreter $random_value"
[ "$got" = "$expected" ] || fail "multiprocessing/sub-interpreter: $(diff <(echo "$expected") <(echo "$got"))"
ok "multiprocessing fork, spawn, forkserver and a sub-interpreter: derived"

# rank from MPI: mpirun -np 2, seeding after mpi4py's MPI_Init (the rank from the library).
if "$PYTHON" -c 'import mpi4py' 2>/dev/null && command -v mpirun.openmpi >/dev/null; then
    log=$(REPROD_VERBOSE=2 REPROD_SEED_POLICY=rank run_mpi_shim 2 -x REPROD_VERBOSE -x REPROD_SEED_POLICY \
        "$PYTHON" -c '
import sys
from mpi4py import MPI
import random, numpy
rank = MPI.COMM_WORLD.Get_rank()
random.seed(42 + rank); numpy.random.seed(42 + rank)
# A file a rank: mpirun forwards both ranks onto one stdout, where their writes may interleave.
with open("%s.%d" % (sys.argv[1], rank), "w") as out:
    print("rank", rank, random.random(), numpy.random.random(), file=out)' "$work/mpi_out" 2>&1) ||
        fail "mpirun with mpi4py failed: $log"
    for rank in 0 1; do
        d64=$(derive rank $rank 64 $((42 + rank)))
        d32=$(derive rank $rank 32 $((42 + rank)))
        echo "$log" | grep -qxF "reprod[$rank]: seed: random.Random.seed $((42 + rank)) -> $d64 (policy rank, rank $rank from the library)" ||
            fail "mpirun rank $rank: random.seed not derived with the rank from MPI: $log"
        want=$(native "$PYTHON" -c "import random, numpy; random.seed($d64); numpy.random.seed($d32); print('rank', $rank, random.random(), numpy.random.random())")
        grep -qxF "$want" "$work/mpi_out.$rank" || fail "mpirun rank $rank: expected '$want': $(cat "$work/mpi_out.$rank")"
    done
    ok "mpirun -np 2 with mpi4py, policy rank: the rank from MPI, random and NumPy as the reference derives"
else
    skip_part "the MPI part: no mpi4py or mpirun.openmpi"
fi

# JAX and TensorFlow (stand-ins under their module names: Debian packages neither).
d=$(derive rank 3 64 42)
signed=$("$PYTHON" -c "print($d - 2**64 if $d >= 2**63 else $d)")
got=$(cd "$ROOT/tests/seed/python_standins" && under_shim RANK=3 REPROD_SEED_POLICY=rank "$PYTHON" -c '
import jax, tensorflow as tf
tf.random.set_seed(42)
print(jax.random.PRNGKey(42)[1], jax.random.key(42)[1], tf.random.global_seed,
      tf.random.Generator.from_seed(42).seed, jax.random.PRNGKey(-7)[1], tf.random.Generator.from_seed("s").seed)')
[ "$got" = "$signed $signed $d $d -7 s" ] || fail "JAX/TensorFlow stand-ins: '$got', expected '$signed $signed $d $d -7 s'"
ok "jax.random.PRNGKey/key (as int64), tf.random.set_seed, tf.random.Generator.from_seed (stand-ins): derived"

# What the program can observe: sys.path, os.environ (but LD_PRELOAD), sys.modules in import
# order, sys.meta_path, sys.path_hooks, and no output.
read -r -d '' OBSERVE <<'EOF'
import os, sys, random, importlib
try:
    import numpy
except ImportError:  # the other CPython
    pass
environment = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
print(sys.path, sorted(environment.items()), list(sys.modules), [type(finder).__name__ for finder in
      sys.meta_path], [getattr(hook, "__qualname__", type(hook).__name__) for hook in sys.path_hooks],
      random.Random.seed.__name__, random.Random.seed.__qualname__)
EOF
for python in "$PYTHON" $OTHER; do
    got=$(under_shim "$python" -c "$OBSERVE" 2>"$work/err") || fail "$python: observing failed"
    [ ! -s "$work/err" ] || fail "$python under the shim wrote on stderr: $(cat "$work/err")"
    expected=$(native LD_PRELOAD= "$python" -c "$OBSERVE")
    [ "$got" = "$expected" ] || fail "$python: the program sees a difference: $(diff <(echo "$expected" | tr ',' '\n') <(echo "$got" | tr ',' '\n'))"
done
ok "sys.path, os.environ, sys.modules (order included), meta path and path hooks as without the shim; no output"

# A program embedding Python (linked with a shared libpython: Debian's, from the libpython3.11
# package, else the other CPython's): the shim's hook is in place before Py_Initialize. After
# Py_FinalizeEx the runtime drops its audit hooks: a second Py_Initialize runs natively
# (docs/seeding.md says so; pinned here).
embedded=""
for python in "$PYTHON" $OTHER; do
    library=$("$python" -c 'import sysconfig as c, os; v = c.get_config_var
print(os.path.join(v("LIBDIR"), v("INSTSONAME")) if v("Py_ENABLE_SHARED") else "")' 2>/dev/null)
    if [ -n "$library" ] && [ -f "$library" ]; then embedded=$python; break; fi
done
if [ -n "$embedded" ] && command -v "${CC:-cc}" >/dev/null; then
    cat >"$work/embed.c" <<'PROGRAM'
int Py_Initialize(void);
int PyRun_SimpleString(const char *command);
int Py_FinalizeEx(void);
int main(void)
{
    for (int i = 0; i < 2; i++) {
        Py_Initialize();
        PyRun_SimpleString("import random; random.seed(42); print(random.random(), flush=True)");
        Py_FinalizeEx();
    }
    return 0;
}
PROGRAM
    "${CC:-cc}" "$work/embed.c" -o "$work/embed" "$library" -Wl,-rpath,"$(dirname "$library")" ||
        fail "could not build the embedding program against $library"
    home=$("$embedded" -c 'import sys; print(sys.base_prefix)')
    got=$(PYTHONHOME=$home under_shim "$work/embed")
    first=$(native "$embedded" -c "import random; random.seed($(derive hash 0 64 42)); print(random.random())")
    second=$(native "$embedded" -c "import random; random.seed(42); print(random.random())")
    [ "$got" = "$first
$second" ] || fail "embedded Python: got '$got', expected '$first' then (after Py_FinalizeEx) '$second'"
    ok "a program embedding $library: derived; a second Py_Initialize after Py_FinalizeEx: native"
else
    skip_part "the embedding part: no shared libpython (Debian's package libpython3.11) or no C compiler"
fi

# When the Python side cannot wrap (a NumPy without the private names it uses, a module that
# refuses the wrapper), the program runs as without the shim, and one warning says which seeds
# pass unchanged.
mkdir -p "$work/odd/numpy/random" "$work/odd/jax"
printf '__version__ = "0-standin"\nfrom . import random\n' >"$work/odd/numpy/__init__.py"
printf 'def seed(s):\n    return s\n' >"$work/odd/numpy/random/__init__.py"
printf 'from jax import random\n' >"$work/odd/jax/__init__.py"
cat >"$work/odd/jax/random.py" <<'PROGRAM'
import sys
class Frozen:
    def PRNGKey(self, seed):
        return seed
    def __setattr__(self, name, value):
        raise AttributeError("frozen")
sys.modules[__name__] = Frozen()
PROGRAM
got=$(cd "$work/odd" && under_shim "$PYTHON" -c 'import numpy, jax.random; print(numpy.random.seed(5), jax.random.PRNGKey(5))' 2>"$work/err") ||
    fail "a program whose modules the shim cannot wrap failed: $(cat "$work/err")"
[ "$got" = "5 5" ] || fail "unwrappable modules: the program printed '$got', expected '5 5'"
warnings="reprod[0]: warning: python: numpy.random.bit_generator._coerce_to_uint32_array not found (NumPy 0-standin): SeedSequence seeds pass unchanged
reprod[0]: warning: python: numpy.random._mt19937.MT19937._legacy_seeding not found (NumPy 0-standin): np.random.seed and RandomState seeds pass unchanged
reprod[0]: warning: python: jax.random: seeds pass unchanged (AttributeError: frozen)"
[ "$(cat "$work/err")" = "$warnings" ] || fail "unwrappable modules: stderr $(cat "$work/err")"
ok "modules the shim cannot wrap: the program runs as without it, one warning each"

# A ^C (KeyboardInterrupt) or a SystemExit raised while a target module imports reaches the
# program as without the shim, even though the shim imports the module first: the stand-in's
# first run raises, a second run would import quietly (a shim that swallowed the first would
# let the program's own import succeed).
for raised in KeyboardInterrupt SystemExit; do
    mkdir -p "$work/$raised/jax"
    : >"$work/$raised/jax/__init__.py"
    cat >"$work/$raised/jax/random.py" <<PROGRAM
import builtins
if not getattr(builtins, "_raised_once", False):
    builtins._raised_once = True
    raise $raised
def PRNGKey(seed):
    return seed
PROGRAM
    program="
try:
    import jax.random
    print('imported')
except $raised:
    print('raised')"
    want=$(cd "$work/$raised" && native "$PYTHON" -c "$program")
    got=$(cd "$work/$raised" && under_shim "$PYTHON" -c "$program" 2>"$work/err")
    [ "$want" = raised ] || fail "$raised stand-in: natively '$want'"
    [ "$got" = raised ] || fail "$raised raised importing jax.random: under the shim '$got' ($(cat "$work/err"))"
done
ok "a KeyboardInterrupt or SystemExit raised importing a target module reaches the program"
