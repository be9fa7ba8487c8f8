#!/usr/bin/env python3
"""PyTorch's twin of a full GPT-2-small training step (forward, backward, AdamW) on one GPU:
torch.compile of bench/gpt_torch.py's loss with torch.optim.AdamW(fused=True), bf16 parameters as
tracer's examples/train_gpt.trace keeps them. Prints one JSON line: the median step (ms; the host waits after each), the mean
of the same steps back to back (pipelined_ms: one wait at the end, as tracer's is measured), and the
optimizer step alone (ms), with the copy bandwidth measured in the same process and the bytes the
optimizer reads and writes (parameters, gradients, two moments: read 4, write 3 per element).

  python3 bench/train_step_torch.py [--runs 20] [--clip 1.0]
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_torch  # noqa: E402


def timed(fn, runs, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--clip", type=float, default=0.0, help="clip the gradients' global norm to this (0: not clipped)")
    a = ap.parse_args()
    dims = gpt_torch.FULL
    inputs = gpt_torch.make_inputs(**dims)
    params = {k: (v.requires_grad_() if v.is_floating_point() else v) for k, v in inputs.items()}
    leaves = [v for v in params.values() if v.is_floating_point()]
    opt = torch.optim.AdamW(leaves, lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    m = torch.compile(lambda: gpt_torch.loss_fn(params, **dims))

    def step():
        opt.zero_grad(set_to_none=True)
        m().backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(leaves, a.clip, foreach=True)
        opt.step()

    step_ms = timed(step, a.runs)
    # As bench/train_phases.trace measures tracer's: the steps back to back, one wait at the end.
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.runs):
        step()
    torch.cuda.synchronize()
    pipelined_ms = (time.perf_counter() - t0) * 1e3 / a.runs
    opt_ms = timed(opt.step, a.runs)
    n = sum(v.numel() for v in leaves)
    es = leaves[0].element_size()
    opt_bytes = n * es * 7  # p, g, m, v read; p, m, v written (moments in the parameters' dtype)
    x = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    copy_ms = timed(lambda: y.copy_(x), 20)
    copy_gbs = 2 * x.numel() / (copy_ms * 1e-3) / 1e9
    print(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name(), "clip": a.clip, "step_ms": round(step_ms, 3),
                      "pipelined_ms": round(pipelined_ms, 3),
                      "optimizer_ms": round(opt_ms, 3), "optimizer_GBps": round(opt_bytes / (opt_ms * 1e-3) / 1e9, 1),
                      "copy_GBps": round(copy_gbs, 1), "params": n, "tokens": dims["B"] * dims["T"]}))


if __name__ == "__main__":
    main()
