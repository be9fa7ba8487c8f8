#!/usr/bin/env bash
# Session 21 call 6: tests/gpu/run.sh (every example and test case on the GPU against the CPU; new:
# the DTensor TP printout on rank 1 of 2, torch._grouped_mm under grad, synchronize in
# jit_cuda.trace). Carry [".dev"].
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
start=$(date +%s)
timeout 500 bash tests/gpu/run.sh $T > $OUT/run.log 2>&1
echo "run.sh rc=$? in $(( $(date +%s) - start )) s: ok=$(grep -c '^ok' $OUT/run.log) FAIL=$(grep -c 'FAIL' $OUT/run.log)"
grep "FAIL" $OUT/run.log | head -20 | cut -c1-220
grep -E "dtensor_tp|grouped_mm|jit_cuda" $OUT/run.log | head -12 | cut -c1-200
tail -2 $OUT/run.log | cut -c1-200
