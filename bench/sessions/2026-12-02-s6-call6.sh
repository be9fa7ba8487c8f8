#!/usr/bin/env bash
# Session 6 call 6: masks in the fused attention (prims.attention's attn_mask) on the GPU, run by
# the one-warp-per-row kernels, against the CPU kernel: every mask case of tests/gpu/attention.trace
# with and without the training pipelines and a CUDA graph; the unmasked rows cases (the kernels'
# signature changed), the flash/cuDNN cases and the small GPT as before; TRACER_ATTENTION=cudnn
# refusing a mask with a message.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
start=$(date +%s)
tmp=$(mktemp -d)
check() {
  local label=$1; shift
  rm -rf $tmp/cpu $tmp/gpu
  $T run "$@" --output $tmp/cpu > $tmp/c.log 2>&1 || { echo "FAIL $label CPU"; tail -3 $tmp/c.log; return; }
  $T run "$@" --device cuda $GPU_EXTRA --output $tmp/gpu > $tmp/g.log 2>&1 || { echo "FAIL $label GPU"; tail -3 $tmp/g.log; return; }
  python3 tests/gpu/compare.py $tmp/cpu $tmp/gpu "$label" > $tmp/cmp.log 2>/dev/null
  echo "$(grep -c '^ok' $tmp/cmp.log) ok, $(grep -c '^FAIL' $tmp/cmp.log) FAIL: $label $(grep -c '^warning' $tmp/g.log) warnings"; grep '^FAIL' $tmp/cmp.log | head -3 | cut -c1-160
}
A=tests/gpu/attention.trace
for e in attention_mask_bool attention_mask_add attention_mask_keys attention_masked attention_rows_f32 attention_rows_f64 attention_heads64 attention_causal; do
  for p in "" grad,philox,remat,del_last_used grad,philox,remat,fuse,del_last_used; do
    GPU_EXTRA="" check "$e ${p:-no passes}" $A --entry $e ${p:+--passes $p}
    GPU_EXTRA="--cuda-graph" check "$e ${p:-no passes} graph" $A --entry $e ${p:+--passes $p}
  done
done
GPU_EXTRA="" check "attention_mask_empty_row" $A --entry attention_mask_empty_row
for e in attention_mask_bool attention_mask_add attention_causal; do
  $T run $A --entry $e --passes grad,del_last_used --device cuda --json > $tmp/a.json 2>$tmp/a.err
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[2], 'attention', j['attention'], 'cpu_fallbacks', j.get('cpu_fallbacks'), j.get('fallback_ops'))" $tmp/a.json $e
done
TRACER_ATTENTION=cudnn $T run $A --entry attention_mask_add --device cuda > $tmp/f.log 2>&1; echo "TRACER_ATTENTION=cudnn on a mask: rc=$? $(grep -o 'error.*' $tmp/f.log | head -1 | cut -c1-160)"
python3 -c "import sys; sys.path.insert(0, 'bench'); import gpt_torch as g; g.save_safetensors(sys.argv[1], g.make_inputs(2, 128, 512, 128, 4, 2, device='cpu'))" $tmp/gpt.safetensors
GPU_EXTRA="" check "gpt T=128" examples/gpt.trace --set B=2 --set T=128 --set V=512 --set D=128 --set NH=4 --set L=2 --input $tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used
echo "total $(( $(date +%s) - start )) s"
