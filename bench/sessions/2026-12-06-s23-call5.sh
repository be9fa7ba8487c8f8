#!/usr/bin/env bash
# Session 23 call 5: ops.trace's reductions, rows and columns on cuda against the CPU (call 4's
# checks passed a trailing "--" to lib.sh's check and compared nothing), then GPT-2 small's step
# against PyTorch's, three rounds (call 4's PyTorch runs were disturbed: 18.3-23.4 ms). Carry [".dev"].
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
tmp=$(mktemp -d)
source bench/sessions/lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
S="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
OLD="TRACER_COLUMN_WAVE=0 TRACER_ROWS_ONLINE=0"
for e in ops_reduce_f32 ops_reduce_lowp ops_rows ops_columns ops_total ops_column_views; do
  for p in "" fuse; do check "ops $e ${p:-no passes}" tests/gpu/ops.trace --entry $e ${p:+--passes $p}; done
done
TRACER_ROWS_ONLINE=0 check "ops ops_rows fuse two-pass" tests/gpu/ops.trace --entry ops_rows --passes fuse
TRACER_ROWS_ONLINE=1 check "ops ops_rows fuse all online" tests/gpu/ops.trace --entry ops_rows --passes fuse
for round in 1 2 3; do
  for clip in 0 1.0; do
    timeout 100 python3 bench/train_step_torch.py --runs 20 --clip $clip 2>&1 | tail -1 | cut -c1-150
    for v in "" "$OLD"; do
      echo "-- [$v] clip $clip: $(env $v timeout 100 $T run bench/train_phases.trace --allow-read examples $S -- --steps 20 --clip $clip --cuda-graph 1 2>&1 | grep -E "pipelined|error" | cut -c1-120)"
    done
  done
done
