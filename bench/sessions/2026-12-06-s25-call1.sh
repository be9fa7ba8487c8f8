#!/usr/bin/env bash
# Session 25 call 1 (one call: device starts failed for an hour). (a) One-element inputs (the
# optimizer's f64 coefficients) read once before the kernels' loops, as float where only f32 math
# reads them; (b) horizontal kernels whose members of the same code share one segment function,
# pointers read by index from one __grid_constant__ argument block: GPT-2 small's AdamW update is
# one kernel (148 members, 2 codes, 52 registers); (c) fuse's row groups for reductions without
# keepdim (Thunder's prims).
# 1. Correctness: tests/gpu/adamw_torch.py (odd shapes, f32 and bf16, clipping) against PyTorch;
#    tests/gpu/jit_cuda.trace; the rows rewrite's pass checks on cuda against the CPU.
# 2. The optimizer step alone: default against TRACER_HZ_MAX_MEMBERS=64 (three kernels) and with
#    TRACER_HOIST_SCALARS=0 too (loads in the loop, as session 24's kernels).
# 3. The GPT's forward and backward profiled statement by statement, kept whole ($OUT/prof.txt).
# 4. GPT-2 small's step, two rounds, PyTorch (torch.compile, AdamW fused) interleaved with this
#    build and with TRACER_HZ_MAX_MEMBERS=64 TRACER_HOIST_SCALARS=0, clip 0 and 1.0.
# Carry [".dev"].
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
tmp=$(mktemp -d)
source bench/sessions/lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
copy_ceiling
timeout 120 python3 tests/gpu/adamw_torch.py $T cuda 2>&1 | tail -3 | cut -c1-250
echo "jit_cuda: $(timeout 120 $T run tests/gpu/jit_cuda.trace 2>&1 | tail -1 | cut -c1-200)"
for f in fuse_rows_dropped fuse_rows_dropped_nvfusion; do check "$f fuse" tests/pass_checks/$f.trace --passes fuse; done
echo "== the optimizer step (ms a step, 40 steps)"
for v in "" "TRACER_HZ_MAX_MEMBERS=64" "TRACER_HZ_MAX_MEMBERS=64 TRACER_HOIST_SCALARS=0" ""; do
  echo "[$v] $(env $v timeout 100 $T run bench/optim_step.trace --allow-read examples -- --steps 40 2>&1 | tail -1)"
done
timeout 60 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
G="examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used --bench 1 --device cuda"
TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 120 $T run $G > /tmp/prof.txt 2>&1
echo "profile: $(summ /tmp/prof.txt)"
[ -n "${OUT:-}" ] && cp /tmp/prof.txt "$OUT/prof.txt"
S="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
for round in 1 2; do
  for clip in 0 1.0; do
    timeout 100 python3 bench/train_step_torch.py --runs 20 --clip $clip 2>&1 | tail -1 | cut -c1-330
    for v in "" "TRACER_HZ_MAX_MEMBERS=64 TRACER_HOIST_SCALARS=0"; do
      echo "-- [$v] clip $clip: $(env $v timeout 100 $T run bench/train_phases.trace --allow-read examples $S -- --steps 20 --clip $clip --cuda-graph 1 2>&1 | grep -E "pipelined|error" | cut -c1-120)"
    done
  done
done
