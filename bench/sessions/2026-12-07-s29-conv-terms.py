#!/usr/bin/env python3
"""Session 29: which term of tests/gpu/conv.trace's loss makes tracer's bf16 gradients differ from
torch's f32 ones (conv_torch.py's bf16 failures): each term alone, tracer bf16 and torch bf16
against torch f32 on the same bf16-rounded data. Usage: TRACER DEVICE"""
import os, subprocess, sys, tempfile
import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
sys.path.insert(0, "tests/gpu")
import compare

TRACER, DEVICE = sys.argv[1], sys.argv[2]
dev = "cuda" if DEVICE.startswith("cuda") else "cpu"
g = torch.Generator().manual_seed(11)
SHAPES = dict(x=(4, 6, 17, 15), w1=(8, 3, 3, 3), b1=(8,), w2=(8, 1, 3, 3), w3=(8, 3, 4, 4), w4=(5, 3, 7), w5=(2, 3, 1, 3, 3))
ins = {k: (torch.randn(s, generator=g) * 0.5).to(torch.bfloat16) for k, s in SHAPES.items()}


def net(W, x, w1, b1, w2, w3, w4, w5):
    h = torch.tanh(F.conv2d(x, w1, b1, stride=2, padding=1, groups=2))
    h = F.conv2d(h, w2, None, padding=2, dilation=2, groups=8)
    u = F.conv_transpose2d(h, w3, None, stride=2, padding=1, output_padding=1)
    s = F.conv1d(u.reshape(4, 3, 19 * 17), w4, padding="same")
    v = F.conv3d(u.reshape(4, 3, 1, 19, 17), w5, stride=(1, 2, 3))
    m = F.max_pool2d(u, 3, stride=2, padding=1)
    a = F.avg_pool2d(u, 2, ceil_mode=True, count_include_pad=False)
    b = F.batch_norm(h, None, None, training=True)
    q = F.adaptive_avg_pool2d(u, (5, 4)) + F.adaptive_max_pool2d(u, (3, 3)).sum()
    z = F.interpolate(h, size=(12, 11), mode="bicubic") + F.interpolate(h, scale_factor=1.5, mode="bilinear", align_corners=True)[:, :, :12, :11]
    terms = [lambda: (u * u).sum(), lambda: (s * s).sum() * 0.01, lambda: (v * v).sum(), lambda: (m * a).sum(),
             lambda: (b * b * h).sum(), lambda: (q * q).sum(), lambda: (z * z).sum()]
    return terms[W]()


def grads(W, dtype):
    leaves = {k: v.to(dev).to(dtype).requires_grad_(True) for k, v in ins.items()}
    loss = net(W, **leaves).float()
    loss.backward()
    return {"grad_" + k: v.grad.double().cpu().numpy() for k, v in leaves.items() if v.grad is not None}


def rel(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


for W in range(7):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "in.safetensors")
        save_file(ins, path)
        out = os.path.join(tmp, "out")
        r = subprocess.run([TRACER, "run", "bench/sessions/2026-12-07-s29-conv-terms.trace", "--entry", "bf16", "--set", f"W={W}",
                            "--input", path, "--device", DEVICE, "--passes", "grad,fuse,del_last_used", "--output", out], capture_output=True, text=True)
        if r.returncode:
            print(r.stderr[-2000:])
            continue
        got = {f[:-4]: compare.load(os.path.join(out, f))[1] for f in os.listdir(out)}
    want, theirs = grads(W, torch.float32), grads(W, torch.bfloat16)
    print(f"term {W}: " + "  ".join(f"{k[5:]} {rel(got[k], w):.1e}/{rel(theirs[k], w):.1e}" for k, w in want.items() if k in got))
