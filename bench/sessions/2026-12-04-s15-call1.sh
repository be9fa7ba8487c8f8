#!/usr/bin/env bash
# Session 15 call 1: the executor's donor candidates, 32 KiB horizontal kernels, fuse's clean cuts
# and optim.step without a pytree walk, on the GPU: correctness first (jit_cuda.trace, AdamW
# against torch.optim.AdamW(fused=True) and float64), then GPT-2 small's step and optimizer
# interleaved with PyTorch's, the optimizer's host profile, and the example's tokens/s.
set -uo pipefail
export T=.dev/tracer tmp=/tmp/s15 TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
mkdir -p $tmp
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
G="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
echo "== jit_cuda.trace"
timeout 120 $T run tests/gpu/jit_cuda.trace 2>&1 | tail -2
echo "== adamw_torch.py"
for dev in cuda cpu; do timeout 120 python3 tests/gpu/adamw_torch.py $T $dev 2>&1 | tail -12; done
for round in 1 2; do
  echo "== round $round"
  timeout 120 python3 bench/train_step_torch.py --runs 20 2>&1 | tail -1
  timeout 150 $T run bench/train_phases.trace --allow-read examples $G -- --steps 20 --clip 0 2>&1 | grep -E "pipelined|repeated"
  timeout 120 python3 bench/train_step_torch.py --runs 20 --clip 1.0 2>&1 | tail -1
  timeout 150 $T run bench/train_phases.trace --allow-read examples $G -- --steps 20 --clip 1.0 2>&1 | grep -E "pipelined|repeated"
done
echo "== optimizer host profile (clip 0)"
TRACER_GPU_PROFILE=host timeout 150 $T run bench/train_phases.trace --allow-read examples $G -- --steps 20 --clip 0 2>&1 | grep -iE "repeated|host|kernel|launch" | head -20
echo "== train_gpt GPT-2 small, 30 steps"
timeout 200 $T run examples/train_gpt.trace --device cuda $G -- --steps 30 --log 10 2>&1 | tail -4
