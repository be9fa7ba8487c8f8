#!/usr/bin/env bash
# Session 6 call 1: where the GPT step's time goes, tracer against torch.compile kernel by kernel
# (tracer's gated per-statement profile, every row; torch.profiler over one compiled step), and
# the step interleaved with torch.compile in one process (bench/ab_gpt.py), three rounds.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
start=$(date +%s)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
timeout 60 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors 2>/dev/null | tail -1 | cut -c1-150
G="examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used"
TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 90 $T run $G --bench 1 --device cuda > $OUT/tracer_profile.txt 2>&1
grep -A14 "GPU profile" $OUT/tracer_profile.txt | cut -c1-120
timeout 400 python3 bench/ab_gpt.py $T --rounds 3 --runs 15 --profile $OUT 2>$OUT/ab.err | tee $OUT/ab.txt | cut -c1-200
tail -3 $OUT/ab.err
head -25 $OUT/torch_kernels.txt | cut -c1-140
echo "total $(( $(date +%s) - start )) s"
