#!/usr/bin/env bash
# Session 29, call 3: take_backward's long segments (radix sort) bit for bit against the CPU; the
# ResNet block with im2col's gather gradient against torch; conv_torch.py and special_torch.py
# (fixed readers); where bf16 loses accuracy in conv.trace's loss; then tests/gpu/run.sh.
set -u
cd "$(dirname "$0")/../.."
T=.dev/tracer
nvidia-smi --query-gpu=name --format=csv,noheader
tmp=$(mktemp -d)
for passes in "" "fuse" "del_last_used" "fuse,del_last_used"; do
  rm -rf $tmp/c $tmp/g
  $T run tests/gpu/ops.trace --entry ops_gather_long ${passes:+--passes $passes} --output $tmp/c > $tmp/c.log 2>&1 || { echo "FAIL cpu"; tail -5 $tmp/c.log; }
  $T run tests/gpu/ops.trace --entry ops_gather_long ${passes:+--passes $passes} --device cuda --output $tmp/g > $tmp/g.log 2>&1 || { echo "FAIL gpu"; tail -20 $tmp/g.log; }
  python3 tests/gpu/compare.py --exact $tmp/c $tmp/g "gather_long ${passes:-none}" | tail -3
done
echo "== take_backward long rows profile"; TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=4 $T run tests/gpu/ops.trace --entry ops_gather_long --device cuda --bench 3 2>&1 | grep "take_backward\|bench" | head -6
echo "== conv bench (bench/conv_probe.trace, bench/conv_torch.py)"
for e in resnet_block resnet_block_bf16; do
  TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=12 $T run bench/conv_probe.trace --entry $e --device cuda --passes grad,fuse,del_last_used --bench 1 2>&1 | grep -A13 "statements by device" | head -14
  echo "tracer $e fwd+bwd: $($T run bench/conv_probe.trace --entry $e --device cuda --passes grad,fuse,del_last_used --bench 20 2>&1 | grep '^# bench\|error\|kernel launches' | head -3)"
done
python3 bench/conv_torch.py
echo "== special_torch cuda"; python3 tests/gpu/special_torch.py $T cuda | grep -v "^ok"; echo "rc=${PIPESTATUS[0]}"
echo "== conv_torch cuda"; python3 tests/gpu/conv_torch.py $T cuda; echo "rc=$?"
echo "== conv terms cpu"; python3 bench/sessions/2026-12-07-s29-conv-terms.py $T cpu
echo "== conv terms cuda"; python3 bench/sessions/2026-12-07-s29-conv-terms.py $T cuda
echo "== tests/gpu/run.sh"; timeout ${RUN_SH_LIMIT:-300} bash tests/gpu/run.sh $T > $tmp/run.log 2>&1; echo "run.sh rc=$? (124: cut at the limit)"
grep -c "^ok\|  ok" $tmp/run.log; grep "FAIL" $tmp/run.log | head -20; [ -n "${OUT:-}" ] && cp $tmp/run.log $OUT/run.log
