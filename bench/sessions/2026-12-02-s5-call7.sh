#!/usr/bin/env bash
# Session 5 call 7 (last minutes of the budget): the default build with long rows read from
# memory (no shared copies): the row tests and the small GPT (T=128) against the CPU, the GPT
# checked against PyTorch's float32 math, and the GPT step twice.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
tmp=$(mktemp -d)
check() {
  local label=$1; shift
  rm -rf $tmp/cpu $tmp/gpu
  $T run "$@" --output $tmp/cpu > $tmp/c.log 2>&1 || { echo "FAIL $label CPU"; return; }
  $T run "$@" --device cuda --output $tmp/gpu > $tmp/g.log 2>&1 || { echo "FAIL $label GPU"; tail -3 $tmp/g.log; return; }
  python3 tests/gpu/compare.py $tmp/cpu $tmp/gpu "$label" > $tmp/cmp.log 2>/dev/null
  echo "$(grep -c '^ok' $tmp/cmp.log) ok, $(grep -c '^FAIL' $tmp/cmp.log) FAIL: $label"
}
for p in "" fuse; do check "ops_rows $p" tests/gpu/ops.trace --entry ops_rows ${p:+--passes $p}; done
python3 -c "import sys; sys.path.insert(0, 'bench'); import gpt_torch as g; g.save_safetensors(sys.argv[1], g.make_inputs(2, 128, 512, 128, 4, 2, device='cpu'))" $tmp/gpt.safetensors
for p in grad,remat,fuse,del_last_used grad,remat,fuse_reorder,del_last_used; do
  check "gpt T=128 $p" examples/gpt.trace --set B=2 --set T=128 --set V=512 --set D=128 --set NH=4 --set L=2 --input $tmp/gpt.safetensors --passes $p
done
timeout 90 python3 bench/gpt_check.py $T --size small 2>&1 | tail -1
timeout 40 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
for k in 1 2; do
  timeout 60 $T run examples/gpt.trace --input /tmp/gpt.safetensors --bench 9 --device cuda --json --passes grad,remat,fuse_reorder,del_last_used --cuda-graph > $OUT/r.json 2>$OUT/r.err
  python3 -c "
import json,sys; j=json.load(open(sys.argv[1])); b=j.get('bench',{})
print('gpt median', round(b.get('median_ms', 0), 3), 'min', round(b.get('min_ms', 0), 3), 'peak', j.get('device_peak_bytes'), 'launches', j.get('kernels_launched'))" $OUT/r.json || tail -3 $OUT/r.err
done
