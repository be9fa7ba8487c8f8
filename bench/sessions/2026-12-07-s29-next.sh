#!/usr/bin/env bash
# For the next session's first device call (carry .dev with `strip -o .dev/tracer build/tracer`):
# what session 29 could not run with its final binary: tests/gpu/run.sh whole (its attention
# section, the printouts on cuda, bench/gpt_check.py against PyTorch) with fuse opening
# composites, and ops_gather_long's odd-pass radix sort; then the ResNet block against torch.
set -u
cd "$(dirname "$0")/../.."
T=.dev/tracer
nvidia-smi --query-gpu=name --format=csv,noheader
tmp=$(mktemp -d)
$T run tests/gpu/ops.trace --entry ops_gather_long --output $tmp/c > /dev/null 2>&1
$T run tests/gpu/ops.trace --entry ops_gather_long --device cuda --output $tmp/g > /dev/null 2>&1
python3 tests/gpu/compare.py --exact $tmp/c $tmp/g gather_long | tail -4
for e in resnet_block resnet_block_bf16; do
  echo "tracer $e fwd+bwd: $($T run bench/conv_probe.trace --entry $e --device cuda --passes grad,fuse,del_last_used --bench 20 2>&1 | grep '^# bench\|device peak' | tr '\n' ' ' | cut -c1-200)"
done
python3 bench/conv_torch.py
timeout ${RUN_SH_LIMIT:-480} bash tests/gpu/run.sh $T > $tmp/run.log 2>&1; echo "run.sh rc=$? (124: cut at the limit)"
grep -c "^ok" $tmp/run.log; grep "FAIL\|GPU TESTS" $tmp/run.log | head -20; [ -n "${OUT:-}" ] && cp $tmp/run.log $OUT/run.log
