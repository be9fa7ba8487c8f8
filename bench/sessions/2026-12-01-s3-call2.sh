#!/usr/bin/env bash
# Session 3 call 2: where the GPT step's time goes, statement by statement (tracer) and kernel by
# kernel (torch.compile and eager), on the same GPU, for issue 12's remaining gap.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
timeout 60 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 60 $T run examples/gpt.trace --input /tmp/gpt.safetensors --bench 1 --device cuda \
  --passes grad,remat,fuse_reorder,del_last_used > $OUT/tracer_profile.txt 2>&1
timeout 120 python3 bench/torch_profile.py compile > $OUT/torch_compile_profile.txt 2>&1
timeout 60 python3 bench/torch_profile.py eager > $OUT/torch_eager_profile.txt 2>&1
grep -A14 "GPU profile" $OUT/tracer_profile.txt | head -16
head -8 $OUT/torch_compile_profile.txt; head -6 $OUT/torch_eager_profile.txt
