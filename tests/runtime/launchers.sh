#!/usr/bin/env bash
# Launchers and their daemons under the shim (shim/interpose/launcher.c). Preloaded into a launcher
# itself (mpirun.openmpi, its orted, mpirun.mpich, its hydra_pmi_proxy, torchrun's agent) or
# into a program that runs under a launcher's name, the shim leaves the process exactly as it
# is: no re-derived seed, no pinned entropy, no file, no count, no output. The ranks and
# workers the launchers start inherit LD_PRELOAD and are shimmed as usual: exactly one trace
# and one summary per rank, `reprod doctor` counts the ranks only, `reprod diff` of two
# identical runs agrees. A program whose name only resembles a launcher's is shimmed as usual.
. tests/lib.sh

unset RANK OMPI_COMM_WORLD_RANK PMI_RANK PMIX_RANK SLURM_PROCID \
    WORLD_SIZE OMPI_COMM_WORLD_SIZE PMI_SIZE SLURM_NTASKS LOCAL_RANK
PROBE=$BUILD/tests/progs/launcher_probe
for program in "$PROBE" "$BUILD/tests/mpi/trace_job" "$BUILD/tests/mpich/trace_job" "$BUILD/reprod"; do
    [ -x "$program" ] || fail "$program is not built"
done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/bin" "$dir/links"

# ---- A program under a launcher's name: nothing changes; under a similar name: all does.

native=$("$PROBE" | grep '^rand: ')
pinned=$(REPROD_ENTROPY=7 LD_PRELOAD=$PRELOAD "$PROBE" 2>/dev/null | grep '^getrandom: ')
[ -n "$native" ] && [ -n "$pinned" ] || fail "launcher_probe printed nothing"

# run_as PATH: run PATH (a copy of or a link to the probe, or a Python command) under the shim
# with every setting that writes or changes something; its files and output go to $dir/NAME.*.
run_as() {
    local name
    name=$(basename "${@: -1}")
    rm -rf "$dir/$name".*
    env LD_PRELOAD="$PRELOAD" REPROD_ENTROPY=7 REPROD_VERBOSE=2 REPROD_TRACE="$dir/$name.trace" \
        REPROD_LOG="$dir/$name.log" "$@" >"$dir/$name.out" 2>"$dir/$name.err" ||
        fail "$* failed under the shim: $(cat "$dir/$name.err")"
}

# untouched PATH...: the shim changed nothing and wrote nothing in that process.
untouched() {
    local name
    name=$(basename "${@: -1}")
    run_as "$@"
    grep -qxF "$native" "$dir/$name.out" ||
        fail "$name: srand(42) was re-derived: $(cat "$dir/$name.out"), natively $native"
    grep -qxF "$pinned" "$dir/$name.out" && fail "$name: getrandom was pinned: $(cat "$dir/$name.out")"
    [ -s "$dir/$name.err" ] && fail "$name: the shim wrote on stderr: $(cat "$dir/$name.err")"
    [ -e "$dir/$name.trace" ] && fail "$name: a trace was written: $(ls -R "$dir/$name.trace")"
    [ -e "$dir/$name.log" ] && fail "$name: a log was written: $(cat "$dir/$name.log")"
    return 0
}

# shimmed PATH...: the shim re-derived the seed, pinned entropy, traced and logged as usual.
shimmed() {
    local name
    name=$(basename "${@: -1}")
    run_as "$@"
    grep -qxF "$native" "$dir/$name.out" && fail "$name: srand(42) was not re-derived"
    grep -q "seed: srand 42 -> " "$dir/$name.log" 2>/dev/null ||
        fail "$name: the seeding call was not logged"
    grep -q "REPROD_ENTROPY=7: getrandom" "$dir/$name.err" || fail "$name: entropy not pinned"
    grep -q "action=seed" "$dir/$name.trace/rank0.trace" 2>/dev/null || fail "$name: no trace"
}

LAUNCHERS="mpiexec.hydra hydra_pmi_proxy pmi_proxy mpiexec mpirun orterun orted prterun prted
prte srun slurmstepd"
for name in $LAUNCHERS; do
    cp "$PROBE" "$dir/bin/$name"
    untouched "$dir/bin/$name"
done
ok "programs named $(echo $LAUNCHERS | tr ' ' ','): seeds and entropy as without the shim," \
    "no file, no output"

# The name is the executable's, links resolved, compared whole: a link to a launcher is one;
# a link named like a launcher to another program, and names that only resemble one, are not.
ln -s "$dir/bin/orted" "$dir/links/my-tool"
untouched "$dir/links/my-tool"
cp "$PROBE" "$dir/bin/solver"
ln -s "$dir/bin/solver" "$dir/links/srun"
shimmed "$dir/links/srun"
for name in mpirun-wrapper my_orted orted2 srun.sh mpiexec.hydra.old xprterun torchrun MPIRUN; do
    cp "$PROBE" "$dir/bin/$name"
    shimmed "$dir/bin/$name"
done
ok "a link to a launcher is one; a link named srun to another program, mpirun-wrapper," \
    "my_orted, orted2, srun.sh, mpiexec.hydra.old, xprterun, a native torchrun, MPIRUN are shimmed"

# A rank whose program is named like a launcher runs natively, but never silently: starting
# MPI, it says on stderr that the shim took it for a launcher (the log is silent there).
cp "$BUILD/tests/mpich/trace_job" "$dir/bin/slurmstepd"
out=$(LD_PRELOAD=$PRELOAD REPROD_VERBOSE=1 REPROD_TRACE="$dir/rank.trace" bounded 60 \
    "$dir/bin/slurmstepd" 2>&1) || fail "an MPI program named slurmstepd failed: $out"
[ "$out" = "reprod[0]: warning: this process runs slurmstepd, which the shim takes for a launcher and leaves as it is, yet it started MPI or NCCL: its reductions and seeds are the library's own, not made reproducible" ] ||
    fail "an MPI program named slurmstepd: expected one warning, got: $out"
[ -e "$dir/rank.trace" ] && fail "an MPI program named slurmstepd was traced"
ok "an MPI program named like a launcher says it runs natively"

# Python: torchrun's agent is a Python process running the torchrun script or the modules
# torch.distributed.run / torch.distributed.launch. The same program under another script
# name, or given "torchrun" as an argument, is shimmed.
cat >"$dir/bin/torchrun" <<'EOF'
import ctypes, os
libc = ctypes.CDLL(None)
libc.srand(42)
print("rand: %d" % libc.rand())
print("getrandom: " + os.urandom(16).hex())
EOF
cp "$dir/bin/torchrun" "$dir/bin/torchrun.py"
cp "$dir/bin/torchrun" "$dir/bin/my_torchrun"
python_pinned() { # NAME: two runs drew the same bytes (the stream) or not
    local first
    first=$(grep '^getrandom: ' "$dir/$1.out")
    run_as "${@:2}"
    [ "$first" = "$(grep '^getrandom: ' "$dir/$1.out")" ]
}
untouched "$PYTHON" "$dir/bin/torchrun"
python_pinned torchrun "$PYTHON" "$dir/bin/torchrun" && fail "torchrun script: entropy pinned"
for name in torchrun.py my_torchrun; do
    shimmed "$PYTHON" "$dir/bin/$name"
    python_pinned $name "$PYTHON" "$dir/bin/$name" || fail "python $name: entropy not pinned"
done
shimmed "$PYTHON" -c "$(cat "$dir/bin/torchrun")" torchrun
ok "python .../torchrun untouched; python torchrun.py, python my_torchrun, python -c CODE" \
    "torchrun shimmed"

# ---- mpirun with the shim preloaded into the launcher and its daemons, ranks inheriting it.

NP=3
# An rsh agent that runs the "remote" command (orted and its quoted arguments) here, by exec:
# Open MPI then starts an orted. The agent itself, a shell, is a program like any other: it
# is shimmed (one more REPROD_ENTROPY warning).
cat >"$dir/fakessh" <<'EOF'
#!/bin/sh
while [ $# -gt 0 ]; do case $1 in -*) shift ;; *) break ;; esac; done
shift
eval "exec $*"
EOF
chmod +x "$dir/fakessh"

# launched NAME HELPERS LAUNCHER ARGS...: run the never-seeding trace_job under LAUNCHER with
# the shim preloaded into the launcher itself, HELPERS other programs (not launchers) among the
# processes it starts; traces in $dir/NAME, stderr in $dir/NAME.err.
launched() {
    local name=$1 helpers=$2
    shift 2
    bounded "${MPI_TIMEOUT:-120}" env LD_PRELOAD="$PRELOAD" REPROD_TRACE="$dir/$name" \
        REPROD_VERBOSE=1 REPROD_ENTROPY=7 "$@" >"$dir/$name.out" 2>"$dir/$name.err" ||
        fail "$name: $* failed: $(cat "$dir/$name.err")"
    local want="" rank
    for ((rank = 0; rank < NP; rank++)); do want+="rank$rank.trace "; done
    [ "$(ls "$dir/$name" | tr '\n' ' ')" = "$want" ] ||
        fail "$name: expected the traces $want, got $(ls "$dir/$name"): $(head -qn1 "$dir/$name"/*)"
    [ "$(grep -c "world=$NP " "$dir/$name"/*.trace | grep -c ':1$')" -eq $NP ] ||
        fail "$name: a trace is not a rank's: $(head -qn1 "$dir/$name"/*)"
    local counts
    counts=$(grep ': counts: ' "$dir/$name.err")
    [ "$(echo "$counts" | grep -c ' seeds=0 ')" -eq $NP ] && [ "$(echo "$counts" | wc -l)" -eq $NP ] ||
        fail "$name: expected $NP counts lines with seeds=0 (one per rank): $(cat "$dir/$name.err")"
    [ "$(grep -c 'REPROD_ENTROPY=7: getrandom' "$dir/$name.err")" -eq $((NP + helpers)) ] ||
        fail "$name: expected $((NP + helpers)) REPROD_ENTROPY warnings (one per rank and" \
            "helper): $(cat "$dir/$name.err")"
    grep -q 'exists\|no trace' "$dir/$name.err" && fail "$name: $(cat "$dir/$name.err")"
    return 0
}
diff_agrees() { # A B
    local out
    out=$("$BUILD/reprod" diff "$dir/$1" "$dir/$2") || fail "reprod diff $1 $2: $out"
    grep -q "^the traces agree: .* on $NP ranks" <<<"$out" || fail "reprod diff $1 $2: $out"
}
doctor_counts_ranks() { # LAUNCHER ARGS...
    local out
    out=$(bounded "${MPI_TIMEOUT:-120}" "$BUILD/reprod" doctor -- "$@" 2>&1) || fail "doctor -- $*: $out"
    grep -qx "processes that reported: $NP" <<<"$out" && grep -q "^seeding: 0 seeding calls" <<<"$out" ||
        fail "doctor -- $*: expected $NP processes and 0 seeding calls: $out"
}

OMPI=(mpirun.openmpi --oversubscribe --bind-to none -np $NP)
ORTED=(mpirun.openmpi --mca plm_rsh_agent "$dir/fakessh" -H "fakenode:$NP" --bind-to none -np $NP)
launched openmpi.a 0 "${OMPI[@]}" "$BUILD/tests/mpi/trace_job"
launched openmpi.b 1 "${ORTED[@]}" "$BUILD/tests/mpi/trace_job"
diff_agrees openmpi.a openmpi.b
doctor_counts_ranks "${OMPI[@]}" "$BUILD/tests/mpi/trace_job"
ok "LD_PRELOAD=shim mpirun.openmpi (orterun alone, and with an orted): $NP traces, $NP" \
    "summaries, entropy pinned in the ranks only; diff agrees; doctor counts $NP processes"

MPICH=(mpirun.mpich -np $NP)
launched mpich.a 0 "${MPICH[@]}" "$BUILD/tests/mpich/trace_job"
launched mpich.b 0 "${MPICH[@]}" "$BUILD/tests/mpich/trace_job"
diff_agrees mpich.a mpich.b
doctor_counts_ranks "${MPICH[@]}" "$BUILD/tests/mpich/trace_job"
ok "LD_PRELOAD=shim mpirun.mpich (mpiexec.hydra, hydra_pmi_proxy): $NP traces, $NP summaries," \
    "no seeding call; diff agrees; doctor counts $NP processes"

# ---- torchrun (PyTorch's own, CPU, gloo on localhost): the agent is untouched, its two
# workers are seeded under policy rank as the independent reference says.

"$PYTHON" -c 'import torch.distributed.run' || fail "$PYTHON cannot import torch.distributed.run"
# --redirects 2 --tee 2: the workers' stderr reaches ours prefixed with [default<rank>]:, the
# agent's own is not prefixed. (The default, --redirects 0, fails in PyTorch 1.13 under
# Python 3.11: Std.from_str("0") gives None.)
torchrun_job() { # NAME LAUNCHER...
    local name=$1
    shift
    bounded 300 env LD_PRELOAD="$PRELOAD" REPROD_SEED_POLICY=rank REPROD_ENTROPY=7 \
        REPROD_VERBOSE=2 REPROD_TRACE="$dir/$name" "$@" --nnodes 1 --nproc_per_node 2 \
        --rdzv_backend c10d --rdzv_endpoint localhost:0 --redirects 2 --tee 2 \
        --log_dir "$dir/$name.logs" "$ROOT/tests/python/launcher_worker.py" \
        >"$dir/$name.out" 2>"$dir/$name.err" || fail "$name: $* failed: $(cat "$dir/$name.err")"
    local agent
    agent=$(grep '^reprod' "$dir/$name.err")
    [ -z "$agent" ] || fail "$name: torchrun's agent was changed: $agent"
    [ "$(ls "$dir/$name" | tr '\n' ' ')" = "rank0.trace rank1.trace " ] ||
        fail "$name: expected the traces of ranks 0 and 1: $(ls "$dir/$name")"
    for rank in 0 1; do
        local seed
        seed=$(derive rank $rank 64 $((42 + rank)))
        grep -q "^worker rank $rank pid [0-9]* initial_seed $seed$" "$dir/$name.out" ||
            fail "$name: worker $rank not seeded with $seed: $(cat "$dir/$name.out")"
        grep -q "^\[default$rank\]:reprod\[$rank\]: warning: REPROD_ENTROPY=7: getrandom" "$dir/$name.err" ||
            fail "$name: worker $rank's entropy not pinned: $(cat "$dir/$name.err")"
        grep -q "^\[default$rank\]:reprod\[$rank\]: counts: .* seeds=1 " "$dir/$name.err" ||
            fail "$name: worker $rank did not count its seeding call: $(cat "$dir/$name.err")"
    done
}
torchrun_job module "$PYTHON" -m torch.distributed.run
ok "python3 -m torch.distributed.run: the agent writes, pins, derives nothing; both workers" \
    "seeded as the reference says, pinned, traced"
[ -x /usr/bin/torchrun ] || fail "/usr/bin/torchrun (python3-torch) is missing"
torchrun_job script /usr/bin/torchrun
ok "/usr/bin/torchrun: the same"
