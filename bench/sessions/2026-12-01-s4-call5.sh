#!/usr/bin/env bash
# Session 4 call 5 (final build): remat's ties to later values; checks against the CPU (T=128:
# cuDNN 9.14 runs the backward) and PyTorch's float32 math, then the table: the GPT step (and
# with checkpoint), llama_mlp, PyTorch eager and torch.compile (and with checkpoint) in the same
# call; a gated profile's summary.
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
  $T run "$@" --device cuda --output $tmp/gpu > $tmp/g.log 2>&1 || { echo "FAIL $label GPU"; tail -3 $tmp/g.log; fail=1; return; }
  python3 tests/gpu/compare.py $tmp/cpu $tmp/gpu "$label" > $tmp/cmp.log || fail=1
  echo "$(grep -c '^ok' $tmp/cmp.log) ok, $(grep -c '^FAIL' $tmp/cmp.log) FAIL: $label"
  grep "^FAIL" $tmp/cmp.log | head -3
}
python3 -c "import sys; sys.path.insert(0, 'bench'); import gpt_torch as g; g.save_safetensors(sys.argv[1], g.make_inputs(2, 128, 512, 128, 4, 2, device='cpu'))" $tmp/gpt.safetensors
GPT="examples/gpt.trace --set B=2 --set T=128 --set V=512 --set D=128 --set NH=4 --set L=2 --input $tmp/gpt.safetensors"
for p in grad,remat,fuse,del_last_used grad,remat,fuse_reorder,del_last_used; do check "gpt T=128 $p" $GPT --passes $p; done
check "gpt T=128 CHECKPOINT=1" $GPT --set CHECKPOINT=1 --passes grad,checkpoint,remat,fuse_reorder,del_last_used
check "ops_column_views fuse" tests/gpu/ops.trace --entry ops_column_views --passes fuse
timeout 120 python3 bench/gpt_check.py $T --size small 2>&1 | tail -11 | cut -c1-110
echo "checks: $([ $fail = 0 ] && echo PASSED || echo FAILED)"
timeout 40 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors 2>/dev/null | tail -1 | cut -c1-150
row() {  # label, file, args
  local label=$1 f=$2; shift 2
  timeout 100 $T run $f --bench 9 --device cuda --json "$@" > $OUT/r.json 2>$OUT/r.err
  python3 -c "
import json,sys; j=json.load(open(sys.argv[1])); b=j.get('bench',{})
print(sys.argv[2], 'median', round(b.get('median_ms', 0), 3), 'min', round(b.get('min_ms', 0), 3), 'peak', j.get('device_peak_bytes'), 'est', j.get('estimated_peak_bytes'), 'launches', j.get('kernels_launched'))" $OUT/r.json "$label" || tail -5 $OUT/r.err
}
G="examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used --cuda-graph"
row gpt $G
row gpt $G
timeout 100 python3 bench/torch_twins.py gpt compile 2>/dev/null | tail -1 | cut -c1-170
row gpt $G
row gpt_ckpt examples/gpt.trace --input /tmp/gpt.safetensors --set CHECKPOINT=1 --passes grad,checkpoint,remat,fuse_reorder,del_last_used --cuda-graph
timeout 100 python3 bench/torch_twins.py gpt compile --checkpoint 2>/dev/null | tail -1 | cut -c1-170
row llama_mlp examples/llama_mlp.trace --passes grad,philox,remat,fuse_reorder,del_last_used --cuda-graph
TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=30 timeout 60 $T run examples/gpt.trace --input /tmp/gpt.safetensors --bench 1 --device cuda \
  --passes grad,remat,fuse_reorder,del_last_used > $OUT/tracer_profile.txt 2>&1
grep -A14 "GPU profile" $OUT/tracer_profile.txt | cut -c1-120
