#!/usr/bin/env bash
# Session 21 call 2: the optimizer and GPT-2 small's step timed with synchronize() (train_phases'
# "optimizer repeated" had timed the value_and_grad before it), the synchronize GPU test, the
# forward and backward against torch.compile, and both profiles. Carry [".dev"].
set -uo pipefail
export T=.dev/tracer tmp=/tmp/s21 TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
mkdir -p $tmp
source bench/sessions/lib.sh
S="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
copy_ceiling
echo "== tests/gpu/jit_cuda.trace"; timeout 120 $T run tests/gpu/jit_cuda.trace 2>&1 | tail -2
echo "== optimizer alone"; timeout 60 $T run bench/optim_step.trace --allow-read examples -- --steps 100 2>&1 | tail -1
echo "== step, 2 rounds"
for r in 1 2; do for clip in 0 1.0; do
  timeout 120 python3 bench/train_step_torch.py --runs 20 --clip $clip 2>&1 | tail -1
  timeout 120 $T run bench/train_phases.trace --allow-read examples $S -- --steps 20 --clip $clip 2>&1 | grep -E "pipelined|host time|each phase|repeated"
done; done
echo "== forward and backward against torch.compile"
timeout 200 python3 bench/ab_gpt.py $T --rounds 2 --runs 15 --profile $OUT 2>&1 | tail -5
echo "== tracer's profile of the forward and backward"
timeout 60 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 90 $T run examples/gpt.trace --input /tmp/gpt.safetensors \
  --passes grad,remat,fuse_reorder,del_last_used --bench 1 --device cuda > $OUT/prof.txt 2>&1
grep -A14 "GPU profile" $OUT/prof.txt | head -16
echo "== tests/thunder/dtensor_tp_prims.txt on cuda against the CPU (rank 1 of 2)"
check dtensor_tp tests/thunder/dtensor_tp_prims.txt --world-size 2 --rank 1 --type l_x_=f32[4,6] --type l_w1_=f32[4,6] \
  --type l_b1_=f32[4] --type l_w2_=f32[5,4] --type l_s_=f32[5]
