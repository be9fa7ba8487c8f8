#!/usr/bin/env python3
"""The GPT step, tracer against torch.compile, interleaved in one process on one GPU.

Between device calls torch.compile's median step moved by 25% (16.7-21.2 ms, 2026-12-02), more
than the margin a 0.9x target judges; within a call it moves less. This script compiles PyTorch's
twin once, then alternates: tracer's `--bench N` (a subprocess, the same data), then N timed steps
of torch.compile, for several rounds. Each round gives a ratio of medians; the summary is the median
ratio and the range. Both programs hold their memory at the same time (the H200 has room).

  python3 bench/ab_gpt.py TRACER [--rounds 4] [--runs 15] [--checkpoint] [--profile DIR]
                          [--variant NAME:VAR=VALUE,VAR=VALUE ...]

--variant adds a tracer run with those environment settings to every round (tracer's default
settings always run first), so settings are compared in the same rounds against the same steps.

--profile DIR writes torch.compile's kernels of one step, by total device time, to
DIR/torch_kernels.txt (torch.profiler), for comparison with TRACER_GPU_PROFILE=2.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_torch  # noqa: E402
from torch_twins import timed  # noqa: E402


def tracer_step(tracer, inputs_path, checkpoint, runs, env=None):
    passes = "grad,checkpoint,remat,fuse_reorder,del_last_used" if checkpoint else "grad,remat,fuse_reorder,del_last_used"
    cmd = [tracer, "run", "examples/gpt.trace", "--input", inputs_path, "--device", "cuda", "--bench", str(runs),
           "--json", "--passes", passes, "--cuda-graph"] + (["--set", "CHECKPOINT=1"] if checkpoint else [])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=dict(os.environ, **(env or {})))
    if r.returncode != 0:
        raise SystemExit("tracer failed:\n" + r.stderr[-2000:])
    j = json.loads(r.stdout)
    return j["bench"]["median_ms"], j.get("device_peak_bytes"), j.get("kernels_launched")


def torch_profile(step, path):
    from torch.profiler import ProfilerActivity, profile
    step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    rows = {}
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        n, t = rows.get(e.name, (0, 0.0))
        rows[e.name] = (n + 1, t + e.device_time_total / 1e3)
    total = sum(t for _, t in rows.values())
    with open(path, "w") as f:
        f.write(f"torch.compile, one step: {total:.3f} ms of kernels, {sum(n for n, _ in rows.values())} launches\n")
        for name, (n, t) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
            f.write(f"{t:9.3f} ms {n:5d}x  {name[:150]}\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tracer")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--checkpoint", action="store_true")
    ap.add_argument("--profile")
    ap.add_argument("--variant", action="append", default=[])
    a = ap.parse_args()

    dims = gpt_torch.FULL
    inputs = gpt_torch.make_inputs(**dims)
    path = os.path.join(tempfile.mkdtemp(), "gpt.safetensors")
    gpt_torch.save_safetensors(path, inputs)
    params = {k: (v.requires_grad_() if v.is_floating_point() else v) for k, v in inputs.items()}
    m = torch.compile(lambda: gpt_torch.loss_fn(params, **dims, checkpoint=a.checkpoint))

    def step():
        for v in params.values():
            v.grad = None
        m().backward()

    timed(step, runs=3, warmup=2)  # compiles
    if a.profile:
        os.makedirs(a.profile, exist_ok=True)
        torch_profile(step, os.path.join(a.profile, "torch_kernels.txt"))
    variants = [("default", {})]
    for v in a.variant:
        name, _, settings = v.partition(":")
        variants.append((name, dict(kv.split("=", 1) for kv in settings.split(",") if kv)))
    ratios = {name: [] for name, _ in variants}
    for i in range(a.rounds):
        runs = [(name, tracer_step(a.tracer, path, a.checkpoint, a.runs, env)) for name, env in variants]
        c_ms, lo, hi = timed(step, runs=a.runs, warmup=2)
        for name, (t_ms, peak, launches) in runs:
            ratios[name].append(t_ms / c_ms)
            print(json.dumps({"round": i, "variant": name, "tracer_ms": round(t_ms, 3), "compile_ms": round(c_ms, 3),
                              "compile_min_ms": round(lo, 3), "compile_max_ms": round(hi, 3), "ratio": round(t_ms / c_ms, 4),
                              "tracer_peak": peak, "tracer_launches": launches}), flush=True)
    for name, _ in variants:
        r = ratios[name]
        print(json.dumps({"workload": "gpt_checkpoint" if a.checkpoint else "gpt", "variant": name, "rounds": a.rounds,
                          "median_ratio": round(statistics.median(r), 4), "min_ratio": round(min(r), 4), "max_ratio": round(max(r), 4),
                          "torch": torch.__version__, "gpu": torch.cuda.get_device_name()}))

if __name__ == "__main__":
    main()
