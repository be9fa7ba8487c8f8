#!/usr/bin/env python3
"""tests/gpu/inplace.trace on tracer against PyTorch's own in-place ops on the same data: writes
through slices, a transpose, a strided slice, a mask, relu(inplace=True), and f32 values into a
bf16 tensor, where PyTorch writes memory and tracer writes values (prims.copy_,
prims.update_aliases). ||tracer - torch|| / ||torch|| within compare.py's tolerances.
Usage: inplace_torch.py [TRACER] [DEVICE]   (needs torch and safetensors)"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402

TRACER = sys.argv[1] if len(sys.argv) > 1 else "build/tracer"
DEVICE = sys.argv[2] if len(sys.argv) > 2 else "cuda"
dev = "cuda" if DEVICE.startswith("cuda") else "cpu"
g = torch.Generator().manual_seed(5)
x = torch.randn(4, 6, 8, generator=g).to(dev)
k = torch.randn(4, 6, 3, generator=g).to(dev)
m = (torch.rand(6, 8, generator=g) < 0.3).to(dev)
z = torch.randn(4, 6, 4, generator=g).to(dev)
h = torch.randn(8, 16, generator=g).to(dev).bfloat16()
s = torch.randn(16, generator=g).to(dev)
got = compare.run_tracer(TRACER, "tests/gpu/inplace.trace", "inplace", dict(x=x, k=k, m=m, z=z, h=h, s=s), DEVICE)

# PyTorch: the same program, its in-place ops writing memory (views see the writes).
c = x.clone()
c[:, :, 2:5].copy_(k)
out1 = (c * 2).sum(-1)
y = x.clone()
v = y.transpose(0, 2)
v[1:3].mul_(3.0)
y[:, :, ::2].add_(z)
y[0].masked_fill_(m, -2.0)
torch.nn.functional.relu(v[5], inplace=True)
gg = h.clone()
gg[2].copy_(s)
gg.t()[3:9:2].exp_()
want = dict(c=c, out1=out1, y=y, v=v, g=gg)

fail = 0
for name, w in want.items():
    fail |= not compare.against_torch("inplace", name, w, got)
print("INPLACE " + ("FAIL" if fail else "ok"))
sys.exit(fail)
