#!/usr/bin/env bash
# Session 23 call 1: where GPT-2 small's forward and backward differ from torch.compile's, product
# by product: tracer's statements (TRACER_GPU_PROFILE=2, every statement timed) and PyTorch's
# aten products by operand shapes (bench/probes/gemm_shapes.py), plus one round of the step for
# today's noise. Carry [".dev"].
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
S="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
timeout 60 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
G="examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used --bench 1 --device cuda"
TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 120 $T run $G > $OUT/prof.txt 2>&1
grep -E "total" $OUT/prof.txt | head -5
timeout 150 python3 bench/probes/gemm_shapes.py > $OUT/torch_gemms.txt 2>&1; head -40 $OUT/torch_gemms.txt
timeout 100 python3 bench/torch_profile.py compile > $OUT/torch_kernels.txt 2>&1; head -8 $OUT/torch_kernels.txt
for clip in 0 1.0; do
  timeout 100 python3 bench/train_step_torch.py --runs 20 --clip $clip 2>&1 | tail -1 | cut -c1-150
  timeout 100 $T run bench/train_phases.trace --allow-read examples $S -- --steps 20 --clip $clip --cuda-graph 1 2>&1 | grep -E "pipelined|each phase|repeated|error" | cut -c1-200
done
