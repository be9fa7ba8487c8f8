#!/usr/bin/env bash
# Session 25 call 1. One-element inputs (the optimizer's f64 coefficients) read once before the
# kernels' loops, as float where only f32 math reads them (codegen/cuda_codegen.cpp): the AdamW
# update's loop lost 9 loads and conversions per 8 elements, 58 -> 56 registers (nvcc here).
# Horizontal kernels: members of the same code share one segment function, their pointers read
# by index from one argument block (__grid_constant__), so GPT-2 small's AdamW update (148
# members, 2 codes) is one kernel that ptxas compiles in 0.1 s (52 registers).
# (1) Correctness: tests/gpu/adamw_torch.py (odd shapes, f32 and bf16, clipping) against PyTorch,
# tests/gpu/jit_cuda.trace. (2) The optimizer step alone: default (one kernel, hoisted) against
# TRACER_HZ_MAX_MEMBERS=64 (three kernels) and TRACER_HOIST_SCALARS=0 (loads in the loop). (3) ncu's
# warp states, speed of light and memory of the update's three kernels against
# bench/probes/adamw_probe.cu's base kernel (2900 GB/s in session 24), the gap not explained yet.
# (4) The GPT's forward and backward profiled statement by statement, kept whole ($OUT/prof.txt).
# (5) Row reductions without keepdim (Thunder's prims) fused as row groups, on cuda against the CPU.
# Carry [".dev"].
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
tmp=$(mktemp -d)
source bench/sessions/lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
copy_ceiling
echo "adamw_torch: $(timeout 120 python3 tests/gpu/adamw_torch.py $T cuda 2>&1 | tail -2 | tr '\n' ' ' | cut -c1-300)"
echo "jit_cuda: $(timeout 120 $T run tests/gpu/jit_cuda.trace 2>&1 | tail -1 | cut -c1-200)"
# Reductions that drop the rows' dimension (Thunder's prims), fused as row groups: GPU against CPU.
for f in fuse_rows_dropped fuse_rows_dropped_nvfusion; do check "$f fuse" tests/pass_checks/$f.trace --passes fuse; done
echo "== the optimizer step (ms a step, 40 steps)"
for v in "" "TRACER_HZ_MAX_MEMBERS=64" "TRACER_HOIST_SCALARS=0" "TRACER_HZ_MAX_MEMBERS=64 TRACER_HOIST_SCALARS=0" "" "TRACER_HZ_MAX_MEMBERS=64"; do
  echo "[$v] $(env $v timeout 100 $T run bench/optim_step.trace --allow-read examples -- --steps 40 2>&1 | tail -1)"
done
echo "== ncu: the update's kernels (step 11), then the probe's base kernel"
S="--section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats"
timeout 150 ncu --clock-control none --launch-skip 12 --launch-count 2 $S $T run bench/optim_step.trace --allow-read examples -- --steps 14 > $tmp/ncu1.txt 2>&1
(nvcc -O3 -arch=sm_90 -std=c++17 -o /tmp/adamw_probe bench/probes/adamw_probe.cu && timeout 60 /tmp/adamw_probe) 2>&1 | tail -12
timeout 100 ncu --clock-control none -k regex:step --launch-skip 3 --launch-count 1 $S /tmp/adamw_probe > $tmp/ncu2.txt 2>&1
for f in ncu1 ncu2; do
  grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Stall|Issued Warp|Executed Ipc A|L2 Hit|L1/TEX Hit|Mem Pipes Busy|Block Limit Reg" $tmp/$f.txt | sed 's/  */ /g' | cut -c1-150
  [ -n "${OUT:-}" ] && cp $tmp/$f.txt "$OUT/$f.txt"
done
timeout 60 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
G="examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used --bench 1 --device cuda"
TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 120 $T run $G > /tmp/prof.txt 2>&1
echo "profile: $(summ /tmp/prof.txt)"
[ -n "${OUT:-}" ] && cp /tmp/prof.txt "$OUT/prof.txt"
true
