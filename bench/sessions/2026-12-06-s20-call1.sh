#!/usr/bin/env bash
# Session 20 call 1: the optimizer and GPT-2 small's step after session 19 linked the tracer
# program with tcmalloc (predicted: the optimizer's host time falls below its device time, so the
# update runs at memory speed; the step stays at or below 0.9x PyTorch's), against PyTorch in
# the same call. Carry [".dev"] after `strip -o .dev/tracer build/tracer`.
set -uo pipefail
export T=.dev/tracer tmp=/tmp/s20 TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
mkdir -p $tmp
source bench/sessions/lib.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
echo "== copy ceiling (torch)"
copy_ceiling
echo "== adamw_torch.py (AdamW against PyTorch's on the same data)"
timeout 120 python3 tests/gpu/adamw_torch.py $T cuda 2>&1 | tail -2
echo "== optimizer alone"
for r in 1 2 3; do timeout 150 $T run bench/optim_step.trace --allow-read examples -- --steps 100 2>&1 | tail -1; done
echo "== host profile"
TRACER_GPU_PROFILE=host timeout 150 $T run bench/optim_step.trace --allow-read examples -- --steps 20 2>&1 | tail -12
rounds 2 "--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
