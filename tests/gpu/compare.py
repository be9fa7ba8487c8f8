#!/usr/bin/env python3
"""Compares the outputs of a CPU run and a GPU run (directories of .npy files written by
`tracer run --output DIR`). Prints one line per output and exits 1 if any differs by more than
its dtype's tolerance: ||gpu - cpu|| / ||cpu|| (METHOD: f32 far under 1e-3, bf16 1e-3..1e-2);
with --exact first, every output must be bitwise equal (NaNs equal whatever their payload).
Reads bf16 files (descr 'bfloat16') without ml_dtypes.
Usage: compare.py [--exact] CPU_DIR GPU_DIR LABEL"""
import ast
import os
import struct
import sys

import numpy as np

TOL = {"<f8": 1e-9, "<f4": 1e-3, "<f2": 1e-2, "bfloat16": 2e-2}  # integers and bools: exact


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:6] == b"\x93NUMPY", path
    major = data[6]
    if major == 1:
        (hlen,) = struct.unpack("<H", data[8:10])
        start = 10
    else:
        (hlen,) = struct.unpack("<I", data[8:12])
        start = 12
    header = ast.literal_eval(data[start:start + hlen].decode("latin1"))
    body = data[start + hlen:]
    descr, shape = header["descr"], header["shape"]
    if descr == "bfloat16":
        bits = np.frombuffer(body, dtype="<u2").astype(np.uint32) << 16
        arr = bits.view(np.float32)
    else:
        arr = np.frombuffer(body, dtype=np.dtype(descr))
    return descr, arr.reshape(shape).astype(np.float64)


def run_tracer(tracer, trace, entry, inputs, device):
    """Runs `entry` of `trace` with tracer on `inputs` (name -> torch tensor, handed over as
    safetensors) on `device`; returns its outputs, name -> float64 array. Exits on a failed run."""
    import subprocess
    import tempfile
    from safetensors.torch import save_file
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "in.safetensors")
        save_file({n: v.contiguous().cpu() for n, v in inputs.items()}, path)
        out = os.path.join(tmp, "out")
        r = subprocess.run([tracer, "run", trace, "--entry", entry, "--input", path, "--device", device, "--output", out],
                           capture_output=True, text=True)
        if r.returncode:
            print(r.stdout[-3000:], r.stderr[-3000:])
            sys.exit(f"FAIL {entry}: tracer failed")
        return {f[:-4]: load(os.path.join(out, f))[1] for f in os.listdir(out)}


def against_torch(label, name, want, got):
    """tracer's output got[name] against PyTorch's tensor `want`: ||tracer - torch|| / ||torch||
    within TOL of want's dtype. Prints a line; returns whether it holds."""
    import torch
    wv = want.detach().cpu()
    kind = {torch.float32: "<f4", torch.bfloat16: "bfloat16", torch.float64: "<f8", torch.float16: "<f2"}[wv.dtype]
    wv = wv.double().numpy()
    tv = np.asarray(got[name], dtype=np.float64)
    if tv.shape != wv.shape:
        print(f"FAIL {label} {name}: shape {tv.shape} against torch's {wv.shape}")
        return False
    err = float(np.linalg.norm(tv - wv) / max(np.linalg.norm(wv), 1e-300))
    ok = err <= TOL[kind]
    print(f"{'ok  ' if ok else 'FAIL'} {label} {name}: relative error {err:.2e} ({kind}, tolerance {TOL[kind]:g})")
    return ok


def main(cpu_dir, gpu_dir, label, exact_only=False):
    names = sorted(n for n in os.listdir(cpu_dir) if n.endswith(".npy")) if os.path.isdir(cpu_dir) else []
    if not names:
        print(f"{label}: no outputs written", file=sys.stderr)
        return 1
    bad = 0
    for n in names:
        descr, a = load(os.path.join(cpu_dir, n))
        g = os.path.join(gpu_dir, n)
        if not os.path.exists(g):
            print(f"FAIL {label} {n}: missing on the GPU")
            bad += 1
            continue
        _, b = load(g)
        if a.shape != b.shape:
            print(f"FAIL {label} {n}: shape {b.shape} on the GPU, {a.shape} on the CPU")
            bad += 1
            continue
        # Special values where the CPU has them, element by element: NaN at the same places,
        # infinities of the same sign; the error over the finite rest.
        if not np.array_equal(np.isnan(a), np.isnan(b)):
            print(f"FAIL {label} {n}: NaN at {int((np.isnan(a) != np.isnan(b)).sum())} places on one side only")
            bad += 1
            continue
        if not np.array_equal(np.where(np.isinf(a), a, 0), np.where(np.isinf(b), b, 0)):
            print(f"FAIL {label} {n}: infinities differ at {int((np.isinf(a) != np.isinf(b)).sum())} places")
            bad += 1
            continue
        finite = np.isfinite(a)
        ref = np.linalg.norm(a[finite])
        err = np.linalg.norm((b - a)[finite]) / (ref if ref > 0 else 1.0)
        exact = np.array_equal(a, b, equal_nan=True)
        tol = 0.0 if exact_only else TOL.get(descr, 0.0)
        ok = exact or err <= tol
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {label} {n} {descr}{list(a.shape)} rel.err {err:.2e}{' (bitwise equal)' if exact else ''} tol {tol:g}")
    return 1 if bad else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    exact_only = bool(args) and args[0] == "--exact"
    if exact_only:
        args = args[1:]
    sys.exit(main(*args[:3], exact_only=exact_only))
