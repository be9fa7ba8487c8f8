#!/usr/bin/env bash
# Session 17 call 1: session 16's changes (fuse's independent computations as separate fusions,
# slices as views) on the GPU: correctness first (jit_cuda.trace, AdamW against
# torch.optim.AdamW(fused=True) and float64, slice views against the CPU), the optimizer alone and
# its kernels under ncu, GPT-2 small's loss curve against PyTorch's twin (bench/train_gpt_torch.py,
# same model, init, task and schedule), then the full step against PyTorch's, interleaved.
set -uo pipefail
export T=.dev/tracer tmp=/tmp/s17 TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
mkdir -p $tmp
source bench/sessions/lib.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
G="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
echo "== jit_cuda.trace"
timeout 120 $T run tests/gpu/jit_cuda.trace 2>&1 | tail -2
echo "== adamw_torch.py"
timeout 120 python3 tests/gpu/adamw_torch.py $T cuda 2>&1 | tail -4
echo "== slice views"
check "ops_slice_views" tests/gpu/ops.trace --entry ops_slice_views
check "ops_slice_views fuse" tests/gpu/ops.trace --entry ops_slice_views --passes fuse
echo "== optimizer alone"
for r in 1 2; do timeout 150 $T run bench/optim_step.trace --allow-read examples -- --steps 50 2>&1 | tail -1; done
echo "== ncu: the optimizer's kernels (after the first steps)"
timeout 150 ncu --clock-control none --launch-skip 12 --launch-count 3 --section SpeedOfLight --section LaunchStats --section Occupancy \
  $T run bench/optim_step.trace --allow-read examples -- --steps 3 2>&1 | grep -E "horizontal|Registers Per|Achieved Occupancy|DRAM Throughput|Duration|Block Limit Registers" | head -24
echo "== loss curves, GPT-2 small, 100 steps: tracer, then PyTorch (eager)"
timeout 150 $T run examples/train_gpt.trace --device cuda $G -- --steps 100 --log 10 2>&1 | tail -13
timeout 150 python3 bench/train_gpt_torch.py --steps 100 --log 10 2>&1 | tail -13
rounds 2 "$G"
