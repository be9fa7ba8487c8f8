#!/usr/bin/env bash
# Session 32's fourth GPU call: pads as broadcast one-element fills in cats (38a5c19), on cuda
# against the CPU: tests/gpu/ops.trace ops_pads and ops_slice_views with and without fuse, the
# convolution backward printout (interior padding), conv.trace under grad, the in-place twin
# (its strided slice pads a mask), and the slice write. Run as:
#   bash bench/sessions/2026-12-07-s32-gpu4.sh $PWD/.dev/tracer
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/sessions/lib.sh
device_env "$@"
for e in ops_pads ops_slice_views ops_scatter_reduce; do
  check "ops.trace $e" tests/gpu/ops.trace --entry $e
  check "ops.trace $e fuse" tests/gpu/ops.trace --entry $e --passes fuse
done
check "conv2d_backward.txt" tests/thunder/conv2d_backward.txt
check "conv2d_backward.txt fuse" tests/thunder/conv2d_backward.txt --passes fuse,del_last_used
for e in main bf16; do check "conv.trace $e grad,fuse" tests/gpu/conv.trace --entry $e --passes grad,fuse,del_last_used; done
python3 tests/gpu/conv_torch.py "$T" cuda | tail -2
python3 tests/gpu/inplace_torch.py "$T" cuda | tail -1
python3 tests/gpu/special_torch.py "$T" cuda | grep -v "^ok"; echo "special_torch rc=${PIPESTATUS[0]}"
python3 tests/gpu/special_torch.py "$T" cuda | grep "ops_special_tails" | cut -c1-120
bench "tracer inplace_slice_write fuse,del_last_used" $T run bench/inplace_slice_write.trace --device cuda --bench 20 --json --passes fuse,del_last_used
python3 bench/inplace_slice_write_torch.py
