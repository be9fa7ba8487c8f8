#!/usr/bin/env python3
"""tracer's attention on the GPU against PyTorch on the same data (issue 14, item 5).

For each case (dtype, causal or not, head size, query and key lengths), PyTorch draws q, k and v,
writes them as one .safetensors file, and computes loss = sum(o.float()^2) and its gradients
twice: in float32 math from the same bf16/f16 values (the reference) and with its own fused
attention in the 16-bit type (F.scaled_dot_product_attention). tracer runs the same function on
that file (`--input`, `--output`) on cuda:0, by the path TRACER_ATTENTION chooses (auto: cuDNN
where it has an engine), and each gradient's ||x - ref|| / ||ref|| must be at most FACTOR times
PyTorch's own.

  bench/attention_check.py TRACER [--factor 2] [--attention auto|cudnn|tracer]
Prints one line per case; exits 1 when any fails."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "gpu"))
import compare  # noqa: E402  (tests/gpu/compare.py: the .npy reader)
import gpt_torch  # noqa: E402  (save_safetensors)

# (dtype, causal, B, H, L, S, E)
CASES = [
    ("bf16", True, 4, 16, 1024, 1024, 64),
    ("bf16", True, 2, 8, 2048, 2048, 128),
    ("bf16", False, 2, 4, 512, 768, 128),
    ("f16", True, 2, 4, 640, 640, 256),
    ("bf16", False, 1, 6, 333, 1000, 64),
    ("f16", True, 3, 2, 1000, 1000, 128),
]


def rel(x, ref):
    x, ref = x.double().cpu(), ref.double().cpu()
    if not torch.isfinite(x).all():
        return float("inf")
    return (x - ref).norm().item() / max(ref.norm().item(), 1e-30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tracer")
    ap.add_argument("--factor", type=float, default=2.0)
    ap.add_argument("--attention", default="auto")
    args = ap.parse_args()
    env = dict(os.environ, TRACER_ATTENTION=args.attention)
    failed = 0
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        for dt, causal, B, H, L, S, E in CASES:
            tdt = torch.bfloat16 if dt == "bf16" else torch.float16
            q, k, v = (torch.rand(B, H, n, E, device="cuda") * 2 - 1 for n in (L, S, S))
            q, k, v = q.to(tdt), k.to(tdt), v.to(tdt)
            grads = {}
            for name, math in (("ref", True), ("torch", False)):
                xs = [t.detach().clone().float().requires_grad_() if math else t.detach().clone().requires_grad_() for t in (q, k, v)]
                o = F.scaled_dot_product_attention(*xs, is_causal=causal)
                (o.float() ** 2).sum().backward()
                grads[name] = [x.grad for x in xs]
            inputs = os.path.join(tmp, "qkv.safetensors")
            gpt_torch.save_safetensors(inputs, {"q": q, "k": k, "v": v})
            trace = os.path.join(tmp, "a.trace")
            with open(trace, "w") as f:
                f.write(f"def main(q: {dt}[{B}, {H}, {L}, {E}], k: {dt}[{B}, {H}, {S}, {E}], v: {dt}[{B}, {H}, {S}, {E}]):\n"
                        f"    o = scaled_dot_product_attention(q, k, v, is_causal={causal})\n"
                        f"    return sum(o.float() * o.float())\n")
            out = os.path.join(tmp, "out")
            r = subprocess.run([args.tracer, "run", trace, "--input", inputs, "--passes", "grad,del_last_used", "--device", "cuda",
                                "--output", out, "--json"], capture_output=True, text=True, env=env)
            label = f"{dt} {'causal' if causal else 'full'} B={B} H={H} L={L} S={S} E={E}"
            if r.returncode != 0:
                print(f"FAIL {label}: tracer failed: {r.stderr.strip()[-400:]}")
                failed += 1
                continue
            paths = json.loads(r.stdout).get("attention", {})
            worst, line = 0.0, []
            for i, name in enumerate(("q", "k", "v")):
                g = torch.from_numpy(compare.load(os.path.join(out, f"grad_{name}.npy"))[1].copy())
                ours, theirs = rel(g, grads["ref"][i]), rel(grads["torch"][i], grads["ref"][i])
                worst = max(worst, ours / max(theirs, 1e-12))
                line.append(f"d{name} {ours:.2e} (torch {theirs:.2e})")
            ok = worst <= args.factor
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {label} [cudnn {paths.get('cudnn')}, tracer {paths.get('tracer')}]: "
                  f"{', '.join(line)}; worst {worst:.2f}x torch's")
    print("ATTENTION CHECK " + ("FAILED" if failed else "PASSED"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
