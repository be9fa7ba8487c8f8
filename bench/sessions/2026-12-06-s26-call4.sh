#!/usr/bin/env bash
# Session 26 call 4: the final build after the review fixes (integer copysign in f32 on the GPU,
# the RowsColumns budget and shared-memory fallback, no buffer reuse where the reduced dimensions
# are all 1): the new groups' and prims' GPU checks again, and GPT-2 small's step once against
# PyTorch. Carry [".dev"].
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
tmp=$(mktemp -d)
source bench/sessions/lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
check "ops_rows_columns fuse" tests/gpu/ops.trace --entry ops_rows_columns --passes fuse,del_last_used
check "ops_unary_more fuse" tests/gpu/ops.trace --entry ops_unary_more --passes fuse
check "ops_thunder_shape" tests/gpu/ops.trace --entry ops_thunder_shape
check "ops_columns fuse" tests/gpu/ops.trace --entry ops_columns --passes fuse
check "ops_rows fuse" tests/gpu/ops.trace --entry ops_rows --passes fuse
S="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
timeout 100 python3 bench/train_step_torch.py --runs 20 --clip 0 2>&1 | tail -1 | cut -c1-200
echo "-- clip 0: $(timeout 100 $T run bench/train_phases.trace --allow-read examples $S -- --steps 20 --clip 0 --cuda-graph 1 2>&1 | grep -E 'pipelined|error' | cut -c1-120)"
