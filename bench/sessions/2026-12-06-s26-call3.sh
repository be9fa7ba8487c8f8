#!/usr/bin/env bash
# Session 26 call 3: RowsColumns kernels with their column accumulators in shared memory (each
# warp its own [A][32] per reduction; 128 registers, two blocks a multiprocessor) against the
# register accumulators of call 2 (TRACER_ROWCOL_SHARED=0: 207-238 registers, one block).
# 1. ops_rows_columns on cuda against the CPU, both forms.
# 2. bench/column_probe.trace ln_bwd: shared 264 and 132 blocks, registers 264 and 132, and the
#    two groups of before (TRACER_FUSE_ROWS_COLUMNS=0).
# 3. GPT-2 small's forward and backward profile, and its step (PyTorch interleaved), new and old;
#    bench/gpt_check.py small last. Carry [".dev"].
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
tmp=$(mktemp -d)
source bench/sessions/lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
check "ops_rows_columns fuse (shared)" tests/gpu/ops.trace --entry ops_rows_columns --passes fuse
TRACER_ROWCOL_SHARED=0 check "ops_rows_columns fuse (registers)" tests/gpu/ops.trace --entry ops_rows_columns --passes fuse
echo "== ln_bwd alone (bench/column_probe.trace, [8192, 768] bf16)"
P="bench/column_probe.trace --entry ln_bwd --passes fuse,del_last_used --device cuda --json --bench 50"
for v in "" "TRACER_ROWCOL_BLOCKS=132" "TRACER_ROWCOL_SHARED=0" "TRACER_ROWCOL_SHARED=0 TRACER_ROWCOL_BLOCKS=132" "TRACER_FUSE_ROWS_COLUMNS=0" ""; do
  bench "[$v]" env $v $T run $P
done
timeout 60 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
G="examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used --bench 1 --device cuda"
TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 120 $T run $G > /tmp/prof.txt 2>&1
echo "profile new: $(summ /tmp/prof.txt)"
grep -E "^#.*-> t[0-9]+ bf16\[8, 1024, 768\]" /tmp/prof.txt | head -3
[ -n "${OUT:-}" ] && cp /tmp/prof.txt "$OUT/prof.txt"
S="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
for clip in 0 1.0; do
  timeout 100 python3 bench/train_step_torch.py --runs 20 --clip $clip 2>&1 | tail -1 | cut -c1-330
  for v in "" "TRACER_ROWCOL_SHARED=0 TRACER_ROWCOL_BLOCKS=132" "TRACER_FUSE_ROWS_COLUMNS=0"; do
    echo "-- [$v] clip $clip: $(env $v timeout 100 $T run bench/train_phases.trace --allow-read examples $S -- --steps 20 --clip $clip --cuda-graph 1 2>&1 | grep -E "pipelined|error" | cut -c1-120)"
  done
done
timeout 120 python3 bench/gpt_check.py $T --size small 2>&1 | tail -2 | cut -c1-250
