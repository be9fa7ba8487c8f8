#!/usr/bin/env python3
"""tests/gpu/ops.trace's ops_special and ops_thunder_more on tracer against PyTorch on the same
data: the inputs are written as safetensors, tracer runs the entry (--device cuda, or cpu), and
each output is compared with the same chain of torch ops on the same device and dtype
(||tracer - torch|| / ||torch||, compare.py's tolerances; integers exactly).
Usage: special_torch.py [TRACER] [DEVICE]   (needs torch and safetensors)"""
import os
import subprocess
import sys
import tempfile

import torch
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (the .npy reader and the tolerances)

TRACER = sys.argv[1] if len(sys.argv) > 1 else "build/tracer"
DEVICE = sys.argv[2] if len(sys.argv) > 2 else "cuda"
dev = "cuda" if DEVICE.startswith("cuda") else "cpu"
g = torch.Generator().manual_seed(7)


def run(entry, inputs):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "in.safetensors")
        save_file({k: v.contiguous().cpu() for k, v in inputs.items()}, path)
        out = os.path.join(tmp, "out")
        r = subprocess.run([TRACER, "run", "tests/gpu/ops.trace", "--entry", entry, "--input", path, "--device", DEVICE,
                            "--output", out], capture_output=True, text=True)
        if r.returncode:
            print(r.stdout[-3000:], r.stderr[-3000:])
            sys.exit(f"FAIL {entry}: tracer failed")
        return {f[:-4]: compare.load(os.path.join(out, f))[1] for f in os.listdir(out)}


fail = 0


def check(entry, got, name, want):
    global fail
    import numpy as np
    w = want.detach().to("cpu")
    kind = {torch.float64: "<f8", torch.float32: "<f4", torch.float16: "<f2", torch.bfloat16: "bfloat16"}.get(w.dtype)
    w = w.double().numpy() if kind else w.numpy()
    t = np.asarray(got[name], dtype=np.float64 if kind else w.dtype)
    if t.shape != w.shape:
        print(f"FAIL {entry} {name}: shape {t.shape} against torch's {w.shape}")
        fail = 1
        return
    if kind is None:
        bad = int((t != w).sum())
        print(f"{'ok  ' if bad == 0 else 'FAIL'} {entry} {name}: {bad} of {w.size} integers differ")
        fail |= bad != 0
        return
    # NaNs and infinities where torch has them (zeta's poles), the finite values within tolerance
    inf = np.isinf(w)
    same_nan = np.array_equal(np.isnan(t), np.isnan(w)) and np.array_equal(t[inf], w[inf])
    m = np.isfinite(w)
    err = float(np.linalg.norm(t[m] - w[m]) / max(np.linalg.norm(w[m]), 1e-300))
    ok = same_nan and err <= compare.TOL[kind]
    print(f"{'ok  ' if ok else 'FAIL'} {entry} {name}: relative error {err:.2e} ({kind}, tolerance {compare.TOL[kind]:g})"
          + ("" if same_nan else ", NaNs or infinities differ"))
    fail |= not ok


def ref(fn, *args):
    """fn on args; where torch has no kernel for a 16-bit dtype on this device (ndtri on CUDA in
    bf16), fn in float32 rounded to the dtype, which is what tracer computes (f32 math, one
    rounding)."""
    try:
        return fn(*args)
    except (NotImplementedError, RuntimeError):
        dt = args[0].dtype
        return fn(*[t.float() for t in args]).to(dt)


def special():
    a = (torch.randn(64, 33, generator=g) * 1.5).to(dev)
    h = (torch.randn(64, 33, generator=g) * 1.5).to(dev).bfloat16()
    d = (torch.randn(64, 33, generator=g, dtype=torch.float64) * 1.5).to(dev)
    i = torch.randint(-1000, 1000, (64, 33), generator=g, dtype=torch.int32).to(dev)
    l = torch.randint(-2**40, 2**40, (64, 33), generator=g, dtype=torch.int64).to(dev)
    b = torch.randint(0, 256, (64, 33), generator=g, dtype=torch.uint8).to(dev)
    got = run("ops_special", dict(a=a, h=h, d=d, i=i, l=l, b=b))
    for x, sfx in [(a, ""), (h, "_1"), (d, "_2")]:
        u = torch.tanh(x) * 0.99
        check("ops_special", got, "digamma" + sfx, ref(torch.special.digamma, x * 3.3))
        check("ops_special", got, "erfinv" + sfx, ref(torch.special.erfinv, u))
        # torch has no erfcinv: erfinv(1 - c) in float64, rounded to the dtype
        check("ops_special", got, "erfcinv" + sfx, torch.special.erfinv(1 - (u + 1.0).double()).to(x.dtype))
        check("ops_special", got, "ndtri" + sfx, ref(torch.special.ndtri, (u + 1.0) * 0.5))
    # zeta's six outputs in order: (p, |x| + 0.25) and (3, x - 2.5) for f32, bf16, f64
    k = 0
    for x in [a, h, d]:
        p = torch.abs(x) + 1.1
        for want in [ref(torch.special.zeta, p, torch.abs(x) + 0.25), ref(torch.special.zeta, torch.full_like(x, 3.0), x - 2.5)]:
            check("ops_special", got, "zeta" if k == 0 else f"zeta_{k}", want)
            k += 1
    check("ops_special", got, "nextafter", torch.nextafter(a, -a))
    check("ops_special", got, "nextafter_1", torch.nextafter(d, torch.zeros_like(d)))
    check("ops_special", got, "nextafter_2", torch.nextafter(h.float(), torch.full_like(h.float(), 5.0)))
    kk = torch.remainder(i, 70)
    check("ops_special", got, "bitwise_left_shift", torch.bitwise_left_shift(i, kk))
    check("ops_special", got, "bitwise_right_shift", torch.bitwise_right_shift(i, kk - 3))
    check("ops_special", got, "bitwise_left_shift_1", torch.bitwise_left_shift(l, torch.remainder(l, 67)))
    check("ops_special", got, "bitwise_right_shift_1", torch.bitwise_right_shift(-l, torch.remainder(l, 67)))
    check("ops_special", got, "bitwise_left_shift_2", torch.bitwise_left_shift(b, 3))
    check("ops_special", got, "bitwise_right_shift_2", torch.bitwise_right_shift(b, torch.remainder(b, 9)))


def thunder_more():
    x = torch.randn(37, 19, generator=g).to(dev)
    h = torch.randn(5, 13, 7, generator=g).to(dev).bfloat16()
    i = torch.randint(-50, 50, (37, 4), generator=g).to(dev)
    j = torch.randint(-50, 50, (9,), generator=g).to(dev)
    w = torch.randn(3, 5000, generator=g, dtype=torch.float64).to(dev)
    got = run("ops_thunder_more", dict(x=x, h=h, i=i, j=j, w=w))
    gi = torch.remainder(i, 19)
    ji = torch.remainder(j, 13)
    v, k = torch.topk(x, 5, 1, True, True)
    hv, hk = torch.sort(h, dim=1, descending=False, stable=True)
    e = "ops_thunder_more"
    check(e, got, "amax_x", torch.argmax(x, 1))
    check(e, got, "amin_h", torch.argmin(h, 2))
    check(e, got, "amax_all", torch.argmax(h))
    check(e, got, "gathered", torch.gather(x, 1, gi))
    got.setdefault("top_v", got.get("slice"))  # (the values keep the name of topk's last statement)
    check(e, got, "top_v", v)
    check(e, got, "top_i", k)
    check(e, got, "sort_v", hv)
    check(e, got, "sort_i", hk)
    check(e, got, "scattered", torch.scatter_add(x, 1, gi, x * 2.0))
    check(e, got, "index_added", torch.index_add(h, 1, ji, h[:, :9, :]))
    check(e, got, "taken_mid", torch.index_select(h, 1, ji))
    check(e, got, "taken_last", x[:, gi.reshape(4, 37)])
    iv, ii = torch.sort(torch.remainder(i, 7), dim=0, descending=True, stable=True)
    check(e, got, "int_v", iv)
    check(e, got, "int_i", ii)
    lv, li = torch.sort(torch.floor(w * 8.0), dim=1, descending=False, stable=True)
    check(e, got, "long_v", lv)
    check(e, got, "long_i", li)
    # Writes to repeated places: the last wins, as on PyTorch's CPU (its CUDA leaves it unspecified).
    xc, hc, gic, jic, jc = x.cpu(), h.cpu(), gi.cpu(), ji.cpu(), j.cpu()
    check(e, got, "written", torch.scatter(xc, 1, gic, -xc))
    check(e, got, "copied", torch.index_copy(hc, 1, jic, hc[:, :9, :]))
    rows, cols = torch.remainder(jc, 37), torch.remainder(jc * 3, 19)
    check(e, got, "put", xc.index_put((rows, cols), xc.flatten()[:9], accumulate=False))
    check(e, got, "put_acc", xc.index_put((rows, cols), xc.flatten()[:9], accumulate=True))


def scatter_reduce():
    x = torch.randn(37, 19, generator=g).to(dev)
    s = torch.randn(37, 30, generator=g).to(dev)
    i = torch.randint(0, 1000, (37, 30), generator=g).to(dev)
    h = torch.randn(11, 6, generator=g).to(dev).bfloat16()
    hs = torch.randn(600, 6, generator=g).to(dev).bfloat16()
    k = torch.randint(0, 1000, (600, 6), generator=g).to(dev)
    n = torch.randint(-50, 50, (11, 6), generator=g).to(dev)
    ns = torch.randint(-50, 50, (600, 6), generator=g).to(dev)
    j = torch.randint(0, 1000, (9,), generator=g).to(dev)
    got = run("ops_scatter_reduce", dict(x=x, s=s, i=i, h=h, hs=hs, k=k, n=n, ns=ns, j=j))
    gi, ki, jr = torch.remainder(i, 4) * 5, torch.remainder(k, 11), torch.remainder(j, 13)
    e = "ops_scatter_reduce"
    check(e, got, "sr_sum", torch.scatter_reduce(x, 1, gi, s, "sum", include_self=False))
    check(e, got, "sr_prod", torch.scatter_reduce(x, 1, gi, s, "prod"))
    check(e, got, "sr_mean", torch.scatter_reduce(x, 1, gi, s, "mean"))
    check(e, got, "sr_amax", torch.scatter_reduce(x, 1, gi, s, "amax", include_self=False))
    check(e, got, "sr_amin", torch.scatter_reduce(x, 1, gi, s, "amin"))
    check(e, got, "sr_h_amax", torch.scatter_reduce(h, 0, ki, hs, "amax"))
    # bf16 means: torch adds 55 values a place in bf16 one by one; tracer's tree of adds rounds
    # less; both against the float64 mean
    want = torch.scatter_reduce(h.double(), 0, ki, hs.double(), "mean", include_self=False)
    check(e, got, "sr_h_mean", want.bfloat16())
    check(e, got, "sr_n_sum", torch.scatter_reduce(n, 0, ki, ns, "sum"))
    check(e, got, "sr_n_mean", torch.scatter_reduce(n, 0, ki, ns, "mean"))
    check(e, got, "sr_n_amin", torch.scatter_reduce(n, 0, ki, ns, "amin", include_self=False))
    check(e, got, "ir_amax", torch.index_reduce(s, 1, jr, x[:, :9], "amax"))
    check(e, got, "ir_prod", torch.index_reduce(s, 1, jr, x[:, :9], "prod", include_self=False))


def special_tails():
    x = (torch.randn(4, 50, generator=g) * 15.0).to(dev)
    y = (torch.randn(4, 50, generator=g, dtype=torch.float64) * 25.0).to(dev)
    got = run("ops_special_tails", dict(x=x, y=y))
    e = "ops_special_tails"
    outs = sorted(got)  # the four outputs in order of their names
    for name, want in zip(outs, [torch.special.erfcx(x), torch.special.erfcx(y), torch.special.log_ndtr(x), torch.special.log_ndtr(y)]):
        check(e, got, name, want)


special()
thunder_more()
scatter_reduce()
special_tails()
sys.exit(fail)
