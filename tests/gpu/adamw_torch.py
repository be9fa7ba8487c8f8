#!/usr/bin/env python3
"""tracer's AdamW and clipping by global norm (stdlib/optim.trace) against PyTorch on the same data:
torch.optim.AdamW(fused=True) with torch.nn.utils.clip_grad_norm_, and the same update written out
in float64. Parameters of odd shapes in f32 and bf16 (weight decay on those of two or more
dimensions, as GPT training sets it), a few steps, with and without clipping.
Needs PyTorch and safetensors (the device machine has both).
Usage: adamw_torch.py [TRACER] [DEVICE]   (defaults build/tracer, cuda)"""
import math
import os
import subprocess
import sys
import tempfile

import torch
from safetensors.torch import load_file, save_file

LR, BETAS, EPS, WD = 1e-3, (0.9, 0.95), 1e-8, 0.1
SHAPES = {  # name: (shape, dtype)
    "wte": ((97, 33), torch.float32),
    "h0.w": ((33, 131), torch.float32),
    "h0.b": ((131,), torch.float32),
    "h1.w": ((5, 7, 3), torch.bfloat16),
    "h1.b": ((1001,), torch.bfloat16),
    "ln.g": ((1,), torch.float32),
    "big": ((513, 257), torch.bfloat16),
}
TOL = {torch.float32: 2e-6, torch.bfloat16: 1e-2}  # ||a - b|| / ||b||
# With clipping, torch's global norm of the bf16 gradients is rounded to bf16 on its way (the norm
# of each bf16 tensor is a bf16), so its clip factor differs from the exact one by up to ~4e-3 and
# every clipped f32 parameter follows: against torch 1e-4, against float64 the tight tolerance.
TOL_TORCH_CLIPPED = {torch.float32: 1e-4, torch.bfloat16: 1e-2}


def make(d, steps, seed):
    g = torch.Generator().manual_seed(seed)
    params = {k: (0.05 * torch.randn(s, generator=g)).to(dt) for k, (s, dt) in SHAPES.items()}  # (GPT-like sizes:
    # a bf16 parameter near 1 would not move under lr 1e-3 at all)
    save_file(params, os.path.join(d, "params.safetensors"))
    grads = []
    for i in range(steps):
        # Gradients of varied scale, so that clipping at 1.0 acts on some steps and not others.
        scale = 0.02 if i % 2 else 3.0
        gi = {k: (scale * torch.randn(s, generator=g)).to(dt) for k, (s, dt) in SHAPES.items()}
        save_file(gi, os.path.join(d, f"grads{i}.safetensors"))
        grads.append(gi)
    return params, grads


def torch_fused(params, grads, clip, device):
    ps = {k: torch.nn.Parameter(v.clone().to(device)) for k, v in params.items()}
    groups = [{"params": [p for p in ps.values() if p.ndim >= 2], "weight_decay": WD},
              {"params": [p for p in ps.values() if p.ndim < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=LR, betas=BETAS, eps=EPS, fused=True)
    norms = []
    for gi in grads:
        for k, p in ps.items():
            p.grad = gi[k].clone().to(device)
        if clip > 0:
            norms.append(float(torch.nn.utils.clip_grad_norm_(list(ps.values()), clip)))
        opt.step()
    return {k: p.detach().cpu() for k, p in ps.items()}, norms


def float64(params, grads, clip):
    """The update by hand in float64 (parameters rounded to their dtype after each step, as a
    bf16 parameter is stored)."""
    p = {k: v.double() for k, v in params.items()}
    m = {k: torch.zeros_like(v) for k, v in p.items()}
    v2 = {k: torch.zeros_like(v) for k, v in p.items()}
    norms = []
    for t, gi in enumerate(grads, 1):
        g = {k: x.double() for k, x in gi.items()}
        if clip > 0:
            norm = math.sqrt(sum(float((x * x).sum()) for x in g.values()))
            norms.append(norm)
            f = clip / (norm + 1e-6)
            if f < 1:
                # A bf16 gradient is scaled in place in its own dtype, as both implementations do.
                g = {k: (gi[k].double() * f).to(gi[k].dtype).double() for k in g}
        for k in p:
            wd = WD if p[k].ndim >= 2 else 0.0
            m[k] = BETAS[0] * m[k] + (1 - BETAS[0]) * g[k]
            v2[k] = BETAS[1] * v2[k] + (1 - BETAS[1]) * g[k] * g[k]
            mh = m[k] / (1 - BETAS[0] ** t)
            vh = v2[k] / (1 - BETAS[1] ** t)
            new = p[k] * (1 - LR * wd) - LR * mh / (vh.sqrt() + EPS)
            p[k] = new.to(SHAPES[k][1]).double()
    return {k: v.to(SHAPES[k][1]) for k, v in p.items()}, norms


def rel(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def main():
    tracer = sys.argv[1] if len(sys.argv) > 1 else "build/tracer"
    device = sys.argv[2] if len(sys.argv) > 2 else "cuda"
    steps, fail = 4, False
    for clip in (0.0, 1.0):
        with tempfile.TemporaryDirectory() as d:
            params, grads = make(d, steps, seed=17 + int(clip))
            cmd = [tracer, "run", "tests/gpu/adamw_torch.trace", "--allow-read", d, "--allow-write", d, "--",
                   d, str(steps), str(clip), device]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print(f"FAIL adamw clip={clip}: tracer failed\n{r.stdout}{r.stderr}")
                fail = True
                continue
            out = load_file(os.path.join(d, "out.safetensors"))
            ref, ref_norms = torch_fused(params, grads, clip, device if device != "cpu" else "cpu")
            f64, f64_norms = float64(params, grads, clip)
            worst = []
            for k, (shape, dt) in SHAPES.items():
                got = out[k]
                if got.dtype != dt or tuple(got.shape) != shape:
                    print(f"FAIL adamw clip={clip} {k}: {got.dtype} {tuple(got.shape)}, expected {dt} {shape}")
                    fail = True
                    continue
                moved = rel(got, params[k].to(dt))  # the steps must move the parameter at all
                e_torch, e_64 = rel(got, ref[k]), rel(got, f64[k])
                tol_torch = TOL_TORCH_CLIPPED[dt] if clip > 0 else TOL[dt]
                ok = e_torch <= tol_torch and e_64 <= TOL[dt] and moved > 1e-4
                worst.append((k, e_torch, e_64))
                if not ok:
                    print(f"FAIL adamw clip={clip} {k} ({dt}): vs torch {e_torch:.2e}, vs f64 {e_64:.2e}, "
                          f"moved {moved:.2e}, tolerance {tol_torch:.0e} (torch), {TOL[dt]:.0e} (f64)")
                    fail = True
            for i, n in enumerate(ref_norms):
                got = float(out[f"norm{i}"].double().reshape(-1)[0])
                # (torch's norm of bf16 gradients is rounded to bf16 on its way: 1e-2 against it)
                if abs(got - n) > 1e-2 * n or abs(got - f64_norms[i]) > 1e-5 * f64_norms[i]:
                    print(f"FAIL adamw clip={clip} norm{i}: {got} vs torch {n}, f64 {f64_norms[i]}")
                    fail = True
            if clip > 0 and not any(n > clip for n in ref_norms):
                print("FAIL adamw: no step was clipped (the test does not test clipping)")
                fail = True
            e = max(worst, key=lambda w: w[1]) if worst else ("-", 0, 0)
            print(f"{'ok  ' if not fail else 'FAIL'} adamw {device} clip={clip}: {len(worst)} parameters, {steps} steps; "
                  f"worst vs torch.optim.AdamW(fused=True) {e[1]:.2e} ({e[0]}), vs f64 {e[2]:.2e}; norms {len(ref_norms)}")
    sys.exit(1 if fail else 0)


if __name__ == "__main__":
    main()
