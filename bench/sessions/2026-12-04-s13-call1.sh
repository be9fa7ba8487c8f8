#!/usr/bin/env bash
# Session 13 call 1: compiled functions in the language on the GPU (the wip/gpu-compiled branch):
# tests/gpu/jit_cuda.trace (value_and_grad, jit, AdamW on cuda against the CPU), the small
# train_gpt on cuda (the loss falls), GPT-2 small trained from the language (tokens/s), and
# PyTorch's full step (torch.compile + fused AdamW) in the same call.
set -uo pipefail
export T=.dev/tracer tmp=/tmp/s13 TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
mkdir -p $tmp
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== jit_cuda.trace"
timeout 120 $T run tests/gpu/jit_cuda.trace 2>&1 | tail -8
echo "== train_gpt small on cuda"
timeout 120 $T run examples/train_gpt.trace --device cuda -- --steps 100 --log 25 2>&1 | tail -7
echo "== train_gpt small on cpu (the same losses?)"
timeout 120 $T run examples/train_gpt.trace -- --steps 100 --log 25 2>&1 | tail -7
echo "== train_gpt GPT-2 small on cuda"
timeout 240 $T run examples/train_gpt.trace --device cuda --set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12 -- --steps 25 --log 5 2>&1 | tail -9
echo "== torch"
timeout 240 python3 bench/train_step_torch.py --runs 20 2>&1 | tail -3
