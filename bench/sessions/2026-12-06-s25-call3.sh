#!/usr/bin/env bash
# Session 25 call 3: after review fixes (kernel-scope scalars renamed tr_s_*, a 16-bit kind
# table, at most 64 codes a horizontal run; fuse's keepdim rewrite returning broadcasts made anew
# under their names): the GPU correctness checks of call 1 again, plus a prims softmax under grad
# (tests/lang/rows_without_keepdim.trace's functions) on cuda against the CPU. Carry [".dev"].
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
tmp=$(mktemp -d)
source bench/sessions/lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 120 python3 tests/gpu/adamw_torch.py $T cuda 2>&1 | tail -2 | cut -c1-250
echo "jit_cuda: $(timeout 120 $T run tests/gpu/jit_cuda.trace 2>&1 | tail -1 | cut -c1-200)"
for f in fuse_rows_dropped fuse_rows_dropped_nvfusion; do check "$f fuse" tests/pass_checks/$f.trace --passes fuse; done
check "rows grad softmax" tests/gpu/rows_dropped_grad.trace --passes grad,fuse,del_last_used
echo "optim: $(timeout 100 $T run bench/optim_step.trace --allow-read examples -- --steps 40 2>&1 | tail -1)"
