#!/usr/bin/env python3
"""PyTorch twins of the workloads (DESIGN section 6), timed the way tracer's --bench times them:
median of N runs after warm-up, CUDA events; peak = torch.cuda.max_memory_allocated over one run
(absolute: parameters, inputs, activations, gradients). Prints one JSON object per line.

  python3 bench/torch_twins.py copy            # device copy bandwidth (read + write)
  python3 bench/torch_twins.py launch          # host time per tiny op, eager
  python3 bench/torch_twins.py chain eager|compile
  python3 bench/torch_twins.py llama eager|compile [--checkpoint]
  python3 bench/torch_twins.py attention eager|flash|cudnn|math  # bench/attention.trace: SDPA (PyTorch's choice, its
                                                      # flash or cuDNN backend) or the unfused math
  python3 bench/torch_twins.py gpt eager|compile [--checkpoint] [--write FILE.safetensors] [--size B,T,V,D,NH,L]
"""
import json
import statistics
import sys

import os

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def timed(fn, runs=20, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(runs):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts), min(ts), max(ts)


def step_peak(step, zero_grads):
    """The peak of one training step (after a warm-up step), grads set to None before each."""
    step()
    torch.cuda.synchronize()
    zero_grads()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated()


def copy():
    x = torch.randn(1 << 28, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    med, lo, hi = timed(lambda: y.copy_(x), runs=50)
    return {"workload": "copy", "median_ms": med, "min_ms": lo, "max_ms": hi, "tb_per_s": 2 * x.numel() * 2 / med / 1e9}


def chain(mode):
    R = C = 16384
    x = torch.randn(R, C, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(C, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(C, device="cuda", dtype=torch.bfloat16)

    def f(x, w, b):
        return F.dropout(F.gelu(x * w + b), 0.1)

    g = torch.compile(f) if mode == "compile" else f
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    med, lo, hi = timed(lambda: g(x, w, b))
    peak = torch.cuda.max_memory_allocated()
    return {"workload": "chain", "mode": mode, "median_ms": med, "min_ms": lo, "max_ms": hi, "peak_bytes": peak,
            "tb_per_s": 2 * R * C * 2 / med / 1e9}


def llama(mode, ckpt, normal=False):
    T, L, D, H = 8192, 8, 4096, 11008
    dt = torch.bfloat16
    # The data tracer draws for its inputs: uniform in [-1, 1) (api/inputs.cpp). The data matter:
    # a GPU's matmul clocks depend on how many bits toggle.
    # --normal: the earlier data, N(0, 1) input and N(0, 0.02^2) weights, for comparison.
    def uniform(*shape):
        if normal:
            scale = 1.0 if shape == (T, D) else 0.02
            return (torch.randn(*shape, device="cuda", dtype=torch.float32) * scale).to(dt).requires_grad_()
        return (torch.rand(*shape, device="cuda", dtype=torch.float32) * 2 - 1).to(dt).requires_grad_()

    params = [[uniform(H, D), uniform(H, D), uniform(D, H)] for _ in range(L)]
    x = uniform(T, D)

    def block(x, fc1, fc2, proj):
        n = F.rms_norm(x, (D,), eps=1e-6)
        return x + F.dropout(F.linear(F.silu(F.linear(n, fc1)) * F.linear(n, fc2), proj), 0.1)

    def model(x):
        for fc1, fc2, proj in params:
            if ckpt:
                x = torch.utils.checkpoint.checkpoint(block, x, fc1, fc2, proj, use_reentrant=False)
            else:
                x = block(x, fc1, fc2, proj)
        return (x.float() ** 2).mean()

    m = torch.compile(model) if mode == "compile" else model

    def zero_grads():
        for ps in params:
            for p in ps:
                p.grad = None
        x.grad = None

    def step():
        zero_grads()
        m(x).backward()

    peak = step_peak(step, zero_grads)
    med, lo, hi = timed(step, runs=5, warmup=1)
    return {"workload": "llama_mlp" + ("_checkpoint" if ckpt else ""), "mode": mode, "median_ms": med, "min_ms": lo,
            "max_ms": hi, "peak_bytes": peak}


def attention(mode, B=4, H=16, L=2048, E=128):
    """bench/attention.trace: causal attention of bf16 heads, forward and backward, loss sum(o^2) in
    f32. eager: F.scaled_dot_product_attention (PyTorch picks the kernel); flash, cudnn: its flash or
    cuDNN backend forced; math: the unfused
    softmax(q k^T * scale) v, whose scores exist whole (what tracer did before prims.attention)."""
    def uniform(*shape):
        return (torch.rand(*shape, device="cuda", dtype=torch.float32) * 2 - 1).to(torch.bfloat16).requires_grad_()

    q, k, v = uniform(B, H, L, E), uniform(B, H, L, E), uniform(B, H, L, E)

    def f():
        if mode == "math":
            s = (q.float() @ k.float().transpose(-2, -1)) * (E ** -0.5)
            s = s.masked_fill(torch.ones(L, L, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
            o = (torch.softmax(s, -1) @ v.float()).to(torch.bfloat16)
        elif mode in ("flash", "cudnn"):
            from torch.nn.attention import SDPBackend, sdpa_kernel
            backend = SDPBackend.FLASH_ATTENTION if mode == "flash" else SDPBackend.CUDNN_ATTENTION
            with sdpa_kernel(backend):
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return (o.float() ** 2).sum()

    def zero_grads():
        q.grad = k.grad = v.grad = None

    def step():
        zero_grads()
        f().backward()

    peak = step_peak(step, zero_grads)
    med, lo, hi = timed(step, runs=10, warmup=2)
    flops = 4 * B * H * L * L * E * 0.5 * 3.5  # causal: half the products; backward 2.5x the forward
    return {"workload": "attention", "mode": mode, "median_ms": med, "min_ms": lo, "max_ms": hi, "peak_bytes": peak,
            "tflops": flops / med / 1e9}


def count_kernels(step):
    """CUDA kernels one call of step launches (torch.profiler's kernel events)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def gpt(mode, ckpt, write=None, size=None):
    """examples/gpt.trace's twin (bench/gpt_torch.py): forward and backward of GPT-2 small at batch
    8, bf16. --write saves the parameters and batch for tracer's --input, so both run on the same
    data (GPT-2's initialisation; the data matter: matmul clocks depend on the bits)."""
    import gpt_torch
    dims = dict(zip(["B", "T", "V", "D", "NH", "L"], size)) if size else gpt_torch.FULL
    inputs = gpt_torch.make_inputs(**dims)
    if write:
        gpt_torch.save_safetensors(write, inputs)
    params = {k: (v.requires_grad_() if v.is_floating_point() else v) for k, v in inputs.items()}
    f = lambda: gpt_torch.loss_fn(params, **dims, checkpoint=ckpt)
    m = torch.compile(f) if mode == "compile" else f

    def zero_grads():
        for v in params.values():
            v.grad = None

    def step():
        zero_grads()
        m().backward()

    peak = step_peak(step, zero_grads)
    med, lo, hi = timed(step, runs=10, warmup=2)
    tokens = dims["B"] * dims["T"]
    return {"workload": "gpt" + ("_checkpoint" if ckpt else ""), "mode": mode, "median_ms": med, "min_ms": lo, "max_ms": hi,
            "peak_bytes": peak, "tokens_per_s": tokens / med * 1e3, "kernels": count_kernels(step), "dims": dims}


def launch(n=500):
    x = torch.randn(256, device="cuda")

    def f():
        y = x
        for _ in range(n):
            y = y * 1.0001 + 0.001
        return y

    med, lo, hi = timed(f, runs=20)
    return {"workload": "launch", "mode": "eager", "ops": 2 * n, "median_ms": med, "us_per_op": med * 1000 / (2 * n)}


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "copy":
        r = copy()
    elif what == "launch":
        r = launch()
    elif what == "chain":
        r = chain(sys.argv[2])
    elif what == "attention":
        r = attention(sys.argv[2])
    elif what == "gpt":
        opt = lambda k: sys.argv[sys.argv.index(k) + 1] if k in sys.argv else None
        size = opt("--size")
        r = gpt(sys.argv[2], "--checkpoint" in sys.argv, opt("--write"), [int(x) for x in size.split(",")] if size else None)
    else:
        r = llama(sys.argv[2], "--checkpoint" in sys.argv, "--normal" in sys.argv)
        r["data"] = "normal" if "--normal" in sys.argv else "uniform(-1, 1) as tracer's"
    r["torch"] = torch.__version__
    r["gpu"] = torch.cuda.get_device_name()
    print(json.dumps(r))
