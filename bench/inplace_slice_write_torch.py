#!/usr/bin/env python3
"""PyTorch twin of bench/inplace_slice_write.trace: the cache copied, 16 positions written in place,
summed; median of 20 on cuda. Usage: python3 bench/inplace_slice_write_torch.py"""
import torch, time
cache = torch.randn(8, 32, 2048, 128, device="cuda").bfloat16()
k = torch.randn(8, 32, 16, 128, device="cuda").bfloat16()
def step():
    c = cache * 1
    c[:, :, 1000:1016].copy_(k)
    return c.sum()
for _ in range(3): step()
torch.cuda.synchronize()
ts = []
for _ in range(20):
    t0 = time.perf_counter(); step(); torch.cuda.synchronize(); ts.append((time.perf_counter() - t0) * 1e3)
ts.sort()
print(f"torch eager: median {ts[10]:.3f} ms (min {ts[0]:.3f})")
