#!/usr/bin/env bash
# Session 17 call 2: why the optimizer's horizontal kernels reach 42-45% of DRAM bandwidth
# (call 1, H100): bench/probes/adamw_probe.cu's variants of the update kernel against the copy
# ceiling, then the stall reasons and memory traffic of tracer's first horizontal kernel.
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nvcc -O3 -arch=sm_90 -std=c++17 -o /tmp/adamw_probe bench/probes/adamw_probe.cu && cuobjdump -res-usage /tmp/adamw_probe | grep -E "REG" | sed 's/^ *//' | cut -c1-60
echo "== probe"
/tmp/adamw_probe
echo "== ncu: tracer's horizontal kernel, stalls and memory"
timeout 200 ncu --clock-control none --launch-skip 12 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
  --section MemoryWorkloadAnalysis --section SchedulerStats --section Occupancy \
  $T run bench/optim_step.trace --allow-read examples -- --steps 3 2>&1 | grep -vE "^==PROF==|^    -----|^\s*$" | grep -E "Stall|Warp Cycles|Throughput|Duration|Issued|Eligible|Active Warps|Occupancy|Hit Rate|L2|Mem|Registers|Block Limit" | head -60
