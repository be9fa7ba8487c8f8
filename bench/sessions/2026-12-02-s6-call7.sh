#!/usr/bin/env bash
# Session 6 call 7: masks through cuDNN's graph with a bias (b8 masks converted to 0 / -inf, masks
# of the I/O dtype read in place) on the system's cuDNN 9.14 and the wheel's 9.19, against the CPU;
# the rows kernels (TRACER_ATTENTION=tracer) on the same cases; which path each took.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
WHEEL=$(ls /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9 | head -1)
start=$(date +%s)
tmp=$(mktemp -d)
check() {
  local label=$1; shift
  rm -rf $tmp/cpu $tmp/gpu
  $T run "$@" --output $tmp/cpu > $tmp/c.log 2>&1 || { echo "FAIL $label CPU"; tail -3 $tmp/c.log; return; }
  $T run "$@" --device cuda --json --output $tmp/gpu > $tmp/g.json 2> $tmp/g.log || { echo "FAIL $label GPU"; tail -3 $tmp/g.log; return; }
  python3 tests/gpu/compare.py $tmp/cpu $tmp/gpu "$label" > $tmp/cmp.log 2>/dev/null
  paths=$(python3 -c "import json,sys; a=json.load(open(sys.argv[1]))['attention']; print('cudnn', a['cudnn'], 'tracer', a['tracer'])" $tmp/g.json 2>/dev/null)
  echo "$(grep -c '^ok' $tmp/cmp.log) ok, $(grep -c '^FAIL' $tmp/cmp.log) FAIL: $label [$paths] $(grep '^warning' $tmp/g.log | head -1 | cut -c1-150)"; grep '^FAIL' $tmp/cmp.log | head -3 | cut -c1-160
}
A=tests/gpu/attention.trace
for lib in system wheel; do
  for e in attention_mask_bool attention_mask_add; do
    for p in "" grad,philox,remat,del_last_used grad,philox,remat,fuse,del_last_used; do
      if [ $lib = wheel ]; then TRACER_CUDNN_LIBRARY=$WHEEL TRACER_CACHE_DIR=/tmp/trk_w check "$lib $e ${p:-no passes}" $A --entry $e ${p:+--passes $p}
      else check "$lib $e ${p:-no passes}" $A --entry $e ${p:+--passes $p}; fi
    done
  done
done
for e in attention_mask_bool attention_mask_add attention_mask_keys; do
  TRACER_ATTENTION=tracer check "tracer's kernels $e" $A --entry $e --passes grad,philox,remat,fuse,del_last_used
done
TRACER_CUDNN_LIBRARY=$WHEEL TRACER_ATTENTION=cudnn $T run $A --entry attention_mask_keys --device cuda > $tmp/f.log 2>&1; echo "cudnn forced, f32 mask: rc=$? $(grep -o 'error.*' $tmp/f.log | head -1 | cut -c1-170)"
TRACER_CUDNN_LIBRARY=$WHEEL TRACER_ATTENTION=cudnn check "cudnn forced, b8 mask, wheel" $A --entry attention_mask_bool --passes grad,del_last_used
echo "total $(( $(date +%s) - start )) s"
