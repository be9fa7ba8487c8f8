#!/usr/bin/env bash
# Session 4 call 4: cuDNN writing dq, dk, dv into the qkv gradient's cat (TRACER_ATTENTION_CAT),
# bias-gradient sums joined to column kernels (fuse_reorder), tuning kept. Checks against the CPU
# (T=128 so that cuDNN 9.14 runs the backward) and PyTorch's float32 math; then the GPT step,
# with the cat path off for comparison, torch.compile in the same call; a gated profile.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
tmp=$(mktemp -d)
fail=0
check() {  # label, args...
  local label=$1; shift
  rm -rf $tmp/cpu $tmp/gpu
  $T run "$@" --output $tmp/cpu > $tmp/c.log 2>&1 || { echo "FAIL $label CPU"; tail -3 $tmp/c.log; fail=1; return; }
  $T run "$@" --device cuda --json --output $tmp/gpu > $tmp/g.log 2>&1 || { echo "FAIL $label GPU"; tail -3 $tmp/g.log; fail=1; return; }
  python3 tests/gpu/compare.py $tmp/cpu $tmp/gpu "$label" > $tmp/cmp.log || fail=1
  echo "$(grep -c '^ok' $tmp/cmp.log) ok, $(grep -c '^FAIL' $tmp/cmp.log) FAIL: $label; $(grep -o '"cats_written_in_place": [0-9]*' $tmp/g.log)"
  grep "^FAIL" $tmp/cmp.log | head -3
}
python3 -c "import sys; sys.path.insert(0, 'bench'); import gpt_torch as g; g.save_safetensors(sys.argv[1], g.make_inputs(2, 128, 512, 128, 4, 2, device='cpu'))" $tmp/gpt.safetensors
GPT="examples/gpt.trace --set B=2 --set T=128 --set V=512 --set D=128 --set NH=4 --set L=2 --input $tmp/gpt.safetensors"
for p in grad,remat,fuse,del_last_used grad,remat,fuse_reorder,del_last_used; do check "gpt T=128 $p" $GPT --passes $p; done
check "gpt T=128 CHECKPOINT=1" $GPT --set CHECKPOINT=1 --passes grad,checkpoint,remat,fuse_reorder,del_last_used
check "gpt T=128 --cuda-graph" $GPT --passes grad,remat,fuse_reorder,del_last_used --cuda-graph
timeout 120 python3 bench/gpt_check.py $T --size small 2>&1 | tail -12 | cut -c1-150
echo "checks: $([ $fail = 0 ] && echo PASSED || echo FAILED)"
timeout 40 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
row() {  # label, env, file, args
  local label=$1 e=$2 f=$3; shift 3
  env $e timeout 100 $T run $f --bench 9 --device cuda --json "$@" > $OUT/r.json 2>$OUT/r.err
  python3 -c "
import json,sys; j=json.load(open(sys.argv[1])); b=j.get('bench',{})
print(sys.argv[2], 'median', round(b.get('median_ms', 0), 3), 'min', round(b.get('min_ms', 0), 3), 'peak', j.get('device_peak_bytes'), 'est', j.get('estimated_peak_bytes'), 'launches', j.get('kernels_launched'), 'attention', j.get('attention'))" $OUT/r.json "$label" || tail -5 $OUT/r.err
}
G="examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used --cuda-graph"
for rep in 1 2; do row "gpt" X=1 $G; row "gpt cat off" TRACER_ATTENTION_CAT=0 $G; done
timeout 100 python3 bench/torch_twins.py gpt compile 2>/dev/null | tail -1 | cut -c1-170
row "gpt" X=1 $G
row "gpt_ckpt" X=1 examples/gpt.trace --input /tmp/gpt.safetensors --set CHECKPOINT=1 --passes grad,checkpoint,remat,fuse_reorder,del_last_used --cuda-graph
timeout 100 python3 bench/torch_twins.py gpt compile --checkpoint 2>/dev/null | tail -1 | cut -c1-170
row "llama_mlp" X=1 examples/llama_mlp.trace --passes grad,philox,remat,fuse_reorder,del_last_used --cuda-graph
TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=40 timeout 60 $T run examples/gpt.trace --input /tmp/gpt.safetensors --bench 1 --device cuda \
  --passes grad,remat,fuse_reorder,del_last_used > $OUT/tracer_profile.txt 2>&1
grep -A16 "GPU profile" $OUT/tracer_profile.txt | cut -c1-150
