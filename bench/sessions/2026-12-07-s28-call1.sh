#!/usr/bin/env bash
# Session 28, call 1: session 27's kernels (special functions, sort, gathers) and session 28's
# convolutions on the GPU: tests/gpu/ops.trace's new entries on cuda against the CPU, the special
# functions and the convolution network (forward and every gradient) against PyTorch on the same
# data, the sort kernel against the host path and torch, a convolution benchmark against torch,
# then the whole GPU suite (tests/gpu/run.sh) to the time left.
set -u
cd "$(dirname "$0")/../.."
T=.dev/tracer
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__)"
tmp=$(mktemp -d)
for e in ops_special ops_thunder_more ops_unary_more ops_bitcast; do
  for passes in "" "fuse"; do
    rm -rf $tmp/c $tmp/g
    $T run tests/gpu/ops.trace --entry $e ${passes:+--passes $passes} --output $tmp/c > $tmp/c.log 2>&1 || { echo "FAIL $e cpu"; tail -5 $tmp/c.log; }
    $T run tests/gpu/ops.trace --entry $e ${passes:+--passes $passes} --device cuda --output $tmp/g > $tmp/g.log 2>&1 || { echo "FAIL $e gpu"; tail -20 $tmp/g.log; }
    python3 tests/gpu/compare.py $tmp/c $tmp/g "$e ${passes:-none}" | grep -v "^ok" ; echo "compare $e ${passes:-none} rc=${PIPESTATUS[0]}"
  done
done
echo "== special_torch cuda"; python3 tests/gpu/special_torch.py $T cuda | grep -v "^ok"; echo "rc=${PIPESTATUS[0]}"
echo "== conv_torch cuda"; python3 tests/gpu/conv_torch.py $T cuda; echo "rc=$?"
echo "== conv_torch cpu"; python3 tests/gpu/conv_torch.py $T cpu | grep -v "^ok"; echo "rc=${PIPESTATUS[0]}"
echo "== sort bench (median of 20; bench/sort_probe.trace)"
for e in router_top2 sample_top50 sort_rows; do
  echo "tracer $e kernel: $($T run bench/sort_probe.trace --entry $e --device cuda --bench 20 2>&1 | grep '^# bench')"
  echo "tracer $e host:   $(TRACER_SORT_HOST=1 $T run bench/sort_probe.trace --entry $e --device cuda --bench 20 2>&1 | grep '^# bench')"
done
python3 bench/sort_torch.py
echo "== conv bench (bench/conv_probe.trace, bench/conv_torch.py)"
for e in resnet_block resnet_block_bf16; do
  echo "tracer $e fwd+bwd: $($T run bench/conv_probe.trace --entry $e --device cuda --passes grad,fuse,del_last_used --bench 20 2>&1 | grep '^# bench\|error' | head -2)"
done
python3 bench/conv_torch.py
echo "== printouts"; $T run tests/thunder/topk_gather_special.txt --device cuda 2>&1 | tail -1; $T run tests/thunder/conv2d_backward.txt --device cuda 2>&1 | tail -1
echo "== tests/gpu/run.sh"; timeout ${RUN_SH_LIMIT:-300} bash tests/gpu/run.sh $T > $tmp/run.log 2>&1; echo "run.sh rc=$? (124: cut at the limit)"
grep -c "^ok\|  ok" $tmp/run.log; grep "FAIL" $tmp/run.log | head -20; [ -n "${OUT:-}" ] && cp $tmp/run.log $OUT/run.log
