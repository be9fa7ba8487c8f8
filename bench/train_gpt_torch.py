#!/usr/bin/env python3
"""PyTorch's twin of examples/train_gpt.trace: the same model (bench/gpt_torch.py's loss), the same
initialisation, task, optimizer and schedule, so that the two loss curves can be compared on one
GPU. The data differ in their random draws only (each sequence repeats a random block of K tokens;
tracer draws them with Philox, this script with torch's generator), so the curves agree in shape
and level, not bit for bit.

  python3 bench/train_gpt_torch.py [--steps 60] [--log 10] [--clip 1.0] [--compile]
      [--B 8 --T 1024 --V 50304 --D 768 --NH 12 --L 12 --K 8 --lr 3e-3 --warmup 15]

Prints one line per --log steps as train_gpt.trace does (step, loss, lr, grad norm, tokens/s).
"""
import argparse
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_torch  # noqa: E402


def init_params(B, T, V, D, NH, L, seed):
    """train_gpt.trace's init_params: N(0, 0.02) weights (wpe 0.01), residual projections scaled by
    1/sqrt(2L), zero biases, unit norms, bf16."""
    g = torch.Generator(device="cpu").manual_seed(seed)

    def normal(*shape, std):
        return (torch.randn(*shape, generator=g) * std).to(torch.bfloat16).cuda()

    def fill(n, v):
        return torch.full((n,), v, dtype=torch.bfloat16, device="cuda")

    r = 0.02 / math.sqrt(2 * L)
    p = {"wte": normal(V, D, std=0.02), "wpe": normal(T, D, std=0.01)}
    for i in range(L):
        p[f"ln1_w_{i}"], p[f"ln1_b_{i}"] = fill(D, 1.0), fill(D, 0.0)
        p[f"qkv_w_{i}"], p[f"qkv_b_{i}"] = normal(3 * D, D, std=0.02), fill(3 * D, 0.0)
        p[f"proj_w_{i}"], p[f"proj_b_{i}"] = normal(D, D, std=r), fill(D, 0.0)
        p[f"ln2_w_{i}"], p[f"ln2_b_{i}"] = fill(D, 1.0), fill(D, 0.0)
        p[f"fc_w_{i}"], p[f"fc_b_{i}"] = normal(4 * D, D, std=0.02), fill(4 * D, 0.0)
        p[f"out_w_{i}"], p[f"out_b_{i}"] = normal(D, 4 * D, std=r), fill(D, 0.0)
    p["lnf_w"], p["lnf_b"] = fill(D, 1.0), fill(D, 0.0)
    return p


def learning_rate(step, lr, total, warmup, low):
    """optim.cosine: linear warm-up to lr, then a cosine decay to low at step total."""
    if step <= warmup:
        return lr * step / warmup
    progress = min(1.0, (step - warmup) / (total - warmup))
    return low + 0.5 * (lr - low) * (1.0 + math.cos(math.pi * progress))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--log", type=int, default=10)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--compile", action="store_true", help="torch.compile the loss")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=15)
    ap.add_argument("--seed", type=int, default=1234)
    for k, v in dict(gpt_torch.FULL, K=8).items():
        ap.add_argument("--" + k, type=int, default=v)
    a = ap.parse_args()
    dims = {k: getattr(a, k) for k in gpt_torch.FULL}
    B, T, V, K = a.B, a.T, a.V, a.K
    params = init_params(**dims, seed=a.seed)
    for v in params.values():
        v.requires_grad_()
    leaves = list(params.values())
    decay = [v for v in leaves if v.ndim >= 2]
    no_decay = [v for v in leaves if v.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    data = torch.Generator(device="cpu").manual_seed(a.seed)
    reps = (T + 1 + K - 1) // K

    def batch():
        block = torch.randint(0, V, (B, K), generator=data)
        seq = block.repeat(1, reps).cuda()
        return seq[:, :T], seq[:, 1:T + 1]

    def loss_of(idx, targets):
        return gpt_torch.loss_fn(dict(params, idx=idx, targets=targets), **dims)

    f = torch.compile(loss_of) if a.compile else loss_of
    print("train_gpt_torch: B=%d T=%d V=%d D=%d NH=%d L=%d, %d steps; uniform guess ln(V) = %.3f, floor %.3f (torch %s, %s%s)"
          % (B, T, V, a.D, a.NH, a.L, a.steps, math.log(V), (K - 1) / T * math.log(V), torch.__version__,
             torch.cuda.get_device_name(), ", compiled" if a.compile else ""), flush=True)
    pending, norm = [], torch.zeros(())
    t_log, since = time.perf_counter(), 0
    for step in range(1, a.steps + 1):
        lr = learning_rate(step, a.lr, a.steps, a.warmup, a.lr / 10)
        for gr in opt.param_groups:
            gr["lr"] = lr
        opt.zero_grad(set_to_none=True)
        idx, targets = batch()
        loss = f(idx, targets)
        loss.backward()
        if a.clip > 0:
            norm = torch.nn.utils.clip_grad_norm_(leaves, a.clip, foreach=True)
        opt.step()
        pending.append(loss.detach())
        since += 1
        if step % a.log == 0 or step == a.steps or step == 1:
            last = float(pending[-1])
            pending = []
            now = time.perf_counter()
            print("step %4d  loss %.4f  lr %.2e  grad norm %.3f  %.0f tokens/s  memory %.1f MiB"
                  % (step, last, lr, float(norm), B * T * since / max(1e-9, now - t_log), torch.cuda.max_memory_allocated() / 2**20),
                  flush=True)
            t_log, since = time.perf_counter(), 0


if __name__ == "__main__":
    main()
