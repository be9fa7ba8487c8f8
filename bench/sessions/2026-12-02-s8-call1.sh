#!/usr/bin/env bash
# Session 8 call 1: reductions of every dimension folded into one column-group kernel (the loss of
# bench/attention.trace read from o, nothing of the product written), key-padding masks on cuDNN
# (a bias at stride 0 over queries): both against the CPU; then bench/attention.trace on cuDNN
# 9.14 and 9.19 with and without remat against PyTorch's SDPA backends, its profile, and the GPT
# step interleaved with torch.compile (the loss's mean is now a folded column group too).
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
start=$(date +%s)
W=$(ls /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9 2>/dev/null | head -1)
tmp=$(mktemp -d)
. bench/sessions/lib.sh
for e in ops_total ops_columns ops_reduce_f32 ops_reduce_lowp; do
  check "ops $e" tests/gpu/ops.trace --entry $e
  check "ops $e fuse" tests/gpu/ops.trace --entry $e --passes fuse
done
for e in attention_mask_padding attention_mask_padding_add attention_mask_bool attention_causal; do
  for p in grad,del_last_used grad,philox,remat,fuse,del_last_used; do
    TRACER_CUDNN_LIBRARY=$W check "attention $e $p 9.19" tests/gpu/attention.trace --entry $e --passes $p
  done
  TRACER_CUDNN_LIBRARY=$W $T run tests/gpu/attention.trace --entry $e --passes grad,del_last_used --device cuda --json > $tmp/a.json 2>$tmp/a.err
  python3 -c "import json,sys; a=json.load(open(sys.argv[1]))['attention']; print('paths', sys.argv[2], 'cudnn', a['cudnn'], 'tracer', a['tracer'])" $tmp/a.json $e || tail -3 $tmp/a.err
  grep -h "^warning" $tmp/a.err | head -2
done
check "attention.trace L=256 remat (9.14)" bench/attention.trace --set L=256 --passes grad,remat,del_last_used
echo "checks done at $(( $(date +%s) - start )) s"
# The benchmark: tracer on both cuDNNs, two pipelines, with and without graphs; PyTorch's backends.
for lib in system wheel; do
  for p in grad,del_last_used grad,remat,del_last_used; do
    for g in "" --cuda-graph; do
      if [ $lib = wheel ]; then export TRACER_CUDNN_LIBRARY=$W; else unset TRACER_CUDNN_LIBRARY; fi
      bench "tracer $lib $p $g" $T run bench/attention.trace --passes $p --device cuda --bench 20 --json $g
    done
  done
done
unset TRACER_CUDNN_LIBRARY
for m in eager flash cudnn; do timeout 60 python3 bench/torch_twins.py attention $m 2>/dev/null | tail -1; done
TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 60 $T run bench/attention.trace --passes grad,remat,del_last_used --device cuda --bench 1 > $OUT/att_prof.txt 2>&1
grep -E "^#" $OUT/att_prof.txt | head -30 | cut -c1-200
echo "bench done at $(( $(date +%s) - start )) s"
timeout 150 python3 bench/ab_gpt.py $T --rounds 3 --runs 15 2>$OUT/ab.err | python3 -c "
import json,sys
for l in sys.stdin:
  j=json.loads(l)
  print(j['round'], j['tracer_ms'], j['compile_ms'], j['ratio'], j['tracer_peak'], j['tracer_launches']) if 'round' in j else print(l.strip()[:200])"
tail -1 $OUT/ab.err
echo "total $(( $(date +%s) - start )) s"
