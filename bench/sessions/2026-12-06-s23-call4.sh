#!/usr/bin/env bash
# Session 23 call 4: this session's binary (column kernels in one wave for every width, the
# online logsumexp for rows over 4096) against its earlier rules in the same binary
# (TRACER_COLUMN_WAVE=0 TRACER_ROWS_ONLINE=0): correctness first (ops.trace's rows and columns,
# jit_cuda.trace, bench/gpt_check.py small and wide against PyTorch), then the column probe, the
# GPT's profile and its step against PyTorch's. Carry [".dev"].
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
tmp=$(mktemp -d)
source bench/sessions/lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
S="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
OLD="TRACER_COLUMN_WAVE=0 TRACER_ROWS_ONLINE=0"
for e in ops_reduce_f32 ops_reduce_lowp ops_rows ops_columns ops_total ops_column_views; do
  check "ops $e fuse" tests/gpu/ops.trace --entry $e --passes fuse --
done
TRACER_ROWS_ONLINE=0 check "ops ops_rows fuse two-pass" tests/gpu/ops.trace --entry ops_rows --passes fuse --
echo "jit_cuda.trace: $(timeout 150 $T run tests/gpu/jit_cuda.trace 2>&1 | tail -1 | cut -c1-300)"
for size in small wide; do timeout 200 python3 bench/gpt_check.py $T --size $size 2>&1 | tail -4; done
for e in ln_cols bias_cols gelu_cols; do
  for v in "" "TRACER_COLUMN_WAVE=1" "TRACER_COLUMN_WAVE=0"; do
    r=$(env $v TRACER_GPU_PROFILE=2 timeout 60 $T run bench/column_probe.trace --entry $e --passes fuse,del_last_used --device cuda --bench 50 2>&1 | grep -E "^#  .* kernel fusion0" | head -1)
    echo "$e [$v] $r"
  done
done
timeout 60 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
G="examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used --bench 1 --device cuda"
eval "$(sed -n '/^summ()/,/^}/p' bench/sessions/2026-12-06-s23-call3.sh)"
for v in "" "TRACER_COLUMN_WAVE=1" "$OLD"; do
  env $v TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 120 $T run $G > $OUT/prof.txt 2>&1
  echo "[$v] $(summ $OUT/prof.txt)"
done
for round in 1 2; do
  for clip in 0 1.0; do
    timeout 100 python3 bench/train_step_torch.py --runs 20 --clip $clip 2>&1 | tail -1 | cut -c1-150
    for v in "" "$OLD"; do
      echo "-- [$v] clip $clip: $(env $v timeout 100 $T run bench/train_phases.trace --allow-read examples $S -- --steps 20 --clip $clip --cuda-graph 1 2>&1 | grep -E "pipelined|error" | cut -c1-120)"
    done
  done
done
