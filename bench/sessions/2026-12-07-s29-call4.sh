#!/usr/bin/env bash
# Session 29, call 4: the ResNet block with fold gathering without the appended zero column,
# against torch; special_torch.py with the sort and infinity fixes; conv_torch.py; the sort bench.
set -u
cd "$(dirname "$0")/../.."
T=.dev/tracer
nvidia-smi --query-gpu=name --format=csv,noheader
for e in resnet_block resnet_block_bf16; do
  TRACER_GPU_PROFILE=1 $T run bench/conv_probe.trace --entry $e --device cuda --passes grad,fuse,del_last_used --bench 1 2>&1 | grep "^#  " | head -8
  echo "tracer $e fwd+bwd: $($T run bench/conv_probe.trace --entry $e --device cuda --passes grad,fuse,del_last_used --bench 20 2>&1 | grep '^# bench\|error' | head -2)"
done
python3 bench/conv_torch.py
echo "== special_torch cuda"; python3 tests/gpu/special_torch.py $T cuda | grep -v "^ok"; echo "rc=${PIPESTATUS[0]}"
echo "== conv_torch cuda"; python3 tests/gpu/conv_torch.py $T cuda | grep -v "^ok"; echo "rc=${PIPESTATUS[0]}"
echo "== conv_torch cpu"; python3 tests/gpu/conv_torch.py $T cpu | grep -v "^ok"; echo "rc=${PIPESTATUS[0]}"
echo "== gather_long"; tmp=$(mktemp -d)
$T run tests/gpu/ops.trace --entry ops_gather_long --output $tmp/c > /dev/null 2>&1; $T run tests/gpu/ops.trace --entry ops_gather_long --device cuda --output $tmp/g > /dev/null 2>&1
python3 tests/gpu/compare.py --exact $tmp/c $tmp/g gather_long | tail -3
echo "== sort torch"; python3 bench/sort_torch.py
