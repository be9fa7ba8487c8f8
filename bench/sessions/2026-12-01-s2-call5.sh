#!/usr/bin/env bash
# Issue 14, device call 5 (final): the GPU test suite with operands read in place off (call 4
# found the GPT's gradients wrong with them), the runtime check's probes of layouts the executor
# does not use, and the GPT step on cuDNN against torch.compile in the same call.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== gpu tests"
CUDNN_CHECK=.dev/cudnn_check timeout 300 tests/gpu/run.sh $T > $OUT/gpu_tests.log 2>&1; echo "rc $?"
echo "ok lines: $(grep -c '^ok' $OUT/gpu_tests.log), FAIL lines: $(grep -c '^FAIL' $OUT/gpu_tests.log)"
grep -E "^FAIL|GPU TESTS|cuDNN attention against|gpt_check|PASSED|FAILED" $OUT/gpu_tests.log | head -12
WHEEL=$(ls /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9 | head -1)
TRACER_CUDNN_LIBRARY=$WHEEL .dev/cudnn_check 2>&1 | grep "probe" | cut -c1-150
echo "== gpt"
timeout 40 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors 2>/dev/null | tail -1 | cut -c1-230
timeout 110 python3 bench/torch_twins.py gpt compile 2>/dev/null | tail -1 | cut -c1-230
row() {  # label, env..., -- args
  local label=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" timeout 60 $T run examples/gpt.trace --input /tmp/gpt.safetensors --bench 9 --device cuda --json "$@" > $OUT/r.json 2>$OUT/r.err
  python3 -c "
import json,sys; j=json.load(open(sys.argv[1])); b=j.get('bench',{}); c=j.get('cudnn',{})
print(sys.argv[2], 'median', round(b.get('median_ms', 0), 3), 'min', round(b.get('min_ms', 0), 3), 'peak', j.get('device_peak_bytes'),
      'est', j.get('estimated_peak_bytes'), 'launches', j.get('kernels_launched'), 'attention', j.get('attention'), 'cudnn', c.get('version'))" $OUT/r.json "$label" || tail -5 $OUT/r.err
  grep "^warning" $OUT/r.err | head -2
}
row gpt_cudnn A=1 -- --passes grad,remat,fuse_reorder,del_last_used --cuda-graph
row gpt_tracer_kernels TRACER_ATTENTION=tracer -- --passes grad,remat,fuse_reorder,del_last_used --cuda-graph
row gpt_ckpt_cudnn A=1 -- --set CHECKPOINT=1 --passes grad,checkpoint,remat,fuse_reorder,del_last_used --cuda-graph
TRACER_GPU_PROFILE=1 timeout 60 $T run examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse,del_last_used --device cuda --bench 1 > /dev/null 2>$OUT/profile.txt
head -9 $OUT/profile.txt
