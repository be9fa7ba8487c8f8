#!/usr/bin/env python3
"""PyTorch's twin of bench/sort_probe.trace: torch.topk and torch.sort (stable) on the same shapes
and dtypes, on cuda, median of 50 timed runs after 5 warm-ups (CUDA events)."""
import torch

cases = {
    "router_top2": (lambda x: torch.topk(x, 2, -1, True, True), (16384, 64), torch.bfloat16),
    "sample_top50": (lambda x: torch.topk(x, 50, -1, True, True), (512, 1024), torch.float32),
    "sort_rows": (lambda x: torch.sort(x, dim=-1, descending=False, stable=True), (4096, 1024), torch.float32),
}
for name, (fn, shape, dt) in cases.items():
    x = torch.randn(*shape, device="cuda").to(dt)
    for _ in range(5):
        fn(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(50):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(x)
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    print(f"torch {name}: median {times[len(times) // 2]:.4f} ms")
