#!/usr/bin/env bash
# Session 3 call 5 (the last of the budget): the parts of the GPU suite call 4 did not reach
# (the GPT against the CPU under fuse pipelines and with checkpoint, TRACER_GPU_CHECK=2, the GPT
# against PyTorch's float32 math, the stateful uniform), the new ops entries, then the GPT step
# with online row sums on and off (TRACER_ROWS_ONLINE=0) against torch.compile, and a profile.
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
for e in ops_rows ops_columns; do for p in "" fuse; do check "$e $p" tests/gpu/ops.trace --entry $e ${p:+--passes $p}; done; done
python3 -c "import sys; sys.path.insert(0, 'bench'); import gpt_torch as g; g.save_safetensors(sys.argv[1], g.make_inputs(2, 64, 512, 128, 4, 2, device='cpu'))" $tmp/gpt.safetensors
GPT="examples/gpt.trace --set B=2 --set T=64 --set V=512 --set D=128 --set NH=4 --set L=2 --input $tmp/gpt.safetensors"
for p in grad,fuse,del_last_used grad,remat,fuse,del_last_used grad,remat,fuse_reorder,del_last_used; do check "gpt $p" $GPT --passes $p; done
check "gpt CHECKPOINT=1" $GPT --set CHECKPOINT=1 --passes grad,checkpoint,remat,fuse_reorder,del_last_used
for p in grad,remat,fuse,del_last_used grad,checkpoint,remat,fuse_reorder,del_last_used; do
  TRACER_GPU_CHECK=2 $T run $GPT --set CHECKPOINT=1 --passes $p --device cuda > $tmp/chk.log 2>&1 && echo "ok GPU_CHECK=2 $p: $(grep -o '[0-9]* outputs compared' $tmp/chk.log | tr '\n' ' ')" || { echo "FAIL GPU_CHECK=2 $p"; grep "gpu-check\|error" $tmp/chk.log | head -5; fail=1; }
done
timeout 90 python3 bench/gpt_check.py $T --size small 2>&1 | tail -12 | cut -c1-170
for extra in "" "--cuda-graph"; do check "chain stateful uniform $extra" examples/chain.trace --entry chain --set R=64 --set C=96 $extra; done
echo "checks: $([ $fail = 0 ] && echo PASSED || echo FAILED)"
timeout 40 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
row() {  # label, env, args
  local label=$1 e=$2; shift 2
  env $e timeout 60 $T run examples/gpt.trace --input /tmp/gpt.safetensors --bench 9 --device cuda --json "$@" > $OUT/r.json 2>$OUT/r.err
  python3 -c "
import json,sys; j=json.load(open(sys.argv[1])); b=j.get('bench',{})
print(sys.argv[2], 'median', round(b.get('median_ms', 0), 3), 'min', round(b.get('min_ms', 0), 3), 'peak', j.get('device_peak_bytes'), 'est', j.get('estimated_peak_bytes'), 'launches', j.get('kernels_launched'))" $OUT/r.json "$label" || tail -5 $OUT/r.err
}
for rep in 1 2; do
  row "gpt online" X=1 --passes grad,remat,fuse_reorder,del_last_used --cuda-graph
  row "gpt two-pass" TRACER_ROWS_ONLINE=0 --passes grad,remat,fuse_reorder,del_last_used --cuda-graph
done
row "gpt_ckpt online" X=1 --set CHECKPOINT=1 --passes grad,checkpoint,remat,fuse_reorder,del_last_used --cuda-graph
timeout 100 python3 bench/torch_twins.py gpt compile 2>/dev/null | tail -1 | cut -c1-200
for o in 1 0; do
  TRACER_ROWS_ONLINE=$o TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=60 timeout 60 $T run examples/gpt.trace --input /tmp/gpt.safetensors --bench 1 --device cuda \
    --passes grad,remat,fuse_reorder,del_last_used > $OUT/tracer_profile_online$o.txt 2>&1
  echo "online=$o: $(grep 'GPU profile' $OUT/tracer_profile_online$o.txt) | $(grep 'fusion37 ' $OUT/tracer_profile_online$o.txt | head -1)"
done
