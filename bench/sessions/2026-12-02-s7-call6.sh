#!/usr/bin/env bash
# Session 7 call 6: fuse_reorder's sideways move guarded (no rise of the estimated peak, no split
# run): llama_mlp and the small GPT against the CPU, llama_mlp's step, and the GPT's step
# interleaved with torch.compile.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
start=$(date +%s)
tmp=$(mktemp -d)
check() {
  local label=$1; shift
  rm -rf $tmp/cpu $tmp/gpu
  $T run "$@" --output $tmp/cpu > $tmp/c.log 2>&1 || { echo "FAIL $label CPU"; tail -3 $tmp/c.log; return; }
  $T run "$@" --device cuda --output $tmp/gpu > $tmp/g.log 2>&1 || { echo "FAIL $label GPU"; tail -3 $tmp/g.log; return; }
  python3 tests/gpu/compare.py $tmp/cpu $tmp/gpu "$label" > $tmp/cmp.log 2>/dev/null
  echo "$(grep -c '^ok' $tmp/cmp.log) ok, $(grep -c '^FAIL' $tmp/cmp.log) FAIL: $label"; grep '^FAIL' $tmp/cmp.log | head -3 | cut -c1-160
}
check "llama_mlp fuse_reorder" examples/llama_mlp.trace --set T=64 --set D=128 --set H=256 --set L=2 --passes grad,philox,remat,fuse_reorder,del_last_used
python3 -c "import sys; sys.path.insert(0, 'bench'); import gpt_torch as g; g.save_safetensors(sys.argv[1], g.make_inputs(2, 128, 512, 128, 4, 2, device='cpu'))" $tmp/gpt.safetensors
check "gpt T=128 fuse_reorder" examples/gpt.trace --set B=2 --set T=128 --set V=512 --set D=128 --set NH=4 --set L=2 --input $tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used
timeout 80 $T run examples/llama_mlp.trace --bench 9 --device cuda --json --passes grad,philox,remat,fuse_reorder,del_last_used --cuda-graph > $tmp/r.json 2>$tmp/r.err
python3 -c "
import json,sys; j=json.load(open(sys.argv[1])); b=j.get('bench',{})
print('llama_mlp median', round(b.get('median_ms', 0), 3), 'peak', j.get('device_peak_bytes'), 'est', j.get('estimated_peak_bytes'), 'launches', j.get('kernels_launched'))" $tmp/r.json || tail -3 $tmp/r.err
timeout 120 python3 bench/ab_gpt.py $T --rounds 3 --runs 15 2>$tmp/ab.err | python3 -c "
import json,sys
for l in sys.stdin:
  j=json.loads(l)
  print(j['round'], j['tracer_ms'], j['compile_ms'], j['ratio'], j['tracer_peak'], j['tracer_launches']) if 'round' in j else print(l.strip()[:200])"
tail -1 $tmp/ab.err
echo "total $(( $(date +%s) - start )) s"
