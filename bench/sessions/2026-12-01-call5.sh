#!/usr/bin/env bash
# Issue 12, device call 5 (final): GPU tests; the GPT at full size with and without checkpoint (tracer,
# torch eager and compile); the GPT against PyTorch at a mid size; the profile; llama_mlp.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv,noheader
echo "== gpu tests"
timeout 280 tests/gpu/run.sh $T > $OUT/gpu_tests.log 2>&1; echo "rc $?"
grep -E "^FAIL|GPU TESTS|# all|FAILED" $OUT/gpu_tests.log | head -20
echo "== gpt_check mid"
timeout 120 python3 bench/gpt_check.py $T --size mid --devices cuda 2>&1 | tail -7
echo "== torch"
timeout 60 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors 2>/dev/null | tail -1
timeout 150 python3 bench/torch_twins.py gpt compile 2>/dev/null | tail -1
timeout 60 python3 bench/torch_twins.py gpt eager --checkpoint 2>/dev/null | tail -1
timeout 150 python3 bench/torch_twins.py gpt compile --checkpoint 2>/dev/null | tail -1
echo "== tracer"
row() {  # label, args
  local label=$1; shift
  timeout 120 $T run examples/gpt.trace --input /tmp/gpt.safetensors --device cuda --bench 9 --json "$@" > $OUT/r.json 2>$OUT/r.err
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); b=j.get('bench',{}); print(sys.argv[2], 'median', round(b.get('median_ms', 0), 3), 'min', round(b.get('min_ms', 0), 3), 'peak', j.get('device_peak_bytes'), 'est', j.get('estimated_peak_bytes'), 'launches', j.get('kernels_launched'), 'cpu', j.get('cpu_fallbacks'))" $OUT/r.json "$label" || tail -3 $OUT/r.err
}
row fuse --passes grad,remat,fuse,del_last_used
row fuse_graph --passes grad,remat,fuse,del_last_used --cuda-graph
row reorder_graph --passes grad,remat,fuse_reorder,del_last_used --cuda-graph
row ckpt --set CHECKPOINT=1 --passes grad,checkpoint,remat,fuse,del_last_used
row ckpt_graph --set CHECKPOINT=1 --passes grad,checkpoint,remat,fuse_reorder,del_last_used --cuda-graph
TRACER_GPU_PROFILE=2 timeout 100 $T run examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse,del_last_used --device cuda --bench 1 > /dev/null 2>$OUT/profile.txt
head -24 $OUT/profile.txt
echo "== llama"
timeout 150 $T run examples/llama_mlp.trace --passes grad,philox,remat,fuse_reorder,del_last_used --device cuda --bench 7 --cuda-graph --json > $OUT/llama.json 2>$OUT/llama.err
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); b=j.get('bench',{}); print('llama fuse_reorder graph median', b.get('median_ms'), 'peak', j.get('device_peak_bytes'), 'launches', j.get('kernels_launched'))" $OUT/llama.json || tail -3 $OUT/llama.err
