#!/usr/bin/env bash
# Session 14 call 2: horizontal kernels (independent elementwise groups as one launch: the
# optimizer's 149 updates, the clipping's scale) on GPT-2 small's step, against
# TRACER_HORIZONTAL=0 and PyTorch (with and without clipping) in the same call; jit_cuda.trace
# (77 parameters of odd sizes through AdamW, SGD and clipping on the GPU against the CPU);
# TRACER_GPU_PROFILE=host for where the host's time goes.
set -uo pipefail
export T=.dev/tracer tmp=/tmp/s14 TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
mkdir -p $tmp
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
G="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
echo "== jit_cuda.trace"
timeout 150 $T run tests/gpu/jit_cuda.trace 2>&1 | tail -3
for clip in 1.0 0; do
  echo "== train_phases clip $clip"
  timeout 200 $T run bench/train_phases.trace --allow-read examples $G -- --steps 20 --clip $clip 2>&1 | tail -5
  echo "== train_phases clip $clip, TRACER_HORIZONTAL=0"
  TRACER_HORIZONTAL=0 timeout 200 $T run bench/train_phases.trace --allow-read examples $G -- --steps 20 --clip $clip 2>&1 | tail -5
done
echo "== torch, clip 0 and 1.0"
timeout 240 python3 bench/train_step_torch.py --runs 20 2>&1 | tail -1
timeout 240 python3 bench/train_step_torch.py --runs 20 --clip 1.0 2>&1 | tail -1
echo "== train_gpt GPT-2 small, 40 steps"
timeout 200 $T run examples/train_gpt.trace --device cuda $G -- --steps 40 --log 10 2>&1 | tail -5
echo "== host profile, clip 1.0"
TRACER_GPU_PROFILE=host timeout 200 $T run bench/train_phases.trace --allow-read examples $G -- --steps 20 --clip 1.0 2>&1 | grep -A14 "^# host time" | tail -45
