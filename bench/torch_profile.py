#!/usr/bin/env python3
"""Where PyTorch's GPT step spends its device time (torch.profiler's CUDA kernel events), grouped
as tracer's TRACER_GPU_PROFILE groups its statements, so the two can be compared kernel class by
kernel class: matmuls (cuBLAS/CUTLASS gemm kernels), attention (flash/cuDNN/efficient SDPA
kernels), and the rest (Triton kernels under torch.compile, ATen's elementwise/reduction kernels
in eager), with the 25 slowest kernels.

  python3 bench/torch_profile.py eager|compile [--size B,T,V,D,NH,L]
"""
import collections
import sys
import os

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_torch  # noqa: E402


def classify(name):
    n = name.lower()
    if any(k in n for k in ("flash", "fmha", "sdpa", "attention", "cudnn")):
        return "attention"
    if any(k in n for k in ("gemm", "cutlass", "sm90_xmma", "nvjet", "cublas")):
        return "matmul"
    if "triton" in n:
        return "triton"
    return "other"


def warm_step(mode, argv):
    """GPT's forward and backward (torch.compile'd for mode "compile"), at --size B,T,V,D,NH,L or
    GPT-2 small's, run three times; the step to profile."""
    size = argv[argv.index("--size") + 1] if "--size" in argv else None
    dims = dict(zip(["B", "T", "V", "D", "NH", "L"], map(int, size.split(",")))) if size else gpt_torch.FULL
    inputs = gpt_torch.make_inputs(**dims)
    params = {k: (v.requires_grad_() if v.is_floating_point() else v) for k, v in inputs.items()}
    f = lambda: gpt_torch.loss_fn(params, **dims)
    m = torch.compile(f) if mode == "compile" else f

    def step():
        for v in params.values():
            v.grad = None
        m().backward()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    return step


def main():
    mode = sys.argv[1]
    step = warm_step(mode, sys.argv)
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    groups = collections.defaultdict(lambda: [0.0, 0])
    kernels = []
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        ms = e.device_time / 1e3 if hasattr(e, "device_time") else e.cuda_time / 1e3
        g = groups[classify(e.name)]
        g[0] += ms
        g[1] += 1
        kernels.append((ms, e.name))
    total = sum(g[0] for g in groups.values())
    print(f"# torch {mode}: device time of one step's kernels {total:.3f} ms, {sum(g[1] for g in groups.values())} kernels")
    for k, (ms, n) in sorted(groups.items(), key=lambda kv: -kv[1][0]):
        print(f"#   {ms:8.3f} ms  {n:4d}x  {k}")
    print("# slowest kernels:")
    for ms, n in sorted(kernels, reverse=True)[:25]:
        print(f"#   {ms:8.3f} ms  {n[:150]}")


if __name__ == "__main__":
    main()
