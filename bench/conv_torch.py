#!/usr/bin/env python3
"""PyTorch's twin of bench/conv_probe.trace: a ResNet basic block's forward and backward (cuDNN),
f32 (TF32 off, as tracer's f32 matmuls) and bf16, on cuda, median of 20 timed runs after 5
warm-ups (CUDA events)."""
import torch
import torch.nn.functional as F

torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False


def block(x, w1, w2):
    h = torch.relu(F.conv2d(x, w1, padding=1))
    y = torch.relu(F.conv2d(h, w2, padding=1) + x)
    return (y * y).sum().float()


for name, dt in [("resnet_block", torch.float32), ("resnet_block_bf16", torch.bfloat16)]:
    x = torch.randn(32, 64, 56, 56, device="cuda", dtype=dt, requires_grad=True)
    w1 = (torch.randn(64, 64, 3, 3, device="cuda") * 0.05).to(dt).requires_grad_(True)
    w2 = (torch.randn(64, 64, 3, 3, device="cuda") * 0.05).to(dt).requires_grad_(True)

    def step():
        loss = block(x, w1, w2)
        loss.backward()
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        step()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    print(f"torch {name} fwd+bwd: median {times[len(times) // 2]:.3f} ms")
