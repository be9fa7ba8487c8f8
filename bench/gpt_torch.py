"""The PyTorch twin of examples/gpt.trace (workload 3 of DESIGN section 6), shared by
bench/torch_twins.py (timing) and bench/gpt_check.py (correctness against PyTorch).

The parameters are named as tracer names the trace's inputs (a list parameter `ln1_w: [bf16[D]] * L`
takes ln1_w_0, ln1_w_1, ...), so one .safetensors file feeds both."""
import math
import struct
import json

import torch
import torch.nn.functional as F

FULL = dict(B=8, T=1024, V=50304, D=768, NH=12, L=12)
BLOCK = ["ln1_w", "ln1_b", "qkv_w", "qkv_b", "proj_w", "proj_b", "ln2_w", "ln2_b", "fc_w", "fc_b", "out_w", "out_b"]


def make_inputs(B, T, V, D, NH, L, seed=0, device="cuda", dtype=torch.bfloat16):
    """GPT-2's initialisation (normal, std 0.02; the residual projections scaled by 1/sqrt(2L)),
    with biases and norm parameters drawn too (not zeros and ones, which would hide mistakes)."""
    g = torch.Generator(device="cpu").manual_seed(seed)

    def normal(*shape, std=0.02, mean=0.0):
        return (torch.randn(*shape, generator=g) * std + mean).to(dtype).to(device)

    p = {"idx": torch.randint(0, V, (B, T), generator=g).to(device),
         "targets": torch.randint(0, V, (B, T), generator=g).to(device),
         "wte": normal(V, D), "wpe": normal(T, D)}
    proj_std = 0.02 / math.sqrt(2 * L)
    for i in range(L):
        p[f"ln1_w_{i}"] = normal(D, std=0.1, mean=1.0)
        p[f"ln1_b_{i}"] = normal(D, std=0.1)
        p[f"qkv_w_{i}"] = normal(3 * D, D)
        p[f"qkv_b_{i}"] = normal(3 * D)
        p[f"proj_w_{i}"] = normal(D, D, std=proj_std)
        p[f"proj_b_{i}"] = normal(D)
        p[f"ln2_w_{i}"] = normal(D, std=0.1, mean=1.0)
        p[f"ln2_b_{i}"] = normal(D, std=0.1)
        p[f"fc_w_{i}"] = normal(4 * D, D)
        p[f"fc_b_{i}"] = normal(4 * D)
        p[f"out_w_{i}"] = normal(D, 4 * D, std=proj_std)
        p[f"out_b_{i}"] = normal(D)
    p["lnf_w"] = normal(D, std=0.1, mean=1.0)
    p["lnf_b"] = normal(D, std=0.1)
    return p


def params_of(inputs):
    """The floating-point inputs, in the trace's input order (the gradients tracer returns)."""
    return {k: v for k, v in inputs.items() if v.is_floating_point()}


def loss_fn(p, B, T, V, D, NH, L, checkpoint=False, math_attention=False):
    HD = D // NH

    def attention(h, qkv_w, qkv_b, proj_w, proj_b):
        qkv = F.linear(h, qkv_w, qkv_b)
        q, k, v = qkv.split(D, dim=2)
        q, k, v = (t.reshape(B, T, NH, HD).transpose(1, 2) for t in (q, k, v))
        if math_attention:  # float32 reference: the plain formula
            s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HD))
            s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
            y = torch.softmax(s, -1) @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return F.linear(y.transpose(1, 2).reshape(B, T, D), proj_w, proj_b)

    def block(x, i):
        w = [p[f"{n}_{i}"] for n in BLOCK]
        ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, out_w, out_b = w
        x = x + attention(F.layer_norm(x, (D,), ln1_w, ln1_b), qkv_w, qkv_b, proj_w, proj_b)
        h = F.layer_norm(x, (D,), ln2_w, ln2_b)
        return x + F.linear(F.gelu(F.linear(h, fc_w, fc_b), approximate="tanh"), out_w, out_b)

    x = F.embedding(p["idx"], p["wte"]) + p["wpe"]
    for i in range(L):
        if checkpoint:
            x = torch.utils.checkpoint.checkpoint(block, x, i, use_reentrant=False)
        else:
            x = block(x, i)
    x = F.layer_norm(x, (D,), p["lnf_w"], p["lnf_b"])
    logits = F.linear(x, p["wte"])
    return F.cross_entropy(logits.float().reshape(B * T, V), p["targets"].reshape(B * T))


_ST_DTYPES = {torch.bfloat16: "BF16", torch.float16: "F16", torch.float32: "F32", torch.float64: "F64",
              torch.int64: "I64", torch.int32: "I32"}


def save_safetensors(path, tensors):
    """Writes a .safetensors file (the format's header by hand: no dependency but torch)."""
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        raw = t.view(torch.uint8).numpy().tobytes() if t.dtype != torch.bool else t.numpy().tobytes()
        header[name] = {"dtype": _ST_DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
