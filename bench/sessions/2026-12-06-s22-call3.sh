#!/usr/bin/env bash
# Session 22 call 3: value_and_grad(cuda_graph=True) and the horizontal column kernels (fuse
# splitting only past four reductions). jit_cuda.trace (a CUDA-graph training loop bitwise equal
# to the eager one; the reductions and step_clipped against the CPU), then GPT-2 small's step:
# the binary before this session (.dev/tracer_old, dd3c0ba) and after (.dev/tracer), with and
# without --cuda-graph, interleaved with PyTorch's step in the same call. Carry [".dev"].
set -uo pipefail
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
[ -x .dev/tracer_old ] || { gunzip -c .dev/tracer_old.gz > .dev/tracer_old && chmod +x .dev/tracer_old; }
S="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
echo "== jit_cuda.trace (new): $(timeout 150 .dev/tracer run tests/gpu/jit_cuda.trace 2>&1 | tail -2 | cut -c1-400)"
for round in 1 2; do
  for clip in 0 1.0; do
    timeout 100 python3 bench/train_step_torch.py --runs 20 --clip $clip 2>&1 | tail -1 | cut -c1-150
    for v in "tracer_old 0" "tracer 0" "tracer 1"; do
      set -- $v
      echo "-- $1 clip $clip cuda-graph $2"
      extra=""; [ "$2" = 1 ] && extra="--cuda-graph 1"
      timeout 100 .dev/$1 run bench/train_phases.trace --allow-read examples $S -- --steps 20 --clip $clip $extra 2>&1 | grep -E "train_phases|pipelined|each phase|repeated|error" | cut -c1-200
    done
  done
done
