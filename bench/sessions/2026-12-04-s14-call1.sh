#!/usr/bin/env bash
# Session 14 call 1: the training step without host waits (staged uploads, the gathers' index
# check read back later, losses and the clipping's norm left on the device): where GPT-2 small's
# step spends its time (bench/train_phases.trace), the example's own tokens/s, PyTorch's step in
# the same call; jit_cuda.trace and the bad-index check for the changed waits.
set -uo pipefail
export T=.dev/tracer tmp=/tmp/s14 TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
mkdir -p $tmp
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
G="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
echo "== jit_cuda.trace"
timeout 120 $T run tests/gpu/jit_cuda.trace 2>&1 | tail -3
echo "== bad index (reported, eagerly and under --cuda-graph)"
printf 'def f(t: f32[8, 4], i: i64[64]):\n    return prims.take(t, i + 8, 0)\n' >"$tmp/bad_index.trace"
for extra in "" "--cuda-graph"; do
  timeout 60 $T run "$tmp/bad_index.trace" --device cuda $extra > $tmp/bad.log 2>&1; echo "rc=$? $(grep -o 'index -*[0-9]* is out of range for 8 rows' $tmp/bad.log | head -1)"
done
echo "== train_phases, default passes, clip 1.0"
timeout 200 $T run bench/train_phases.trace --allow-read examples $G -- --steps 20 --clip 1.0 2>&1 | tail -6
echo "== train_phases, clip 0"
timeout 120 $T run bench/train_phases.trace --allow-read examples $G -- --steps 20 --clip 0 2>&1 | tail -6
echo "== train_phases, clip 0, passes grad,fuse,del_last_used (the example's before)"
timeout 200 $T run bench/train_phases.trace --allow-read examples $G -- --steps 20 --clip 0 --passes grad,fuse,del_last_used 2>&1 | tail -6
echo "== train_gpt GPT-2 small, 30 steps"
timeout 200 $T run examples/train_gpt.trace --device cuda $G -- --steps 30 --log 10 2>&1 | tail -5
echo "== torch"
timeout 240 python3 bench/train_step_torch.py --runs 20 2>&1 | tail -3
