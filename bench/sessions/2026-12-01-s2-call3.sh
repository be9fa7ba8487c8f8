#!/usr/bin/env bash
# Issue 14, device call 3: the GPU test suite with cuDNN attention (tests/gpu/run.sh, the runtime
# check included), then the GPT step with q, k and v read in place, and where attention's time goes.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
WHEEL=$(ls /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9 | head -1)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== gpu tests"
CUDNN_CHECK=.dev/cudnn_check timeout 470 tests/gpu/run.sh $T > $OUT/gpu_tests.log 2>&1; echo "rc $?"
grep -c "^ok" $OUT/gpu_tests.log
grep -E "^FAIL|GPU TESTS|cuDNN attention|cudnn, tracer|system cuDNN|TRACER_ATTENTION|no cuDNN" $OUT/gpu_tests.log | head -40
echo "== gpt (views)"
timeout 40 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors 2>/dev/null | tail -1 | cut -c1-120
TRACER_CUDNN_LIBRARY=$WHEEL timeout 60 $T run examples/gpt.trace --input /tmp/gpt.safetensors --bench 9 --passes grad,remat,fuse_reorder,del_last_used --cuda-graph --device cuda --json > $OUT/g.json 2>$OUT/g.err
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('gpt median', j['bench']['median_ms'], 'peak', j['device_peak_bytes'], 'est', j['estimated_peak_bytes'], 'launches', j['kernels_launched'], j['attention'])" $OUT/g.json || tail -5 $OUT/g.err
TRACER_CUDNN_LIBRARY=$WHEEL TRACER_GPU_PROFILE=1 timeout 40 $T run bench/attention.trace --passes grad,del_last_used --device cuda --bench 1 > /dev/null 2>$OUT/aprof.txt; grep "#  " $OUT/aprof.txt | head -8
