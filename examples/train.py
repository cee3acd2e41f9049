#!/usr/bin/python3
"""Data-parallel training as people write it: a PyTorch MLP on scikit-learn's digits, gradients
all-reduced with mpi4py (as Horovod does; Debian's PyTorch has no MPI backend).

    mpirun -np 4 /usr/bin/python3 examples/train.py [--steps 40]

Each step takes a global batch of a fixed number of micro-batches of a fixed size, dealt to the
ranks in blocks; a rank computes each of its micro-batches' gradients, sums them, and the sum of
those sums over the ranks (one MPI_Allreduce, MPI_SUM) is the step's gradient. Rank 0 prints
`step <i> loss <float.hex()>` per step and, last, `weights <sha256 of the final parameters>`.

Three generators, seeded as such scripts seed them: NumPy shuffles (default_rng), Python's
random augments (a random brightness per sample), PyTorch initialises and draws dropout masks.
"""
import argparse
import hashlib
import random

import numpy as np
import torch
from mpi4py import MPI
from sklearn.datasets import load_digits


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--micro-batch", type=int, default=32, help="samples per micro-batch")
    parser.add_argument("--micro-batches", type=int, default=4, help="micro-batches per step")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args()

    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    if args.micro_batches % world:
        raise SystemExit(f"{args.micro_batches} micro-batches cannot be dealt to {world} ranks")
    per_rank = args.micro_batches // world
    mine = range(rank * per_rank, (rank + 1) * per_rank)  # the micro-batches this rank holds

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    digits = load_digits()
    inputs = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    labels = torch.tensor(digits.target, dtype=torch.int64)

    torch.manual_seed(args.seed)  # the same initial weights on every rank
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Dropout(0.1), torch.nn.Linear(64, 10)
    )
    params = list(model.parameters())
    sizes = [p.numel() for p in params]
    optimizer = torch.optim.SGD(params, lr=args.lr, momentum=0.9)
    global_batch = args.micro_batch * args.micro_batches

    for step in range(args.steps):
        # Shuffling and dropout are seeded per step and per micro-batch, never per rank: the
        # same micro-batches, with the same masks, whatever the world size.
        order = np.random.default_rng(args.seed + step).permutation(len(labels))[:global_batch]
        total = np.zeros(sum(sizes) + 1, dtype=np.float64)  # gradients, then the loss
        for micro in mine:
            index = torch.from_numpy(order[micro * args.micro_batch : (micro + 1) * args.micro_batch])
            seed = args.seed * 1000003 + step * args.micro_batches + micro
            augment = random.Random(seed)  # augmentation: each sample's brightness
            brightness = torch.tensor([augment.uniform(0.9, 1.1) for _ in index]).reshape(-1, 1)
            torch.manual_seed(seed)
            model.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(inputs[index] * brightness), labels[index])
            loss.backward()
            gradient = torch.cat([p.grad.reshape(-1) for p in params] + [loss.detach().reshape(1)])
            total += gradient.numpy()  # float32 terms summed in float64: exact (docs/design.md)
        # The application's side: what a rank sends must be exact. One micro-batch's float32
        # gradient is; a sum of several is exact in float64, not in float32. So a rank that holds
        # one micro-batch sends float32, one that holds several sends the float64 sum.
        send = total.astype(np.float32) if per_rank == 1 else total
        comm.Allreduce(MPI.IN_PLACE, send, op=MPI.SUM)
        mean = torch.from_numpy(send.astype(np.float32)) / args.micro_batches

        offset = 0
        for p, size in zip(params, sizes):
            p.grad = mean[offset : offset + size].reshape(p.shape).clone()
            offset += size
        optimizer.step()
        if rank == 0:
            print(f"step {step} loss {float(mean[-1]).hex()}", flush=True)

    if rank == 0:
        weights = b"".join(p.detach().numpy().tobytes() for p in params)
        print(f"weights {hashlib.sha256(weights).hexdigest()}", flush=True)


if __name__ == "__main__":
    main()
