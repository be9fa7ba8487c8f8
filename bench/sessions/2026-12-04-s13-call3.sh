#!/usr/bin/env bash
# Session 13 call 3: does GPT-2 small's step slow over a run without clipping (call 2), and does
# device memory grow meanwhile? 80 steps, nvidia-smi's used memory sampled every 2 s.
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
G="--device cuda --set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
for clip in 0 1.0; do
  nvidia-smi --query-gpu=memory.used --format=csv,noheader -lms 2000 > /tmp/mem_$clip.txt &
  smi=$!
  echo "== --clip $clip"
  timeout 240 $T run examples/train_gpt.trace $G -- --steps 80 --log 10 --clip $clip 2>&1 | grep -E "^step|compiled"
  kill $smi
  echo "device memory used (MiB), sampled every 2 s: $(tr -d ' MiB' < /tmp/mem_$clip.txt | tr '\n' ' ')"
done
