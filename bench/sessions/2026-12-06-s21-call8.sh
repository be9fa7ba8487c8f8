#!/usr/bin/env bash
# Session 21 call 8: the clipping inside the update (optim.step_clipped) against clip_grad_norm
# then step, GPT-2 small's step with clip 1.0, and PyTorch's in the same call; jit_cuda.trace
# (step_clipped on cuda against the CPU). Carry [".dev"].
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
S="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
echo "== jit_cuda.trace: $(timeout 100 $T run tests/gpu/jit_cuda.trace 2>&1 | tail -1 | cut -c1-200)"
timeout 100 python3 bench/train_step_torch.py --runs 20 --clip 1.0 2>&1 | tail -1
for f in 1 0 1; do
  timeout 100 $T run bench/train_phases.trace --allow-read examples $S -- --steps 20 --clip 1.0 --fused-clip $f 2>&1 | grep -E "train_phases|pipelined|each phase|repeated"
done
