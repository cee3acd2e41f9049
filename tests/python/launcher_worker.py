"""A torchrun worker for tests/runtime/launchers.sh: joins the gloo group on localhost, seeds torch
with 42 + its rank (the form policy rank is for), draws entropy, and prints its rank, pid and
torch.initial_seed() on stdout, in one write."""
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(42 + rank)
os.urandom(16)
ones = torch.ones(4)
dist.all_reduce(ones)
assert ones.tolist() == [float(dist.get_world_size())] * 4
# One write: the two workers share the agent's stdout, and an unbuffered print writes its end
# apart (the other worker's line could come between).
os.write(1, b"worker rank %d pid %d initial_seed %d\n" % (rank, os.getpid(), torch.initial_seed()))
dist.destroy_process_group()
