#!/usr/bin/env bash
# Session 25 call 2: GPT-2 small's step, two rounds, PyTorch (torch.compile, AdamW fused)
# interleaved with this build (one-element inputs hoisted, the update as one kernel) and with
# TRACER_HZ_MAX_MEMBERS=64 TRACER_HOIST_SCALARS=0 (three kernels, loads in the loop: session 24's
# kernels but for the shared segment code), without clipping and with clip 1.0. Carry [".dev"].
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
S="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
nvidia-smi --query-gpu=name --format=csv,noheader
for round in 1 2; do
  for clip in 0 1.0; do
    timeout 100 python3 bench/train_step_torch.py --runs 20 --clip $clip 2>&1 | tail -1 | cut -c1-330
    for v in "" "TRACER_HZ_MAX_MEMBERS=64 TRACER_HOIST_SCALARS=0"; do
      echo "-- [$v] clip $clip: $(env $v timeout 100 $T run bench/train_phases.trace --allow-read examples $S -- --steps 20 --clip $clip --cuda-graph 1 2>&1 | grep -E "pipelined|error" | cut -c1-120)"
    done
  done
done
