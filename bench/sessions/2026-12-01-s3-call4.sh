#!/usr/bin/env bash
# Session 3 call 4: the GPU test suite after vectorized column kernels and online softmax sums; the
# GPT step (and with checkpoint) and llama_mlp against
# torch.compile in the same call; a gated profile of the GPT step.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== gpu tests"
CUDNN_CHECK=.dev/cudnn_check timeout 340 tests/gpu/run.sh $T > $OUT/gpu_tests.log 2>&1; echo "rc $?"
echo "ok lines: $(grep -c '^ok' $OUT/gpu_tests.log), FAIL lines: $(grep -c '^FAIL' $OUT/gpu_tests.log)"
grep -E "^FAIL|GPU TESTS|worst|within" $OUT/gpu_tests.log | head -14
echo "== gpt"
timeout 40 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors 2>/dev/null | tail -1 | cut -c1-200
row() {  # label, file, args
  local label=$1 f=$2; shift 2
  timeout 100 $T run $f --bench 9 --device cuda --json "$@" > $OUT/r.json 2>$OUT/r.err
  python3 -c "
import json,sys; j=json.load(open(sys.argv[1])); b=j.get('bench',{})
print(sys.argv[2], 'median', round(b.get('median_ms', 0), 3), 'min', round(b.get('min_ms', 0), 3), 'peak', j.get('device_peak_bytes'),
      'est', j.get('estimated_peak_bytes'), 'launches', j.get('kernels_launched'), 'attention', j.get('attention'))" $OUT/r.json "$label" || tail -5 $OUT/r.err
}
row gpt examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used --cuda-graph
row gpt_ckpt examples/gpt.trace --input /tmp/gpt.safetensors --set CHECKPOINT=1 --passes grad,checkpoint,remat,fuse_reorder,del_last_used --cuda-graph
row llama_mlp examples/llama_mlp.trace --passes grad,philox,remat,fuse_reorder,del_last_used --cuda-graph
timeout 100 python3 bench/torch_twins.py gpt compile 2>/dev/null | tail -1 | cut -c1-200
TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=100 timeout 60 $T run examples/gpt.trace --input /tmp/gpt.safetensors --bench 1 --device cuda \
  --passes grad,remat,fuse_reorder,del_last_used > $OUT/tracer_profile.txt 2>&1
grep -A12 "GPU profile" $OUT/tracer_profile.txt | head -13
