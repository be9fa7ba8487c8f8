#!/usr/bin/env bash
# Session 23 call 2: the column kernels alone (bench/column_probe.trace), each statement's device
# time under TRACER_GPU_PROFILE=2: the grid's size (TRACER_COLUMN_MIN_BLOCKS) and the first kernel
# alone (TRACER_COLUMN_SKIP2=1, an experiment's binary: the second kernel not launched).
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
for e in ln_cols bias_cols gelu_cols; do
  for v in "" "TRACER_COLUMN_MIN_BLOCKS=132" "TRACER_COLUMN_MIN_BLOCKS=528" "TRACER_COLUMN_MIN_BLOCKS=1056" "TRACER_COLUMN_SKIP2=1" "TRACER_COLUMN_SKIP2=1 TRACER_COLUMN_MIN_BLOCKS=528"; do
    r=$(env $v TRACER_GPU_PROFILE=2 timeout 60 $T run bench/column_probe.trace --entry $e --passes fuse,del_last_used --device cuda --bench 50 2>&1 | grep -E "^#  .* kernel fusion0" | head -1)
    echo "$e [$v] $r"
  done
done
