#!/usr/bin/env bash
# Session 14 call 2: where the host's time goes in GPT-2 small's step (TRACER_GPU_PROFILE=host:
# each executor's host time per run, split by statement kind), the optimizer being host-bound
# (call 1: 4.2-5.3 ms a step, host time equal to the step).
set -uo pipefail
export T=.dev/tracer tmp=/tmp/s14 TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
mkdir -p $tmp
G="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
echo "== train_phases clip 1.0, TRACER_GPU_PROFILE=host"
TRACER_GPU_PROFILE=host timeout 200 $T run bench/train_phases.trace --allow-read examples $G -- --steps 20 --clip 1.0 2>&1 | tail -60
