#!/usr/bin/env bash
# Session 20, one call (device time was short after failed starts): the optimizer and GPT-2
# small's step against PyTorch (one round), the printouts on cuda against the CPU, and the
# 16-layer Llama-2 augmented forward. Carry [".dev"] after `strip -o .dev/tracer build/tracer`.
set -uo pipefail
export T=.dev/tracer tmp=/tmp/s20 TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
mkdir -p $tmp
source bench/sessions/lib.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
copy_ceiling
echo "== optimizer alone"
for r in 1 2; do timeout 60 $T run bench/optim_step.trace --allow-read examples -- --steps 100 2>&1 | tail -1; done
sed -n '/== Thunder/,/== nvFuser/p' bench/sessions/2026-12-06-s20-call2.sh | grep -v "^echo \"== nvFuser" > $tmp/printouts.sh
echo "== Thunder's printouts of tests/thunder, cuda against the CPU"
source $tmp/printouts.sh
sed -n '/== Llama-2 16/,$p' bench/sessions/2026-12-06-s20-call2.sh > $tmp/llama.sh
source $tmp/llama.sh
rounds 1 "--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
