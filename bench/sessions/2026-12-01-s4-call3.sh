#!/usr/bin/env bash
# Session 4 call 3: tuning on by default with its choices kept (a second run reads them back and
# gives the same bits), the cat's run copied from one address, more column blocks
# (TRACER_COLUMN_MIN_BLOCKS) tried; GPT against torch.compile in the same call.
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
check "ops_column_views fuse" tests/gpu/ops.trace --entry ops_column_views --passes fuse
python3 -c "import sys; sys.path.insert(0, 'bench'); import gpt_torch as g; g.save_safetensors(sys.argv[1], g.make_inputs(2, 64, 512, 128, 4, 2, device='cpu'))" $tmp/gpt.safetensors
GPT="examples/gpt.trace --set B=2 --set T=64 --set V=512 --set D=128 --set NH=4 --set L=2 --input $tmp/gpt.safetensors"
check "gpt grad,remat,fuse_reorder,del_last_used" $GPT --passes grad,remat,fuse_reorder,del_last_used
# The same bits run to run: a fresh cache (tuned), then the kept choices.
for r in 1 2; do TRACER_CACHE_DIR=$tmp/cache $T run $GPT --passes grad,remat,fuse_reorder,del_last_used --device cuda --json --output $tmp/bits$r > $tmp/j$r.json 2>&1; done
python3 -c "import json,sys; print('tuning run 1', json.load(open(sys.argv[1])).get('matmul_tuning'), 'run 2', json.load(open(sys.argv[2])).get('matmul_tuning'))" $tmp/j1.json $tmp/j2.json
cmp -s <(cd $tmp/bits1 && cat $(ls)) <(cd $tmp/bits2 && cat $(ls)) && echo "ok same bits in both runs ($(ls $tmp/bits1 | wc -l) outputs)" || { echo "FAIL bits differ between runs"; fail=1; }
timeout 90 python3 bench/gpt_check.py $T --size small 2>&1 | tail -3 | cut -c1-170
echo "checks: $([ $fail = 0 ] && echo PASSED || echo FAILED)"
timeout 40 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
row() {  # label, env, file, args
  local label=$1 e=$2 f=$3; shift 3
  env $e timeout 100 $T run $f --bench 9 --device cuda --json "$@" > $OUT/r.json 2>$OUT/r.err
  python3 -c "
import json,sys; j=json.load(open(sys.argv[1])); b=j.get('bench',{})
print(sys.argv[2], 'median', round(b.get('median_ms', 0), 3), 'min', round(b.get('min_ms', 0), 3), 'peak', j.get('device_peak_bytes'), 'launches', j.get('kernels_launched'), 'tuning', j.get('matmul_tuning'))" $OUT/r.json "$label" || tail -5 $OUT/r.err
}
G="examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used --cuda-graph"
for rep in 1 2; do row "gpt" X=1 $G; row "gpt min_blocks=1056" TRACER_COLUMN_MIN_BLOCKS=1056 $G; done
row "gpt untuned" TRACER_MATMUL_TUNE=0 $G
timeout 100 python3 bench/torch_twins.py gpt compile 2>/dev/null | tail -1 | cut -c1-170
row "gpt_ckpt" X=1 examples/gpt.trace --input /tmp/gpt.safetensors --set CHECKPOINT=1 --passes grad,checkpoint,remat,fuse_reorder,del_last_used --cuda-graph
for mb in 264 1056; do
  TRACER_COLUMN_MIN_BLOCKS=$mb TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 60 $T run examples/gpt.trace --input /tmp/gpt.safetensors --bench 1 --device cuda \
    --passes grad,remat,fuse_reorder,del_last_used > $OUT/tracer_profile_$mb.txt 2>&1
  echo "min_blocks=$mb: $(grep 'GPU profile' $OUT/tracer_profile_$mb.txt)"
  grep -E "fusion(41|45|43|42) |-> t892|-> t839 |kernel sum" $OUT/tracer_profile_$mb.txt | head -8 | cut -c1-120
done
timeout 100 python3 bench/torch_twins.py gpt compile --checkpoint 2>/dev/null | tail -1 | cut -c1-170
