#!/usr/bin/env python3
"""tests/gpu/executors.trace on tracer against PyTorch on the same data: the executors' operators
of stdlib/executors.trace (the torch executor's cross-entropy and nll_loss backward, ATen's
batch-norm forward and backward and _log_softmax_backward_data, apex's RMS norm) against
PyTorch's own ATen kernels (torch.ops.aten.*) or its autograd, on the same device
(||tracer - torch|| / ||torch||, compare.py's tolerances).
Usage: executors_torch.py [TRACER] [DEVICE]   (needs torch and safetensors)"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402

TRACER = sys.argv[1] if len(sys.argv) > 1 else "build/tracer"
DEVICE = sys.argv[2] if len(sys.argv) > 2 else "cuda"
dev = "cuda" if DEVICE.startswith("cuda") else "cpu"
g = torch.Generator().manual_seed(11)
fail = 0

x = torch.randn(64, 1000, generator=g).to(dev) * 2
t = torch.randint(0, 1000, (64,), generator=g).to(dev)
t[::9] = 7  # ignore_index rows
w = (torch.rand(1000, generator=g) + 0.5).to(dev)
b = torch.randn(8, 16, 12, 12, generator=g).to(dev)
bw, bb, rm = (torch.randn(16, generator=g).to(dev) for _ in range(3))
rv = (torch.rand(16, generator=g) + 0.5).to(dev)
gb = torch.randn(8, 16, 12, 12, generator=g).to(dev)
h = torch.randn(32, 3, 256, generator=g).to(dev).bfloat16()
hw = torch.randn(256, generator=g).to(dev).bfloat16()
gh = torch.randn(32, 3, 256, generator=g).to(dev).bfloat16()
vol = torch.randn(2, 3, 5, 6, 7, generator=g).to(dev)
g3 = (torch.rand(2, 4, 3, 5, 3, generator=g) * 2 - 1).to(dev)
img = torch.randn(2, 3, 9, 11, generator=g).to(dev)
g2 = (torch.rand(2, 6, 7, 2, generator=g) * 2 - 1).to(dev)
inputs = dict(x=x, t=t, w=w, b=b, bw=bw, bb=bb, rm=rm, rv=rv, gb=gb, h=h, hw=hw, gh=gh, vol=vol, g3=g3, img=img, g2=g2)

got = compare.run_tracer(TRACER, "tests/gpu/executors.trace", "executors", inputs, DEVICE)


def check(name, want):
    global fail
    fail |= not compare.against_torch("executors", name, want, got)


xr = x.clone().requires_grad_()
ce = F.cross_entropy(xr, t, weight=w, ignore_index=7, label_smoothing=0.1)
ce.backward()
check("ce", ce)
check("ce_grad", xr.grad)
lsm = torch.log_softmax(x, 1)
tw = torch.tensor(0.0, device=dev, dtype=torch.float32)
check("nll_grad", torch.ops.aten.nll_loss_backward(torch.tensor(2.0, device=dev), lsm, t, w, 2, 7, tw))
check("lsm_grad", torch.ops.aten._log_softmax_backward_data(xr.grad, lsm, 1, torch.float32))
o, sm, si = torch.ops.aten.native_batch_norm(b, bw, bb, rm.clone(), rv.clone(), True, 0.1, 1e-5)
check("bn_out", o)
check("bn_mean", sm)
check("bn_invstd", si)
for pre, train in [("bn", True), ("ev", False)]:
    gx, gw_, gb_ = torch.ops.aten.native_batch_norm_backward(gb, b, bw, rm, rv, sm, si, train, 1e-5, [True, True, True])
    check(pre + "_gx", gx)
    check(pre + "_gw", gw_)
    check(pre + "_gb", gb_)
hr = h.clone().requires_grad_()
hwr = hw.clone().requires_grad_()
y = F.rms_norm(hr.float(), (256,), hwr.float(), 1e-6).bfloat16()
y.backward(gh)
check("rms_y", y)
check("rms_gx", hr.grad)
check("rms_gw", hwr.grad)
check("tri", F.grid_sample(vol, g3 * 1.1, padding_mode="reflection", align_corners=False))
check("tri_ac", F.grid_sample(vol, g3, align_corners=True))
check("cub", F.grid_sample(img, g2 * 1.2, align_corners=False))
check("cub_border", F.grid_sample(img, g2 * 1.2, mode="bicubic", padding_mode="border", align_corners=False))
check("cub_zeros", F.grid_sample(img, g2 * 1.2, mode="bicubic", align_corners=True))
print("EXECUTORS " + ("FAIL" if fail else "ok"))
sys.exit(fail)
