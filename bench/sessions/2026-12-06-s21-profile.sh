#!/usr/bin/env bash
# Session 21: why the optimizer repeated inside train_phases.trace (1.3-1.4 ms) is slower than
# optim_step.trace (0.73 ms) on the same parameters: each statement's device time (synchronized)
# in both. Carry [".dev"].
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
S="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
ls /usr/local/cuda/bin 2>/dev/null | grep -E "nsys|ncu" | head -3
echo "== optim_step, profiled"
TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=15 timeout 120 $T run bench/optim_step.trace --allow-read examples -- --steps 10 > $OUT/optim_step.log 2>&1
grep -A16 "statements by device" $OUT/optim_step.log | tail -17
grep "GPU profile" $OUT/optim_step.log | tail -3
echo "== train_phases, profiled"
TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=15 timeout 200 $T run bench/train_phases.trace --allow-read examples $S -- --steps 5 --clip 0 > $OUT/phases.log 2>&1
grep -E "GPU profile|statements by device" $OUT/phases.log | head -20
