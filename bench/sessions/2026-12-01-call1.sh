#!/usr/bin/env bash
# Issue 12, device call 1: find the wrong-gradient bug (TRACER_GPU_CHECK) and take the GPT's
# starting numbers. Run from the repository root on the GPU machine with the stripped binary
# in .dev/tracer.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv,noheader
TINY="--set B=2 --set T=32 --set V=256 --set D=64 --set NH=4 --set L=2"
MID="--set B=4 --set T=256 --set V=4096 --set D=256 --set NH=8 --set L=2"
echo "== check=2 tiny, grad,remat,fuse,del_last_used"
TRACER_GPU_CHECK=2 $T run examples/gpt.trace $TINY --passes grad,remat,fuse,del_last_used --device cuda 2>&1 | grep -v "^grad_\|^loss" | head -40
echo "== check=1 mid, grad,remat,fuse,del_last_used"
TRACER_GPU_CHECK=1 $T run examples/gpt.trace $MID --passes grad,remat,fuse,del_last_used --device cuda 2>&1 | grep -v "^grad_\|^loss" | head -30
echo "== check=1 mid, grad,fuse,del_last_used"
TRACER_GPU_CHECK=1 $T run examples/gpt.trace $MID --passes grad,fuse,del_last_used --device cuda 2>&1 | grep -v "^grad_\|^loss" | head -10
echo "== gpt_check small (cuda)"
timeout 240 python3 bench/gpt_check.py $T --size small --devices cuda 2>&1 | tail -12
echo "== full size: torch eager, tracer (write the data first)"
timeout 120 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors 2>&1 | tail -2
for p in grad,remat,fuse,del_last_used grad,remat,fuse_reorder,del_last_used; do
  timeout 180 $T run examples/gpt.trace --input /tmp/gpt.safetensors --passes $p --device cuda --bench 5 --json > $OUT/full_$p.json 2>$OUT/full_$p.err
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); b=j.get('bench',{}); print(sys.argv[2], 'median', b.get('median_ms'), 'peak', j.get('device_peak_bytes'), 'est', j.get('estimated_peak_bytes'), 'launches', j.get('kernels_launched'), 'gemms', j.get('gemms'), 'cpu', j.get('cpu_fallbacks'), j.get('fallback_ops'))" $OUT/full_$p.json $p || tail -5 $OUT/full_$p.err
done
echo "== profile"
TRACER_GPU_PROFILE=2 timeout 180 $T run examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse,del_last_used --device cuda --bench 1 > /dev/null 2>$OUT/profile.txt
head -45 $OUT/profile.txt
