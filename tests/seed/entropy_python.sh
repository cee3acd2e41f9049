#!/usr/bin/env bash
# REPROD_ENTROPY in Python: `random` and numpy's default_rng, seeded from the OS, print the same
# numbers over two runs with REPROD_ENTROPY=7 and different ones without (or with another
# value); after os.fork, parent and child draw different numbers, each the same in every run;
# the warning is on stderr; without REPROD_ENTROPY nothing is written.
. tests/lib.sh

unset RANK OMPI_COMM_WORLD_RANK PMI_RANK PMIX_RANK SLURM_PROCID
[ -f "$SHIM" ] || fail "$SHIM is not built"

PROGRAM='import random, numpy; print(random.random(), numpy.random.default_rng().random())'
run() { env LD_PRELOAD="$PRELOAD" "$@" "$PYTHON" -c "$PROGRAM"; }

first=$(run REPROD_ENTROPY=7 2>"$BUILD/entropy_python.err") || fail "python failed"
warning=$(cat "$BUILD/entropy_python.err")
second=$(run REPROD_ENTROPY=7 2>/dev/null)
[ "$first" = "$second" ] || fail "REPROD_ENTROPY=7: two runs print '$first' and '$second'"
other=$(run REPROD_ENTROPY=8 2>/dev/null)
[ "$first" != "$other" ] || fail "REPROD_ENTROPY=7 and =8 print the same numbers"
free1=$(run 2>"$BUILD/entropy_python.err")
quiet=$(cat "$BUILD/entropy_python.err")
free2=$(run 2>/dev/null)
[ "$free1" != "$free2" ] || fail "without REPROD_ENTROPY two runs print the same: '$free1'"
[ "$free1" != "$first" ] || fail "without REPROD_ENTROPY the pinned numbers appear"
ok "random and numpy.random.default_rng repeat with REPROD_ENTROPY=7 ($first), not without"

echo "$warning" | grep -q "^reprod\[0\]: warning: REPROD_ENTROPY=7: .*for debugging only" ||
    fail "no start-up warning on stderr with REPROD_ENTROPY=7: '$warning'"
[ "$(echo "$warning" | wc -l)" -eq 1 ] || fail "more than the warning on stderr: '$warning'"
[ -z "$quiet" ] || fail "without REPROD_ENTROPY the shim wrote: '$quiet'"
ok "one warning on stderr with REPROD_ENTROPY, nothing without"

# A fork: the child re-keys its stream (random reseeds itself from os.urandom in the child).
read -r -d '' FORKING <<'EOF'
import os, random, numpy
for child in (1, 2):
    pid = os.fork()
    if pid == 0:
        print("child%d" % child, os.urandom(8).hex(), random.random(),
              numpy.random.default_rng().random(), flush=True)
        os._exit(0)
    os.waitpid(pid, 0)
print("parent", os.urandom(8).hex(), random.random(), numpy.random.default_rng().random(), flush=True)
EOF
fork_run() { REPROD_ENTROPY=7 LD_PRELOAD="$PRELOAD" "$PYTHON" -c "$FORKING" 2>/dev/null; }
one=$(fork_run)
two=$(fork_run)
[ "$one" = "$two" ] || fail "with a fork, two runs differ: '$one' vs '$two'"
child1=$(echo "$one" | sed -n 's/^child1 //p')
child2=$(echo "$one" | sed -n 's/^child2 //p')
parent=$(echo "$one" | sed -n 's/^parent //p')
[ -n "$child1" ] && [ -n "$child2" ] && [ -n "$parent" ] || fail "the forking program printed: '$one'"
for field in 1 2 3; do # os.urandom, random, numpy
    a=$(echo "$child1" | cut -d' ' -f$field)
    b=$(echo "$child2" | cut -d' ' -f$field)
    c=$(echo "$parent" | cut -d' ' -f$field)
    [ "$a" != "$c" ] && [ "$b" != "$c" ] || fail "a child drew what the parent drew: '$one'"
    [ "$a" != "$b" ] || fail "the two children drew the same: '$one'"
done
ok "after os.fork, parent and each child draw different streams, each repeating over runs"

rm -f "$BUILD/entropy_python.err"
