#!/usr/bin/env bash
# Issue 14, device call 2: call 1 again after giving the operation graph its handle, with cuDNN's
# error log (level 2) of the runtime checks.
# The runtime check against the CPU (system cuDNN 9.14 and the wheel's 9.19), bench/attention.trace
# on each path against PyTorch's flash and cuDNN backends, the plan cache across two runs, the
# same-data check against PyTorch, and the GPT step with and without cuDNN.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
WHEEL=$(ls /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9 | head -1)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv,noheader
echo "wheel cuDNN: $WHEEL"
echo "== runtime check, system cuDNN"
CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG=$OUT/dnn_system.log timeout 150 .dev/cudnn_check > $OUT/check_system.log 2>&1; echo "rc $?"
grep -v "^ok" $OUT/check_system.log | head -30
echo "== runtime check, wheel cuDNN"
CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG=$OUT/dnn_wheel.log TRACER_CUDNN_LIBRARY=$WHEEL timeout 150 .dev/cudnn_check > $OUT/check_wheel.log 2>&1; echo "rc $?"
grep -v "^ok" $OUT/check_wheel.log | head -40; head -c 3000 $OUT/dnn_wheel.log
row() {  # label, env..., -- args
  local label=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" timeout 150 $T run "$@" --device cuda --json > $OUT/r.json 2>$OUT/r.err
  python3 -c "
import json,sys; j=json.load(open(sys.argv[1])); b=j.get('bench',{}); c=j.get('cudnn',{})
print(sys.argv[2], 'median', round(b.get('median_ms', 0), 3), 'min', round(b.get('min_ms', 0), 3), 'peak', j.get('device_peak_bytes'),
      'est', j.get('estimated_peak_bytes'), 'launches', j.get('kernels_launched'), 'attention', j.get('attention'),
      'cudnn', c.get('version', c.get('missing', '')[:80]), 'plans', c.get('plans_built'), c.get('plans_loaded'), round(c.get('plan_ms', 0)),
      'compile_wall', round(j.get('compile_wall_ms', 0)))" $OUT/r.json "$label" || tail -5 $OUT/r.err
  grep "^warning" $OUT/r.err | head -3
}
echo "== bench/attention.trace"
A="bench/attention.trace --passes grad,del_last_used --bench 10"
row tracer_kernels TRACER_ATTENTION=tracer -- $A
row cudnn_system TRACER_CACHE_DIR=/tmp/trk_sys -- $A
row cudnn_system_again TRACER_CACHE_DIR=/tmp/trk_sys -- $A
row cudnn_wheel TRACER_CUDNN_LIBRARY=$WHEEL TRACER_CACHE_DIR=/tmp/trk_wheel -- $A
row cudnn_wheel_again TRACER_CUDNN_LIBRARY=$WHEEL TRACER_CACHE_DIR=/tmp/trk_wheel -- $A
row cudnn_wheel_graph TRACER_CUDNN_LIBRARY=$WHEEL -- $A --cuda-graph
for m in eager flash cudnn; do timeout 60 python3 bench/torch_twins.py attention $m 2>&1 | tail -1; done
echo "== attention_check (wheel)"
TRACER_CUDNN_LIBRARY=$WHEEL timeout 150 python3 bench/attention_check.py $T 2>&1 | tail -8
echo "== gpt"
timeout 60 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors 2>/dev/null | tail -1
G="examples/gpt.trace --input /tmp/gpt.safetensors --bench 9 --passes grad,remat,fuse_reorder,del_last_used --cuda-graph"
row gpt_tracer_kernels TRACER_ATTENTION=tracer -- $G
row gpt_cudnn_system A=1 -- $G
row gpt_cudnn_wheel TRACER_CUDNN_LIBRARY=$WHEEL -- $G
TRACER_CUDNN_LIBRARY=$WHEEL TRACER_GPU_PROFILE=2 timeout 100 $T run examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse,del_last_used --device cuda --bench 1 > /dev/null 2>$OUT/profile.txt
head -16 $OUT/profile.txt
