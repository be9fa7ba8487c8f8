#!/usr/bin/env bash
# Session 3 call 1: views (TRACER_ATTENTION_VIEWS=1) validation, then GPT step timing with views on and off.
# of their problem's output strides. The cases that failed in call 4 against the CPU (attention
# under fuse, the GPT under every fuse pipeline and with checkpoint), the GPT against PyTorch's
# float32 math, and the full GPT step with q, k and v read in place.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 TRACER_ATTENTION_VIEWS=1
tmp=$(mktemp -d)
fail=0
check() {  # label, args...
  local label=$1; shift
  rm -rf $tmp/cpu $tmp/gpu
  $T run "$@" --output $tmp/cpu > $tmp/c.log 2>&1 || { echo "FAIL $label CPU"; fail=1; return; }
  $T run "$@" --device cuda --json --output $tmp/gpu > $tmp/g.json 2>$tmp/g.log || { echo "FAIL $label GPU"; tail -3 $tmp/g.log; fail=1; return; }
  python3 tests/gpu/compare.py $tmp/cpu $tmp/gpu "$label" > $tmp/cmp.log || fail=1
  echo "$(grep -c '^ok' $tmp/cmp.log) ok, $(grep -c '^FAIL' $tmp/cmp.log) FAIL: $label $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['attention'])" $tmp/g.json)"
  grep "^FAIL" $tmp/cmp.log | head -3
}
for p in grad,philox,remat,fuse,del_last_used grad,fuse,del_last_used; do
  check "attention_causal $p" tests/gpu/attention.trace --entry attention_causal --passes $p
done
python3 -c "import sys; sys.path.insert(0, 'bench'); import gpt_torch as g; g.save_safetensors(sys.argv[1], g.make_inputs(2, 64, 512, 128, 4, 2, device='cpu'))" $tmp/gpt.safetensors
GPT="examples/gpt.trace --set B=2 --set T=64 --set V=512 --set D=128 --set NH=4 --set L=2 --input $tmp/gpt.safetensors"
for p in grad,fuse,del_last_used grad,remat,fuse,del_last_used grad,remat,fuse_reorder,del_last_used; do check "gpt $p" $GPT --passes $p; done
check "gpt CHECKPOINT=1" $GPT --set CHECKPOINT=1 --passes grad,checkpoint,remat,fuse_reorder,del_last_used
timeout 60 python3 bench/gpt_check.py $T --size small --devices cuda 2>&1 | tail -6 | cut -c1-170
echo "checks: $([ $fail = 0 ] && echo PASSED || echo FAILED)"
timeout 30 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
timeout 30 $T run examples/gpt.trace --input /tmp/gpt.safetensors --bench 9 --device cuda --json --passes grad,remat,fuse_reorder,del_last_used --cuda-graph > $tmp/r.json 2>$tmp/r.err
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('gpt full median', j['bench']['median_ms'], 'min', j['bench']['min_ms'], 'peak', j['device_peak_bytes'], 'est', j['estimated_peak_bytes'], 'launches', j['kernels_launched'], j['attention'])" $tmp/r.json || tail -3 $tmp/r.err
CU919=$(ls /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9 2>/dev/null | head -1)
for v in 0 1; do for lib in system 919; do
  if [ $lib = 919 ]; then L="TRACER_CUDNN_LIBRARY=$CU919"; else L="X=1"; fi
  env TRACER_ATTENTION_VIEWS=$v $L timeout 30 $T run examples/gpt.trace --input /tmp/gpt.safetensors --bench 9 --device cuda --json --passes grad,remat,fuse_reorder,del_last_used --cuda-graph > $tmp/r.json 2>$tmp/r.err
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('views=$v cudnn=$lib gpt median', j['bench']['median_ms'], 'min', j['bench']['min_ms'], 'peak', j['device_peak_bytes'], 'launches', j['kernels_launched'], j['attention'])" $tmp/r.json || tail -3 $tmp/r.err
done; done
timeout 60 python3 bench/torch_twins.py gpt compile 2>&1 | tail -2
