#!/usr/bin/env bash
# Session 4 call 6 (the budget's last minutes): take_backward's empty rows as vector zero fills
# over fewer blocks. The gathers and the small GPT against the CPU, then the GPT step and
# torch.compile in the same call, and take_backward's time in a gated profile.
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
  python3 tests/gpu/compare.py $tmp/cpu $tmp/gpu "$label" > $tmp/cmp.log
  echo "$(grep -c '^ok' $tmp/cmp.log) ok, $(grep -c '^FAIL' $tmp/cmp.log) FAIL: $label"
  grep "^FAIL" $tmp/cmp.log | head -3
}
for p in "" fuse; do check "ops_gather $p" tests/gpu/ops.trace --entry ops_gather ${p:+--passes $p}; done
python3 -c "import sys; sys.path.insert(0, 'bench'); import gpt_torch as g; g.save_safetensors(sys.argv[1], g.make_inputs(2, 128, 512, 128, 4, 2, device='cpu'))" $tmp/gpt.safetensors
check "gpt T=128" examples/gpt.trace --set B=2 --set T=128 --set V=512 --set D=128 --set NH=4 --set L=2 --input $tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used
timeout 40 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
row() {
  timeout 60 $T run examples/gpt.trace --input /tmp/gpt.safetensors --bench 9 --device cuda --json --passes grad,remat,fuse_reorder,del_last_used --cuda-graph > $OUT/r.json 2>$OUT/r.err
  python3 -c "
import json,sys; j=json.load(open(sys.argv[1])); b=j.get('bench',{})
print('gpt median', round(b.get('median_ms', 0), 3), 'min', round(b.get('min_ms', 0), 3), 'peak', j.get('device_peak_bytes'), 'launches', j.get('kernels_launched'))" $OUT/r.json || tail -5 $OUT/r.err
}
row; row
timeout 100 python3 bench/torch_twins.py gpt compile 2>/dev/null | tail -1 | cut -c1-120
TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 40 $T run examples/gpt.trace --input /tmp/gpt.safetensors --bench 1 --device cuda \
  --passes grad,remat,fuse_reorder,del_last_used > $OUT/tracer_profile.txt 2>&1
grep -E "GPU profile|take_backward" $OUT/tracer_profile.txt | head -4
