#!/usr/bin/env bash
# Session 9 call 3: fsdp(zero=3) on the GPU against PyTorch autograd in float64 (call 1's check,
# fixed), then bench/dist_2gpu.sh on a world of one (the 2-GPU script end to end, against PyTorch
# FSDP2 and DTensor TP under torchrun on the same GPU).
set -uo pipefail
export T=.dev/tracer tmp=/tmp/s9 TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
mkdir -p $tmp
sed -n '/^# fsdp (ZeRO-3) on the GPU against PyTorch/,$p' bench/sessions/2026-12-02-s9-call1.sh > $tmp/torch_part.sh
bash $tmp/torch_part.sh
bash bench/dist_2gpu.sh 1
