#!/usr/bin/env bash
# Session 30's one device call (carry .dev with `strip -o .dev/tracer build/tracer`): the new
# executors' operators against PyTorch's ATen kernels and autograd, session 29's odd-pass radix
# sort and ResNet block, then tests/gpu/run.sh for what time is left (RUN_SH_LIMIT).
set -u
cd "$(dirname "$0")/../.."
T=.dev/tracer
nvidia-smi --query-gpu=name --format=csv,noheader
python3 tests/gpu/executors_torch.py $T cuda 2>&1 | tail -20
tmp=$(mktemp -d)
$T run tests/gpu/ops.trace --entry ops_gather_long --output $tmp/c > /dev/null 2>&1
$T run tests/gpu/ops.trace --entry ops_gather_long --device cuda --output $tmp/g > /dev/null 2>&1
python3 tests/gpu/compare.py --exact $tmp/c $tmp/g gather_long | tail -2
for e in resnet_block resnet_block_bf16; do
  echo "tracer $e fwd+bwd: $($T run bench/conv_probe.trace --entry $e --device cuda --passes grad,fuse,del_last_used --bench 20 2>&1 | grep '^# bench\|device peak' | tr '\n' ' ' | cut -c1-200)"
done
python3 bench/conv_torch.py 2>&1 | tail -4
timeout ${RUN_SH_LIMIT:-300} bash tests/gpu/run.sh $T > $tmp/run.log 2>&1; echo "run.sh rc=$? (124: cut at the limit)"
grep -c "^ok" $tmp/run.log; grep "FAIL\|GPU TESTS" $tmp/run.log | head -20; tail -3 $tmp/run.log
[ -n "${OUT:-}" ] && cp $tmp/run.log $OUT/run.log
