#!/usr/bin/env bash
# Session 22 call 2: horizontal column kernels (a gradient norm's independent sums as one pair of
# kernels; fuse splits independent reductions). jit_cuda.trace (the new reductions check and
# step_clipped against the CPU), then GPT-2 small's step and its clipped update, the binary before
# (.dev/tracer_old, dd3c0ba) and after (.dev/tracer) interleaved, PyTorch's step in the same call.
# Carry [".dev"].
set -uo pipefail
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
S="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
echo "== jit_cuda.trace (new): $(timeout 120 .dev/tracer run tests/gpu/jit_cuda.trace 2>&1 | tail -1 | cut -c1-300)"
for round in 1 2; do
  for clip in 1.0 0; do
    timeout 100 python3 bench/train_step_torch.py --runs 20 --clip $clip 2>&1 | tail -1 | cut -c1-160
    for b in tracer_old tracer; do
      echo "-- $b clip $clip"
      timeout 100 .dev/$b run bench/train_phases.trace --allow-read examples $S -- --steps 20 --clip $clip 2>&1 | grep -E "pipelined|each phase|repeated"
    done
  done
done
