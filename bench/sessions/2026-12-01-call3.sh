#!/usr/bin/env bash
# Issue 12, device call 3: GPU tests, the GPT at full size (tracer, torch eager and compile), the
# profile, and llama_mlp (not slower than before).
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv,noheader
echo "== gpu tests"
timeout 300 tests/gpu/run.sh $T > $OUT/gpu_tests.log 2>&1; echo "rc $?"
grep -E "^FAIL|GPU TESTS|# all|FAILED|TRACER_GPU_CHECK" $OUT/gpu_tests.log | head -30
echo "== full size"
timeout 100 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors 2>/dev/null | tail -1
timeout 200 python3 bench/torch_twins.py gpt compile 2>/dev/null | tail -1
for p in grad,remat,fuse,del_last_used grad,remat,fuse_reorder,del_last_used; do
  for g in "" "--cuda-graph"; do
  timeout 150 $T run examples/gpt.trace --input /tmp/gpt.safetensors --passes $p --device cuda --bench 7 $g --json > $OUT/full.json 2>$OUT/full.err
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); b=j.get('bench',{}); print(sys.argv[2], sys.argv[3], 'median', b.get('median_ms'), 'peak', j.get('device_peak_bytes'), 'est', j.get('estimated_peak_bytes'), 'launches', j.get('kernels_launched'), 'gemms', j.get('gemms'), 'cpu', j.get('cpu_fallbacks'), 'compile_wall', j.get('compile_wall_ms'))" $OUT/full.json $p "$g" || tail -5 $OUT/full.err
  done
done
TRACER_GPU_PROFILE=2 timeout 120 $T run examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse,del_last_used --device cuda --bench 1 > /dev/null 2>$OUT/profile.txt
head -30 $OUT/profile.txt
sed -n '/statements by device time/,+22p' $OUT/profile.txt
echo "== llama"
timeout 200 $T run examples/llama_mlp.trace --passes grad,philox,remat,fuse_reorder,del_last_used --device cuda --bench 7 --json > $OUT/llama.json 2>$OUT/llama.err
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); b=j.get('bench',{}); print('llama fuse_reorder median', b.get('median_ms'), 'peak', j.get('device_peak_bytes'), 'launches', j.get('kernels_launched'))" $OUT/llama.json || tail -3 $OUT/llama.err
