#!/usr/bin/env bash
# Session 3 call 6 (final build): the new ops entries and the small GPT against the CPU, then the
# GPT step (and with checkpoint), llama_mlp, torch.compile (and with checkpoint) in the same call.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
tmp=$(mktemp -d)
check() {  # label, args...
  local label=$1; shift
  rm -rf $tmp/cpu $tmp/gpu
  $T run "$@" --output $tmp/cpu > $tmp/c.log 2>&1 || { echo "FAIL $label CPU"; tail -3 $tmp/c.log; return; }
  $T run "$@" --device cuda --output $tmp/gpu > $tmp/g.log 2>&1 || { echo "FAIL $label GPU"; tail -3 $tmp/g.log; return; }
  python3 tests/gpu/compare.py $tmp/cpu $tmp/gpu "$label" 2>/dev/null > $tmp/cmp.log
  echo "$(grep -c '^ok' $tmp/cmp.log) ok, $(grep -c '^FAIL' $tmp/cmp.log) FAIL: $label"
  grep "^FAIL" $tmp/cmp.log | head -3
}
for e in ops_rows ops_columns; do check "$e fuse" tests/gpu/ops.trace --entry $e --passes fuse; done
python3 -c "import sys; sys.path.insert(0, 'bench'); import gpt_torch as g; g.save_safetensors(sys.argv[1], g.make_inputs(2, 64, 512, 128, 4, 2, device='cpu'))" $tmp/gpt.safetensors
GPT="examples/gpt.trace --set B=2 --set T=64 --set V=512 --set D=128 --set NH=4 --set L=2 --input $tmp/gpt.safetensors"
check "gpt grad,remat,fuse_reorder,del_last_used" $GPT --passes grad,remat,fuse_reorder,del_last_used
check "gpt CHECKPOINT=1" $GPT --set CHECKPOINT=1 --passes grad,checkpoint,remat,fuse_reorder,del_last_used
timeout 40 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors 2>/dev/null | tail -1 | cut -c1-150
row() {  # label, file, args
  local label=$1 f=$2; shift 2
  timeout 90 $T run $f --bench 9 --device cuda --json "$@" > $OUT/r.json 2>$OUT/r.err
  python3 -c "
import json,sys; j=json.load(open(sys.argv[1])); b=j.get('bench',{})
print(sys.argv[2], 'median', round(b.get('median_ms', 0), 3), 'min', round(b.get('min_ms', 0), 3), 'peak', j.get('device_peak_bytes'), 'est', j.get('estimated_peak_bytes'), 'launches', j.get('kernels_launched'))" $OUT/r.json "$label" || tail -5 $OUT/r.err
}
row gpt examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used --cuda-graph
row gpt examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used --cuda-graph
row gpt_ckpt examples/gpt.trace --input /tmp/gpt.safetensors --set CHECKPOINT=1 --passes grad,checkpoint,remat,fuse_reorder,del_last_used --cuda-graph
timeout 100 python3 bench/torch_twins.py gpt compile 2>/dev/null | tail -1 | cut -c1-170
row llama_mlp examples/llama_mlp.trace --passes grad,philox,remat,fuse_reorder,del_last_used --cuda-graph
timeout 100 python3 bench/torch_twins.py gpt compile --checkpoint 2>/dev/null | tail -1 | cut -c1-170
