#!/usr/bin/env bash
# Session 14 call 4: the step against PyTorch again, interleaved (call 3's PyTorch ran at
# 21.8 ms against 17.3-17.8 in calls 1-2: the machine, not a change of PyTorch's).
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
G="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
for round in 1 2; do
  echo "== round $round"
  timeout 120 python3 bench/train_step_torch.py --runs 20 2>&1 | tail -1
  timeout 150 $T run bench/train_phases.trace --allow-read examples $G -- --steps 20 --clip 0 2>&1 | grep -E "pipelined|repeated"
  timeout 120 python3 bench/train_step_torch.py --runs 20 --clip 1.0 2>&1 | tail -1
  timeout 150 $T run bench/train_phases.trace --allow-read examples $G -- --steps 20 --clip 1.0 2>&1 | grep -E "pipelined|repeated"
done
