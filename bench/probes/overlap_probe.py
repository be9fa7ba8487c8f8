# Probe: how much of a memory-bound optimizer update can hide behind a backward's matmuls when
# the two run on two streams? GPT-2 small's backward products (B*T=8192 rows, 12 layers: the qkv,
# projection and two MLP products, each a data and a weight gradient, bf16) on one stream; an
# AdamW-like pass over each layer's parameters (bf16 p, g, m, v: read 4, write 3) on another,
# started as each layer's gradients would be ready. Prints the matmuls alone, the updates alone,
# the two back to back on one stream, and the two on two streams.
# Run: python3 bench/probes/overlap_probe.py
import torch

torch.manual_seed(0)
dev = "cuda"
M, D, L = 8192, 768, 12
bf = torch.bfloat16
shapes = [(D, 3 * D), (D, D), (D, 4 * D), (4 * D, D)]  # (in, out) of each layer's products
layers = []
for _ in range(L):
    mats = []
    for i, o in shapes:
        x = torch.randn(M, i, device=dev, dtype=bf)
        w = torch.randn(o, i, device=dev, dtype=bf)
        dy = torch.randn(M, o, device=dev, dtype=bf)
        mats.append((x, w, dy))
    n = sum(i * o for i, o in shapes) + 4 * D * 2  # weights and LN/bias-ish extras
    p, g, m, v = (torch.randn(n, device=dev, dtype=bf) for _ in range(4))
    layers.append((mats, (p, g, m, v)))
# the embeddings' share (wte 50304x768 + wpe), updated last as in a real backward
n_emb = 50304 * D + 1024 * D
emb = tuple(torch.randn(n_emb, device=dev, dtype=bf) for _ in range(4))


def backward_layer(mats):
    for x, w, dy in mats:
        dy @ w            # data gradient  [M, in]
        dy.t() @ x        # weight gradient [out, in]


def fused_update(pgmv):
    p, g, m, v = pgmv
    torch._fused_adamw_([p], [g], [m], [v], [], state_steps=[torch.tensor(1.0, device=dev)], lr=1e-4, beta1=0.9,
                        beta2=0.999, weight_decay=0.1, eps=1e-8, amsgrad=False, maximize=False)


side = torch.cuda.Stream()


def run(mode, upd):
    if mode in ("matmuls", "serial", "overlap"):
        for li in reversed(range(L)):
            backward_layer(layers[li][0])
            if mode == "serial":
                upd(layers[li][1])
            elif mode == "overlap":
                ev = torch.cuda.Event()
                ev.record()
                side.wait_event(ev)
                with torch.cuda.stream(side):
                    upd(layers[li][1])
        if mode == "serial":
            upd(emb)
        elif mode == "overlap":
            with torch.cuda.stream(side):
                upd(emb)
            torch.cuda.current_stream().wait_stream(side)
    elif mode == "updates":
        for li in reversed(range(L)):
            upd(layers[li][1])
        upd(emb)


def timed(mode, upd, n=20):
    for _ in range(3):
        run(mode, upd)
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(True), torch.cuda.Event(True)
    s.record()
    for _ in range(n):
        run(mode, upd)
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / n


for rep in range(2):
    a, u, s, o = (timed(m, fused_update) for m in ("matmuls", "updates", "serial", "overlap"))
    print("overlap probe (fused AdamW): matmuls %.3f ms, updates %.3f ms, serial %.3f ms, two streams %.3f ms: "
          "hidden %.3f of %.3f ms" % (a, u, s, o, s - o, u))
