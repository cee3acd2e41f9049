"""torch_one_rank.py: a one-rank torch.distributed NCCL job, for `make test-gpu` under the shim.

  check  every float type with SUM, AVG and a PreMulSum, plus a collective captured in a CUDA
         graph and replayed: the job runs, and one rank gets its own input back bitwise.
  time   median seconds of a 64 MiB float32 all_reduce (the script runs it natively and under
         the shim, interleaved, and prints the ratio).
"""
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "check"
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("nccl", rank=0, world_size=1)
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    if mode == "check":
        for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            x = torch.randn(1 << 20, dtype=dtype, device=device)
            for op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG):
                y = x.clone()
                dist.all_reduce(y, op=op)
                assert torch.equal(x, y), (dtype, op)
            premul = getattr(dist, "_make_nccl_premul_sum", None)
            if premul is not None:
                y = x.clone()
                dist.all_reduce(y, op=premul(2.0))
                assert torch.equal(y, x * 2), (dtype, "premul")
        z = torch.randn(1 << 16, device=device)
        expected = z.clone()
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            dist.all_reduce(z)  # warm-up outside the capture, as PyTorch requires
            z.copy_(expected)
            with torch.cuda.graph(graph, stream=stream):
                dist.all_reduce(z)
        torch.cuda.current_stream().wait_stream(stream)
        for _ in range(3):
            z.copy_(expected)
            graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(z, expected), "graph replay"
        print("ok: torch one rank, every float type, sum/avg/premul, graph replay")
    else:
        x = torch.randn(16 << 20, device=device)
        times = []
        for _ in range(25):
            torch.cuda.synchronize()
            start = time.perf_counter()
            dist.all_reduce(x)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        print(f"{statistics.median(times[5:]):.6f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
