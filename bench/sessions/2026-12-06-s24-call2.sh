#!/usr/bin/env bash
# Session 24 call 2. (1) The online logsumexp with fewer instructions (tr_exp_le0, tr_max_nan,
# the amax taken from the online sum's running maximum): ops.trace's rows on cuda against the CPU
# (special values; every row online and none), bench/gpt_check.py small and wide against PyTorch,
# and the GPT's forward and backward profiled, this build against the previous (.dev/tracer_base.gz,
# HEAD acee20e plus the experiment switches). (2) The optimizer's horizontal kernels: call 1's ncu
# put them at 0.70 ms of the step's 0.734 (2480 GB/s) against adamw_probe.cu's 0.59 ms; variants:
# members found by bisection (TRACER_HZ_TREE=1), launch bounds (256, N) (TRACER_HZ_MIN_BLOCKS=N).
# (2b) TRACER_HZ_MAX_MEMBERS=256: the update as one kernel, not three (64 members each).
# (3) GPT-2 small's step, this build and the previous against PyTorch's, two rounds. Carry [".dev"].
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
tmp=$(mktemp -d)
source bench/sessions/lib.sh
gunzip -c .dev/tracer_base.gz > /tmp/tb && chmod +x /tmp/tb
nvidia-smi --query-gpu=name --format=csv,noheader
echo "jit_cuda: $(timeout 120 $T run tests/gpu/jit_cuda.trace 2>&1 | tail -1 | cut -c1-200)"
for p in "" fuse; do check "ops ops_rows ${p:-no passes}" tests/gpu/ops.trace --entry ops_rows ${p:+--passes $p}; done
TRACER_ROWS_ONLINE=1 check "ops ops_rows fuse all online" tests/gpu/ops.trace --entry ops_rows --passes fuse
TRACER_ROWS_ONLINE=0 check "ops ops_rows fuse two-pass" tests/gpu/ops.trace --entry ops_rows --passes fuse
for size in small wide; do timeout 150 python3 bench/gpt_check.py $T --size $size 2>&1 | tail -2; done
timeout 60 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
G="examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used --bench 1 --device cuda"
n=0
for b in /tmp/tb $T; do
  n=$((n + 1))
  TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 120 $b run $G > /tmp/prof.txt 2>&1
  echo "[$b] $(summ /tmp/prof.txt)"
  [ -n "${OUT:-}" ] && cp /tmp/prof.txt "$OUT/prof$n.txt"
done
grep -E "50304" /tmp/prof.txt | head -6 | cut -c1-200
S="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
for round in 1 2; do
  if [ $round = 2 ]; then
    echo "== the optimizer's variants"
    for v in "" "TRACER_HZ_TREE=1" "TRACER_HZ_MIN_BLOCKS=5" "TRACER_HZ_MIN_BLOCKS=6" "TRACER_HZ_MIN_BLOCKS=8" "TRACER_HZ_TREE=1 TRACER_HZ_MIN_BLOCKS=6" "TRACER_HZ_MAX_MEMBERS=256 TRACER_HZ_TREE=1" ""; do
      echo "[$v] $(env $v timeout 100 $T run bench/optim_step.trace --allow-read examples -- --steps 40 2>&1 | tail -1)"
    done
  fi
  for clip in 0 1.0; do
    timeout 100 python3 bench/train_step_torch.py --runs 20 --clip $clip 2>&1 | tail -1 | cut -c1-330
    for b in $T /tmp/tb "env TRACER_HZ_MAX_MEMBERS=256 TRACER_HZ_TREE=1 $T"; do
      [ $round = 1 ] && [ "${b:0:3}" = env ] && continue
      echo "-- [$b] clip $clip: $(timeout 100 $b run bench/train_phases.trace --allow-read examples $S -- --steps 20 --clip $clip --cuda-graph 1 2>&1 | grep -E "pipelined|error" | cut -c1-120)"
    done
  done
done
