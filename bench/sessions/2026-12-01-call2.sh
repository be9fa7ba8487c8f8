#!/usr/bin/env bash
# Issue 12, device call 2: the GPU tests after the groups (views, fills, column groups), the GPT
# against PyTorch, and the GPT's step at full size with its profile.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv,noheader
echo "== gpu tests"
timeout 330 tests/gpu/run.sh $T > $OUT/gpu_tests.log 2>&1; echo "rc $?"
grep -E "^FAIL|GPU TESTS|gpt_check|^ok .*gpt|^# " $OUT/gpu_tests.log | grep -v "^   " | head -40
echo "== full size"
timeout 100 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors 2>/dev/null | tail -1
for p in grad,remat,fuse,del_last_used; do
  timeout 150 $T run examples/gpt.trace --input /tmp/gpt.safetensors --passes $p --device cuda --bench 5 --json > $OUT/full.json 2>$OUT/full.err
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); b=j.get('bench',{}); print(sys.argv[2], 'median', b.get('median_ms'), 'peak', j.get('device_peak_bytes'), 'est', j.get('estimated_peak_bytes'), 'launches', j.get('kernels_launched'), 'gemms', j.get('gemms'), 'cpu', j.get('cpu_fallbacks'), j.get('fallback_ops'), 'compile_wall', j.get('compile_wall_ms'))" $OUT/full.json $p || tail -5 $OUT/full.err
done
TRACER_GPU_PROFILE=2 timeout 120 $T run examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse,del_last_used --device cuda --bench 1 > /dev/null 2>$OUT/profile.txt
head -42 $OUT/profile.txt
sed -n '/statements by device time/,+25p' $OUT/profile.txt
