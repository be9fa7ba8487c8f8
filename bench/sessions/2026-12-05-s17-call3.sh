#!/usr/bin/env bash
# Session 17 call 3: call 2 showed the update kernel reaching the copy ceiling in
# bench/probes/adamw_probe.cu (2843 GB/s on an H100) while tracer's horizontal kernel of the same
# arithmetic gets 1.41 TB/s. The same counters for both: DRAM bytes (over-fetch?), instructions
# (a scalar path?), and stall reasons.
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
M=dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum,gpu__time_duration.sum,launch__grid_size,\
l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,\
smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_drain_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_imc_miss_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio
nvcc -O3 -arch=sm_90 -std=c++17 -o /tmp/adamw_probe bench/probes/adamw_probe.cu
echo "== probe base (one tensor)"
timeout 120 ncu --clock-control none -k regex:step --launch-count 1 --metrics $M /tmp/adamw_probe 2>&1 | grep -E "^\s+[a-z_]+__" | sed 's/  */ /g'
echo "== tracer's first horizontal kernel"
timeout 200 ncu --clock-control none --launch-skip 12 --launch-count 1 --metrics $M \
  $T run bench/optim_step.trace --allow-read examples -- --steps 3 2>&1 | grep -E "^\s+[a-z_]+__|tr_" | sed 's/  */ /g' | cut -c1-160
