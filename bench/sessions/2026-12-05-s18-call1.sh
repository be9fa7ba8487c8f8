#!/usr/bin/env bash
# Session 18 call 1: where the optimizer's time goes after session 17's alignment fix (it ran at
# 1.3 TB/s of the copy's 2.6-2.8 on an H100): wall time, host time, each statement's device time,
# ncu's kernel durations; then GPT-2 small's step against PyTorch's, interleaved, two rounds.
set -uo pipefail
export T=.dev/tracer tmp=/tmp/s18 TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
mkdir -p $tmp
source bench/sessions/lib.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
G="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
echo "== adamw_torch.py"
timeout 120 python3 tests/gpu/adamw_torch.py $T cuda 2>&1 | tail -2
echo "== copy ceiling (torch)"
python3 - <<'PY'
import torch
x = torch.empty(256 << 20, dtype=torch.uint8, device="cuda"); y = torch.empty_like(x)
for _ in range(3): y.copy_(x)
s, e = torch.cuda.Event(True), torch.cuda.Event(True); s.record()
for _ in range(50): y.copy_(x)
e.record(); torch.cuda.synchronize(); ms = s.elapsed_time(e) / 50
print("copy 256 MiB: %.3f ms, %.0f GB/s (read + write)" % (ms, 2 * x.numel() / ms / 1e6))
PY
echo "== optimizer alone"
for r in 1 2; do timeout 150 $T run bench/optim_step.trace --allow-read examples -- --steps 50 2>&1 | tail -1; done
echo "== host profile"
TRACER_GPU_PROFILE=host timeout 150 $T run bench/optim_step.trace --allow-read examples -- --steps 20 2>&1 | tail -25
echo "== device profile (statements)"
TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=12 timeout 150 $T run bench/optim_step.trace --allow-read examples -- --steps 5 2>&1 | tail -30
echo "== ncu: the horizontal kernels of two steps after warm-up"
timeout 200 ncu --clock-control none -k regex:horizontal --launch-skip 6 --launch-count 6 --metrics gpu__time_duration.sum,dram__bytes.sum,launch__grid_size,launch__registers_per_thread \
  $T run bench/optim_step.trace --allow-read examples -- --steps 4 2>&1 | grep -E "^  [a-zA-Z_]|gpu__time|dram__bytes|grid_size|registers" | head -60
rounds 2 "$G"
