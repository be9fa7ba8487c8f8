#!/usr/bin/env python3
"""PyTorch twins of examples/llama_mlp_fsdp.trace and examples/llama_mlp_tp.trace under torchrun:
FSDP2 (fully_shard on each block; ZeRO-3 reshards after forward, ZeRO-2 does not) and tensor
parallelism (DTensor: fc1/fc2 ColwiseParallel, proj RowwiseParallel). One step is forward and
backward (no optimizer), timed as tracer's --bench times it (median of N after warm-up, CUDA
events); peak = torch.cuda.max_memory_allocated over one step, per rank. Prints one JSON object
per rank.

  torchrun --nproc_per_node 2 bench/torch_fsdp.py fsdp --zero 3 [--T 8192 --L 8 --D 4096 --H 11008]
  torchrun --nproc_per_node 2 bench/torch_fsdp.py tp [--T 8192 ...]
"""
import argparse
import json
import os
import statistics

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, D, H, dropout):
        super().__init__()
        self.fc1 = nn.Linear(D, H, bias=False)
        self.fc2 = nn.Linear(D, H, bias=False)
        self.proj = nn.Linear(H, D, bias=False)
        self.dropout = dropout

    def forward(self, x):
        n = F.rms_norm(x, (x.shape[-1],), eps=1e-6)
        return x + F.dropout(self.proj(F.silu(self.fc1(n)) * self.fc2(n)), self.dropout)


class Model(nn.Module):
    def __init__(self, L, D, H, dropout):
        super().__init__()
        self.blocks = nn.ModuleList([Block(D, H, dropout) for _ in range(L)])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return (x.float() ** 2).mean()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["fsdp", "tp"])
    ap.add_argument("--zero", type=int, default=3, choices=[2, 3])
    ap.add_argument("--T", type=int, default=8192)
    ap.add_argument("--L", type=int, default=8)
    ap.add_argument("--D", type=int, default=4096)
    ap.add_argument("--H", type=int, default=11008)
    ap.add_argument("--runs", type=int, default=10)
    a = ap.parse_args()
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, world = dist.get_rank(), dist.get_world_size()
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cuda", (world,))
    torch.manual_seed(0)
    # tracer's llama_mlp_tp leaves dropout out (its draws would differ between ranks).
    model = Model(a.L, a.D, a.H, 0.1 if a.mode == "fsdp" else 0.0).to(device="cuda", dtype=torch.bfloat16)
    if a.mode == "fsdp":
        from torch.distributed.fsdp import fully_shard
        for b in model.blocks:
            fully_shard(b, mesh=mesh, reshard_after_forward=(a.zero == 3))
        fully_shard(model, mesh=mesh, reshard_after_forward=(a.zero == 3))
        x = torch.randn(a.T, a.D, device="cuda", dtype=torch.bfloat16)  # each rank its own tokens
    else:
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
        for b in model.blocks:
            parallelize_module(b, mesh, {"fc1": ColwiseParallel(), "fc2": ColwiseParallel(), "proj": RowwiseParallel()})
        g = torch.Generator(device="cuda").manual_seed(1)
        x = torch.randn(a.T, a.D, device="cuda", dtype=torch.bfloat16, generator=g)  # the same tokens on every rank

    def step():
        loss = model(x)
        loss.backward()
        for p in model.parameters():
            p.grad = None
        return loss

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    ts = []
    for _ in range(a.runs):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        step()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    print(json.dumps({"twin": "torch " + a.mode + (" zero=%d" % a.zero if a.mode == "fsdp" else ""), "rank": rank, "world": world,
                      "T": a.T, "L": a.L, "D": a.D, "H": a.H, "median_ms": statistics.median(ts), "min_ms": min(ts),
                      "peak_bytes": peak, "torch": torch.__version__}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
