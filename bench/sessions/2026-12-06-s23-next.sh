#!/usr/bin/env bash
# Ready for the next session (written at the end of session 23, not run): what session 23 could
# not run for lack of device time. (1) tests/gpu/run.sh's checks after its attention section
# (the GPT's, gpt_check.py small and wide) with this binary; (2) a column group of five
# reductions (one block a multiprocessor, no launch bound of two) against the earlier rule;
# (3) on an H200, if one is lent, the online logsumexp against two passes, and the step.
# Carry [".dev"].
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
tmp=$(mktemp -d)
source bench/sessions/lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
S="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
for size in small wide; do timeout 200 python3 bench/gpt_check.py $T --size $size 2>&1 | tail -2; done
cat > /tmp/cols5.trace <<'TR'
def f(x0: bf16[8192, 768], x1: bf16[8192, 768], x2: bf16[8192, 768], x3: bf16[8192, 768], x4: bf16[8192, 768]):
    return sum(x0.float() * x1.float(), (0,)), sum(x1.float() * x2.float(), (0,)), sum(x2.float() * x3.float(), (0,)), sum(x3.float() * x4.float(), (0,)), sum(x4.float() * x0.float(), (0,))
TR
for v in "" "TRACER_COLUMN_WAVE=0"; do
  echo "cols5 [$v] $(env $v TRACER_GPU_PROFILE=2 timeout 60 $T run /tmp/cols5.trace --passes fuse --device cuda --bench 50 2>&1 | grep -E '^#  .* kernel fusion' | head -1)"
done
timeout 60 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
G="examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used --bench 1 --device cuda"
for v in "" "TRACER_ROWS_ONLINE=0"; do
  env $v TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 120 $T run $G > /tmp/prof.txt 2>&1
  echo "[$v] $(summ /tmp/prof.txt)"
done
for round in 1 2; do
  for clip in 0 1.0; do
    timeout 100 python3 bench/train_step_torch.py --runs 20 --clip $clip 2>&1 | tail -1 | cut -c1-150
    for v in "" "TRACER_ROWS_ONLINE=0"; do
      echo "-- [$v] clip $clip: $(env $v timeout 100 $T run bench/train_phases.trace --allow-read examples $S -- --steps 20 --clip $clip --cuda-graph 1 2>&1 | grep -E "pipelined|error" | cut -c1-120)"
    done
  done
done
