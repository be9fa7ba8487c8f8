#!/usr/bin/env bash
# Issue 14, device call 4: the GPU test suite on the final build (tests/gpu/run.sh with the
# runtime check, mixed layouts included), cuDNN's plans across two runs, bench/attention.trace on
# each path against PyTorch's backends, and the GPT against PyTorch's float32 math (mid size).
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
WHEEL=$(ls /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9 | head -1)
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
echo "== gpu tests"
CUDNN_CHECK=.dev/cudnn_check timeout 330 tests/gpu/run.sh $T > $OUT/gpu_tests.log 2>&1; echo "rc $?"
echo "ok lines: $(grep -c '^ok' $OUT/gpu_tests.log)"
grep -E "^FAIL|GPU TESTS|cuDNN attention against" $OUT/gpu_tests.log | head -20
TRACER_CUDNN_LIBRARY=$WHEEL .dev/cudnn_check 2>&1 | grep -E "d=24|mixv|plans kept" | cut -c1-160
row() {  # label, env..., -- args
  local label=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" timeout 120 $T run "$@" --device cuda --json > $OUT/r.json 2>$OUT/r.err
  python3 -c "
import json,sys; j=json.load(open(sys.argv[1])); b=j.get('bench',{}); c=j.get('cudnn',{})
print(sys.argv[2], 'median', round(b.get('median_ms', 0), 3), 'min', round(b.get('min_ms', 0), 3), 'peak', j.get('device_peak_bytes'),
      'est', j.get('estimated_peak_bytes'), 'launches', j.get('kernels_launched'), 'attention', j.get('attention'),
      'cudnn', c.get('version', c.get('missing', '')[:60]), 'plans built/loaded/ms', c.get('plans_built'), c.get('plans_loaded'), round(c.get('plan_ms', 0)),
      'compile_wall', round(j.get('compile_wall_ms', 0)), 'first_run_ms', round(j.get('run_ms', 0)))" $OUT/r.json "$label" || tail -5 $OUT/r.err
  grep "^warning" $OUT/r.err | head -2
}
echo "== plans across runs, and bench/attention.trace"
A="bench/attention.trace --passes grad,del_last_used --bench 10"
row cudnn_system_first TRACER_CACHE_DIR=/tmp/p_sys -- $A
row cudnn_system_second TRACER_CACHE_DIR=/tmp/p_sys -- $A
row cudnn_wheel_first TRACER_CUDNN_LIBRARY=$WHEEL TRACER_CACHE_DIR=/tmp/p_wheel -- $A
row cudnn_wheel_second TRACER_CUDNN_LIBRARY=$WHEEL TRACER_CACHE_DIR=/tmp/p_wheel -- $A
row cudnn_system_graph TRACER_CACHE_DIR=/tmp/p_sys -- $A --cuda-graph
row tracer_kernels TRACER_ATTENTION=tracer -- $A
for c in 1 2; do row cudnn_config_$c TRACER_CUDNN_CONFIG=$c TRACER_CACHE_DIR=/tmp/p_cfg$c -- $A; done
for m in eager flash cudnn; do timeout 60 python3 bench/torch_twins.py attention $m 2>&1 | tail -1 | cut -c1-160; done
TRACER_GPU_PROFILE=1 timeout 40 $T run bench/attention.trace --passes grad,del_last_used --device cuda --bench 1 > /dev/null 2>$OUT/aprof.txt; grep "#  " $OUT/aprof.txt | head -4
echo "== gpt_check mid (cuda, system cuDNN)"
timeout 150 python3 bench/gpt_check.py $T --size mid --devices cuda 2>&1 | tail -7
