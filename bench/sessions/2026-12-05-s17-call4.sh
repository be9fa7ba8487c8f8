#!/usr/bin/env bash
# Session 17 call 4: the horizontal and single elementwise kernels no longer count one-element
# inputs (the optimizer's coefficient views at 8-byte offsets) in their vector path's alignment
# check, which had sent every AdamW member down the scalar path since session 16's slice views.
# Correctness (AdamW against torch and float64, slice views against the CPU), then the optimizer
# alone and GPT-2 small's step against PyTorch's, one round.
set -uo pipefail
export T=.dev/tracer tmp=/tmp/s17 TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
mkdir -p $tmp
source bench/sessions/lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
G="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
timeout 60 python3 tests/gpu/adamw_torch.py $T cuda 2>&1 | tail -2
check "ops_slice_views fuse" tests/gpu/ops.trace --entry ops_slice_views --passes fuse
for r in 1 2; do timeout 100 $T run bench/optim_step.trace --allow-read examples -- --steps 50 2>&1 | tail -1; done
timeout 100 python3 bench/train_step_torch.py --runs 20 --clip 0 2>&1 | tail -1
timeout 100 $T run bench/train_phases.trace --allow-read examples $G -- --steps 20 --clip 0 2>&1 | grep -E "pipelined|repeated"
