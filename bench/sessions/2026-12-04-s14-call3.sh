#!/usr/bin/env bash
# Session 14 call 3: fuse no longer cuts long runs at 64 statements whatever comes next (an
# optimizer's updates were split in two kernels with f32 intermediates: 44 of 143 fusions), and
# AdamW's scalars all come in with its coefficients: GPT-2 small's optimizer is 99 independent
# fusions, run as horizontal kernels. The step against PyTorch in the same call; jit_cuda.trace;
# then tests/gpu/run.sh (every example on the GPU against the CPU: fuse changed).
set -uo pipefail
export T=.dev/tracer tmp=/tmp/s14 TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
mkdir -p $tmp
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
G="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
echo "== jit_cuda.trace"
timeout 150 $T run tests/gpu/jit_cuda.trace 2>&1 | tail -3
for clip in 0 1.0; do
  echo "== train_phases clip $clip"
  timeout 200 $T run bench/train_phases.trace --allow-read examples $G -- --steps 20 --clip $clip 2>&1 | tail -5
done
echo "== train_phases clip 0, TRACER_HORIZONTAL=0"
TRACER_HORIZONTAL=0 timeout 200 $T run bench/train_phases.trace --allow-read examples $G -- --steps 20 --clip 0 2>&1 | tail -5
echo "== torch, clip 0 and 1.0"
timeout 240 python3 bench/train_step_torch.py --runs 20 2>&1 | tail -1
timeout 240 python3 bench/train_step_torch.py --runs 20 --clip 1.0 2>&1 | tail -1
echo "== train_phases clip 0 again (repeatability)"
timeout 200 $T run bench/train_phases.trace --allow-read examples $G -- --steps 20 --clip 0 2>&1 | tail -4
echo "== host profile, optimizer executor"
TRACER_GPU_PROFILE=host timeout 200 $T run bench/train_phases.trace --allow-read examples $G -- --steps 20 --clip 0 2>&1 | grep -A12 "^# host time" | tail -26
echo "== tests/gpu/run.sh"
timeout 420 bash tests/gpu/run.sh $T > $tmp/run.log 2>&1
echo "run.sh rc=$? ok=$(grep -c '^ok' $tmp/run.log) FAIL=$(grep -c 'FAIL' $tmp/run.log)"
grep "FAIL" $tmp/run.log | head -30 | cut -c1-220
tail -3 $tmp/run.log | cut -c1-220
