#!/usr/bin/env bash
# torch's DataLoader with 2 workers under the shim (docs/seeding.md, "Python"): each worker seeds
# random and torch with base_seed + worker_id (both derived) and NumPy with four words torch makes
# from them (a list: passed unchanged). Two runs give the same batches; in each worker the first
# draw of random equals a native random.seed(derivation of base_seed + worker_id), and NumPy's
# equals a native np.random.seed of torch's words.
. tests/lib.sh

unset RANK OMPI_COMM_WORLD_RANK PMI_RANK PMIX_RANK SLURM_PROCID PYTHONPATH
"$PYTHON" -c 'import torch, numpy' 2>/dev/null || skip "$PYTHON has no torch or numpy"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat >"$work/loader.py" <<'EOF'
import random, numpy, torch
from torch.utils.data import DataLoader, Dataset, get_worker_info
class Draws(Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, index):
        info = get_worker_info()
        return info.id, info.seed, random.random(), numpy.random.random(), torch.rand(1).item()
if __name__ == "__main__":
    torch.manual_seed(42)
    for batch in DataLoader(Draws(), batch_size=2, num_workers=2):
        for row in zip(*[column.tolist() for column in batch]):
            print(*row)
EOF
first=$(LD_PRELOAD=$PRELOAD bounded 120 "$PYTHON" "$work/loader.py") || fail "DataLoader under the shim failed"
second=$(LD_PRELOAD=$PRELOAD REPROD_VERBOSE=2 bounded 120 "$PYTHON" "$work/loader.py" 2>"$work/log") ||
    fail "DataLoader under the shim failed (second run)"
[ "$first" = "$second" ] || fail "two runs under the shim differ: $(diff <(echo "$first") <(echo "$second"))"
[ "$(echo "$first" | wc -l)" = 8 ] || fail "expected 8 rows: $first"
ok "DataLoader, 2 workers: the same batches in two runs under the shim"

# Each worker's first draw (the first row it made), against a native run of the documented seeding.
for worker in 0 1; do
    row=$(echo "$first" | awk -v w=$worker '$1 == w' | head -1)
    seed=$(echo "$row" | cut -d' ' -f2) # base_seed + worker_id
    derived=$(derive hash 0 64 "$seed")
    grep -qF "seed: random.Random.seed $seed -> $derived (policy hash" "$work/log" ||
        fail "worker $worker: no log line for random.seed($seed): $(cat "$work/log")"
    want=$("$PYTHON" -c "
import random, numpy
from torch.utils.data._utils.worker import _generate_state
random.seed($derived); numpy.random.seed(_generate_state($seed - $worker, $worker))
print(random.random(), numpy.random.random())")
    got=$(echo "$row" | cut -d' ' -f3,4)
    [ "$got" = "$want" ] || fail "worker $worker (seed $seed): got $got, expected $want"
done
ok "each worker: random seeded with the derivation of base_seed + worker_id, NumPy with torch's words unchanged"
