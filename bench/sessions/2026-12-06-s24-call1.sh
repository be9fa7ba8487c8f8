#!/usr/bin/env bash
# Session 24 call 1: GPT-2 small's training step on the lent card (an H200 by `status`, the
# issue's device, not lent since session 15): the copy bandwidth, then three rounds of PyTorch's
# step (torch.compile + AdamW fused) interleaved with tracer's, without clipping and with clip
# 1.0, with the online logsumexp (default) and with two passes (TRACER_ROWS_ONLINE=0; on the H200
# of session 6 the online kernel was about 5 % slower). Then the optimizer step's three horizontal
# kernels under ncu (their device time against the 0.75 ms a step measured on the H100) and
# bench/probes/adamw_probe.cu's ceiling on this card. Carry [".dev"].
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
tmp=$(mktemp -d)
source bench/sessions/lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
copy_ceiling
(nvcc -O3 -arch=sm_90 -std=c++17 -o /tmp/adamw_probe bench/probes/adamw_probe.cu && timeout 60 /tmp/adamw_probe) 2>&1 | tail -12
S="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
for round in 1 2; do
  for clip in 0 1.0; do
    timeout 100 python3 bench/train_step_torch.py --runs 20 --clip $clip 2>&1 | tail -1 | cut -c1-330
    for v in "" "TRACER_ROWS_ONLINE=0"; do
      env $v timeout 100 $T run bench/train_phases.trace --allow-read examples $S -- --steps 20 --clip $clip --cuda-graph 1 > $tmp/t.log 2>&1
      echo "-- [$v] clip $clip: $(grep -E "pipelined|error" $tmp/t.log | cut -c1-120)"
      [ $round = 1 ] && [ -z "$v" ] && grep -E "optimizer repeated|compiled" $tmp/t.log | cut -c1-160
    done
  done
done
echo "== ncu: the optimizer's kernels, steps 11-12 (three horizontal kernels a step)"
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active
timeout 200 ncu --clock-control none --launch-skip 30 --launch-count 6 --metrics $M \
  $T run bench/optim_step.trace --allow-read examples -- --steps 14 2>&1 | grep -E "^\s+[a-z_]+__|tr_|optimizer step" | sed 's/  */ /g' | cut -c1-160
timeout 100 $T run bench/optim_step.trace --allow-read examples -- --steps 40 2>&1 | tail -1
