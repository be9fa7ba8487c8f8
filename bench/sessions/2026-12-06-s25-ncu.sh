#!/usr/bin/env bash
# Session 25, not run (no device time was left): ncu's speed of light, warp states and memory
# of the optimizer's one horizontal kernel against bench/probes/adamw_probe.cu's base kernel.
# Carry [".dev"].
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
tmp=$(mktemp -d)
S="--section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats"
timeout 150 ncu --clock-control none -k regex:tr_ --launch-skip 12 --launch-count 2 $S $T run bench/optim_step.trace --allow-read examples -- --steps 14 > $tmp/ncu1.txt 2>&1
(nvcc -O3 -arch=sm_90 -std=c++17 -o /tmp/adamw_probe bench/probes/adamw_probe.cu && timeout 60 /tmp/adamw_probe) 2>&1 | tail -12
timeout 100 ncu --clock-control none -k regex:step --launch-skip 3 --launch-count 1 $S /tmp/adamw_probe > $tmp/ncu2.txt 2>&1
for f in ncu1 ncu2; do
  grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Issued Warp|Executed Ipc A|L2 Hit|L1/TEX Hit|Block Limit Reg" $tmp/$f.txt | sed 's/  */ /g' | cut -c1-150
  [ -n "${OUT:-}" ] && cp $tmp/$f.txt "$OUT/$f.txt"
done
true
