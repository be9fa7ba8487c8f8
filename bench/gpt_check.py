#!/usr/bin/env python3
"""examples/gpt.trace against PyTorch on the same data (issue 12, item 3).

PyTorch draws the GPT's parameters and a batch (bench/gpt_torch.py), writes them as one
.safetensors file, and computes the loss and every gradient twice: in float32 math from the same
bf16 values (the reference) and in bf16 as a user would run it. tracer then runs the trace on that
file (`--input`) under each pipeline and device and writes its loss and gradients (`--output`).
Each of tracer's outputs is compared with the reference by ||x - ref|| / ||ref||, next to
PyTorch bf16's own error; a pipeline passes when every gradient's error is at most FACTOR times
PyTorch's (and the loss's at most FACTOR times PyTorch's, or 1e-3 of it).

  bench/gpt_check.py TRACER [--size tiny|small|mid|wide|full] [--devices cpu,cuda] [--pipelines P;Q]
                           [--factor 2] [--keep DIR]
Prints one line per (device, pipeline) with the worst ratio, then the worst gradients; exits 1
when any pipeline fails. Needs PyTorch (and a GPU for cuda)."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "gpu"))
import compare  # noqa: E402  (tests/gpu/compare.py: the .npy reader)
import gpt_torch  # noqa: E402

SIZES = {
    "tiny": dict(B=2, T=32, V=256, D=64, NH=4, L=2),
    "small": dict(B=2, T=128, V=1024, D=128, NH=4, L=2),
    "mid": dict(B=4, T=256, V=4096, D=256, NH=8, L=4),
    # a vocabulary over 4096 (the logsumexp online, its rows a block each) and of odd width
    # (element by element, no 16-byte accesses)
    "wide": dict(B=2, T=128, V=5001, D=128, NH=4, L=2),
    "full": gpt_torch.FULL,
}
# The pipelines docs/passes.md recommends for training, and the simplest.
PIPELINES = [
    "grad,del_last_used",
    "grad,fuse,del_last_used",
    "grad,remat,fuse,del_last_used",
    "grad,remat,fuse_reorder,del_last_used",
    "grad,philox,remat,fuse,del_last_used",
]


def load_npy(path):
    """A tracer output (bf16 files too, without ml_dtypes) as float64."""
    return torch.from_numpy(compare.load(path)[1].copy())


def rel(x, ref):
    x, ref = x.double().cpu(), ref.double().cpu()
    if not torch.isfinite(x).all():
        return float("inf")
    d = ref.norm().item()
    return (x - ref).norm().item() / (d if d > 0 else 1.0)


def references(size, seed):
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    inputs = gpt_torch.make_inputs(**size, seed=seed, device=dev)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    out = {}
    for kind in ("f32", "bf16"):
        p = {k: (v.float() if kind == "f32" and v.is_floating_point() else v) for k, v in inputs.items()}
        for k, v in p.items():
            if v.is_floating_point():
                p[k] = v.detach().clone().requires_grad_()
        loss = gpt_torch.loss_fn(p, **size, math_attention=kind == "f32")
        loss.backward()
        out[kind] = {"loss": loss.detach().double().cpu()}
        for k, v in p.items():
            if v.is_floating_point():
                out[kind]["grad_" + k] = v.grad.detach().double().cpu()
    return inputs, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tracer")
    ap.add_argument("--size", default="small", choices=SIZES)
    ap.add_argument("--devices", default="cpu,cuda")
    ap.add_argument("--pipelines", default=";".join(PIPELINES))
    ap.add_argument("--factor", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", default="")
    ap.add_argument("--trace", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "gpt.trace"))
    args = ap.parse_args()
    size = SIZES[args.size]
    tmp = args.keep or tempfile.mkdtemp(prefix="gpt_check_")
    os.makedirs(tmp, exist_ok=True)
    inputs, ref = references(size, args.seed)
    st = os.path.join(tmp, "inputs.safetensors")
    gpt_torch.save_safetensors(st, inputs)
    f32, bf = ref["f32"], ref["bf16"]
    torch_err = {k: rel(bf[k], f32[k]) for k in f32}
    print(f"# size {args.size} {size}; PyTorch {torch.__version__} bf16 error vs float32 math: "
          f"loss {torch_err['loss']:.2e}, gradients {min(v for k, v in torch_err.items() if k != 'loss'):.2e}.."
          f"{max(v for k, v in torch_err.items() if k != 'loss'):.2e}")
    sets = [f"--set {k}={v}" for k, v in size.items()]
    failed = 0
    rows = []
    for device in [d for d in args.devices.split(",") if d]:
        for pipeline in [p for p in args.pipelines.split(";") if p]:
            out = os.path.join(tmp, f"{device}_{pipeline.replace(',', '_')}")
            shutil.rmtree(out, ignore_errors=True)
            cmd = [args.tracer, "run", args.trace, *" ".join(sets).split(), "--input", st, "--passes", pipeline,
                   "--device", device, "--output", out]
            t0 = time.time()
            r = subprocess.run(cmd, capture_output=True, text=True)
            secs = time.time() - t0
            if r.returncode != 0:
                print(f"FAIL {device} {pipeline}: tracer failed ({r.returncode})\n{r.stderr[-2000:]}")
                failed += 1
                continue
            worst, worst_name, errs = 0.0, "", {}
            for k in f32:
                path = os.path.join(out, k + ".npy")
                if not os.path.exists(path):
                    print(f"FAIL {device} {pipeline}: no output {k}.npy")
                    worst = float("inf")
                    continue
                e = rel(load_npy(path), f32[k])
                errs[k] = e
                floor = 1e-3 * abs(f32[k].item()) if k == "loss" else 0.0
                ratio = e / max(torch_err[k], 1e-12) if e > floor else 0.0
                if ratio > worst:
                    worst, worst_name = ratio, k
            ok = worst <= args.factor
            failed += not ok
            top = sorted(errs.items(), key=lambda kv: -kv[1] / max(torch_err[kv[0]], 1e-12))[:3]
            rows.append(f"{'ok  ' if ok else 'FAIL'} {device:5s} {pipeline:42s} worst {worst:6.2f}x ({worst_name})  "
                        f"loss err {errs.get('loss', float('nan')):.1e}  {secs:5.1f}s  worst: " +
                        ", ".join(f"{k} {v:.1e} (torch {torch_err[k]:.1e})" for k, v in top))
            print(rows[-1], flush=True)
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"# all {len(rows)} runs within {args.factor}x PyTorch bf16's error" if not failed else f"# {failed} FAILED")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
