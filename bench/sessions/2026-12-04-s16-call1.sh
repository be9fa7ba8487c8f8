#!/usr/bin/env bash
# Session 16 call 1 (prepared in session 16; no device was lent then, so it runs in a later one):
# fuse's independent computations as separate fusions (each AdamW update its own horizontal
# segment, 52 registers instead of 255) and slices as views. Correctness first (jit_cuda.trace,
# AdamW against torch.optim.AdamW(fused=True) and float64, slice views against the CPU), then the
# optimizer alone with its kernels under ncu, GPT-2 small's step against PyTorch's interleaved,
# and the example's tokens/s.
set -uo pipefail
export T=.dev/tracer tmp=/tmp/s16 TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
mkdir -p $tmp
source bench/sessions/lib.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
G="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
echo "== jit_cuda.trace"
timeout 120 $T run tests/gpu/jit_cuda.trace 2>&1 | tail -2
echo "== adamw_torch.py"
timeout 120 python3 tests/gpu/adamw_torch.py $T cuda 2>&1 | tail -12
echo "== slice views"
check "ops_slice_views" tests/gpu/ops.trace --entry ops_slice_views
check "ops_slice_views fuse" tests/gpu/ops.trace --entry ops_slice_views --passes fuse
echo "== optimizer alone"
for r in 1 2; do timeout 150 $T run bench/optim_step.trace --allow-read examples -- --steps 50 2>&1 | tail -1; done
echo "== ncu: the optimizer's kernels (after the first steps)"
timeout 200 ncu --clock-control none --launch-skip 12 --launch-count 3 --section SpeedOfLight --section LaunchStats --section Occupancy \
  $T run bench/optim_step.trace --allow-read examples -- --steps 3 2>&1 | grep -E "Registers Per|Achieved Occupancy|DRAM Throughput|Duration|Memory Throughput|Block Limit Registers" | head -30
rounds 2 "$G"
echo "== train_gpt GPT-2 small, 30 steps"
timeout 200 $T run examples/train_gpt.trace --device cuda $G -- --steps 30 --log 10 2>&1 | tail -4
