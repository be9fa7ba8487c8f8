#!/usr/bin/env python3
"""PyTorch's matrix products in GPT-2 small's torch.compile step, by operand shapes: device time of
each (aten::mm / addmm / bmm and the ops under them, torch.profiler with record_shapes), so that
tracer's products (TRACER_GPU_PROFILE=2) can be compared shape by shape.

  python3 bench/probes/gemm_shapes.py [--size B,T,V,D,NH,L]
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch_profile  # noqa: E402


def main():
    step = torch_profile.warm_step("compile", sys.argv)
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        step()
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages(group_by_input_shape=True):
        if e.key in ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_scaled_mm"):
            t = getattr(e, "device_time_total", None)
            if t is None:
                t = e.cuda_time_total
            rows.append((t / 1e3, e.count, e.key, str(e.input_shapes)[:120]))
    total = sum(r[0] for r in rows)
    print("# torch compile: products %.3f ms in %d calls" % (total, sum(r[1] for r in rows)))
    for ms, n, k, shp in sorted(rows, reverse=True):
        print("#  %8.3f ms %4dx  %.4f each  %-12s %s" % (ms, n, ms / n, k, shp))


if __name__ == "__main__":
    main()
