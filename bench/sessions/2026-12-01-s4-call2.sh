#!/usr/bin/env bash
# Session 4 call 2: column kernels with the vector row loop unrolled 4 and narrow groups on more
# blocks; cuBLASLt tuning (TRACER_MATMUL_TUNE=1) against the heuristics' first choice, GPT and
# llama_mlp, torch.compile in the same call; a gated profile with tuning.
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
for e in ops_column_views ops_columns ops_reduce_lowp; do check "$e fuse" tests/gpu/ops.trace --entry $e --passes fuse; done
python3 -c "import sys; sys.path.insert(0, 'bench'); import gpt_torch as g; g.save_safetensors(sys.argv[1], g.make_inputs(2, 64, 512, 128, 4, 2, device='cpu'))" $tmp/gpt.safetensors
GPT="examples/gpt.trace --set B=2 --set T=64 --set V=512 --set D=128 --set NH=4 --set L=2 --input $tmp/gpt.safetensors"
check "gpt grad,remat,fuse_reorder,del_last_used" $GPT --passes grad,remat,fuse_reorder,del_last_used
TRACER_MATMUL_TUNE=1 check "gpt tuned grad,remat,fuse_reorder,del_last_used" $GPT --passes grad,remat,fuse_reorder,del_last_used
echo "checks: $([ $fail = 0 ] && echo PASSED || echo FAILED)"
timeout 40 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
row() {  # label, tune, file, args
  local label=$1 tune=$2 f=$3; shift 3
  TRACER_MATMUL_TUNE=$tune timeout 100 $T run $f --bench 9 --device cuda --json "$@" > $OUT/r.json 2>$OUT/r.err
  python3 -c "
import json,sys; j=json.load(open(sys.argv[1])); b=j.get('bench',{})
print(sys.argv[2], 'median', round(b.get('median_ms', 0), 3), 'min', round(b.get('min_ms', 0), 3), 'peak', j.get('device_peak_bytes'), 'launches', j.get('kernels_launched'), 'gelu', j.get('gemm_gelu_epilogues'), 'tuning', j.get('matmul_tuning'))" $OUT/r.json "$label" || tail -5 $OUT/r.err
}
G="examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used --cuda-graph"
for rep in 1 2; do row "gpt tune=0" 0 $G; row "gpt tune=1" 1 $G; done
timeout 100 python3 bench/torch_twins.py gpt compile 2>/dev/null | tail -1 | cut -c1-170
row "gpt_ckpt tune=1" 1 examples/gpt.trace --input /tmp/gpt.safetensors --set CHECKPOINT=1 --passes grad,checkpoint,remat,fuse_reorder,del_last_used --cuda-graph
for tune in 0 1; do row "llama_mlp tune=$tune" $tune examples/llama_mlp.trace --passes grad,philox,remat,fuse_reorder,del_last_used --cuda-graph; done
TRACER_MATMUL_TUNE=1 TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=70 timeout 60 $T run examples/gpt.trace --input /tmp/gpt.safetensors --bench 1 --device cuda \
  --passes grad,remat,fuse_reorder,del_last_used > $OUT/tracer_profile.txt 2>&1
grep -A14 "GPU profile" $OUT/tracer_profile.txt | cut -c1-150
grep -E "fusion(41|45|43|42|39) |-> grad_out_b|-> grad_proj_b|kernel sum" $OUT/tracer_profile.txt | head -12 | cut -c1-150
