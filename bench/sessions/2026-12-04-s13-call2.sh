#!/usr/bin/env bash
# Session 13 call 2: GPT-2 small trained from the language on cuda, with and without gradient
# clipping (whose norm is read on the host each step), against PyTorch's full step again.
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
G="--device cuda --set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
for clip in 1.0 0; do
  echo "== train_gpt GPT-2 small on cuda, --clip $clip"
  timeout 240 $T run examples/train_gpt.trace $G -- --steps 40 --log 10 --clip $clip 2>&1 | tail -5
done
echo "== torch"
timeout 240 python3 bench/train_step_torch.py --runs 30 2>&1 | tail -2
