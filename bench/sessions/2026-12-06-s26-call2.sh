#!/usr/bin/env bash
# Session 26 call 2: RowsColumns groups (a layer norm's backward as one kernel: the rows' pass with
# per-column partials, then a kernel combining them; ir/group.h, codegen/cuda_rows.cpp).
# 1. Correctness: tests/gpu/ops.trace ops_rows_columns (bf16, f32 odd width, 3-D, f64) and
#    ops_unary_more (Thunder's other elementwise prims), a prims.var_mean printout, on cuda
#    against the CPU; bench/gpt_check.py small against PyTorch.
# 2. bench/column_probe.trace ln_bwd alone: fused (default), TRACER_FUSE_ROWS_COLUMNS=0 (a row
#    and a column group, as before), and 132 / 528 blocks (TRACER_ROWCOL_BLOCKS).
# 3. The GPT's forward and backward profiled statement by statement, new and old ($OUT).
# 4. GPT-2 small's step, one round, PyTorch interleaved with the new build and the old grouping;
#    then bench/gpt_check.py small against PyTorch (last: the call's time is short).
# Carry [".dev"].
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
tmp=$(mktemp -d)
source bench/sessions/lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
copy_ceiling
check "ops_rows_columns fuse" tests/gpu/ops.trace --entry ops_rows_columns --passes fuse
check "ops_rows_columns fuse,del_last_used" tests/gpu/ops.trace --entry ops_rows_columns --passes fuse,del_last_used
check "ops_unary_more" tests/gpu/ops.trace --entry ops_unary_more
check "ops_unary_more fuse" tests/gpu/ops.trace --entry ops_unary_more --passes fuse
check "ops_thunder_shape fuse" tests/gpu/ops.trace --entry ops_thunder_shape --passes fuse
check "layer_norm_var_mean.txt fuse" tests/thunder/layer_norm_var_mean.txt --passes fuse
echo "== ln_bwd alone (bench/column_probe.trace, [8192, 768] bf16)"
P="bench/column_probe.trace --entry ln_bwd --passes fuse,del_last_used --device cuda --json --bench 50"
for v in "" "TRACER_FUSE_ROWS_COLUMNS=0" "TRACER_ROWCOL_BLOCKS=132" "TRACER_ROWCOL_BLOCKS=528" ""; do
  bench "[$v]" env $v $T run $P
done
TRACER_GPU_PROFILE=2 timeout 60 $T run $P > "$tmp/p1.txt" 2>&1; grep -E "^#.*(fusion|total)" "$tmp/p1.txt" | head -5
TRACER_FUSE_ROWS_COLUMNS=0 TRACER_GPU_PROFILE=2 timeout 60 $T run $P > "$tmp/p0.txt" 2>&1; grep -E "^#.*(fusion|total)" "$tmp/p0.txt" | head -5
timeout 60 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
G="examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used --bench 1 --device cuda"
TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 120 $T run $G > /tmp/prof.txt 2>&1
TRACER_FUSE_ROWS_COLUMNS=0 TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 120 $T run $G > /tmp/prof0.txt 2>&1
echo "profile new: $(summ /tmp/prof.txt)"
echo "profile old: $(summ /tmp/prof0.txt)"
grep -E "^#" /tmp/prof.txt | head -14
[ -n "${OUT:-}" ] && cp /tmp/prof.txt "$OUT/prof.txt" && cp /tmp/prof0.txt "$OUT/prof0.txt"
S="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
for round in 1; do
  for clip in 0 1.0; do
    timeout 100 python3 bench/train_step_torch.py --runs 20 --clip $clip 2>&1 | tail -1 | cut -c1-330
    for v in "" "TRACER_FUSE_ROWS_COLUMNS=0"; do
      echo "-- [$v] clip $clip: $(env $v timeout 100 $T run bench/train_phases.trace --allow-read examples $S -- --steps 20 --clip $clip --cuda-graph 1 2>&1 | grep -E "pipelined|error" | cut -c1-120)"
    done
  done
done
timeout 120 python3 bench/gpt_check.py $T --size small 2>&1 | tail -3 | cut -c1-250
