#!/usr/bin/env bash
# Session 32's GPU call: scatter_reduce against PyTorch (tests/gpu/special_torch.py), the in-place
# twin (tests/gpu/inplace_torch.py, now with names read after writes brought up to date), the
# new Thunder names on cuda against the CPU, and the slice write of bench/inplace_slice_write.trace
# against PyTorch's in-place copy. Run as: bash bench/sessions/2026-12-07-s32-gpu.sh $PWD/.dev/tracer
# Results: bench/results/2026-12-07-h100-s32.md (or h200, as the device says).
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/sessions/lib.sh
device_env "$@"
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())"
echo "== special_torch.py (ops_special, ops_thunder_more, ops_scatter_reduce) against torch on cuda"
python3 tests/gpu/special_torch.py "$T" cuda | grep -v "^ok" ; echo "special_torch rc=${PIPESTATUS[0]}"
python3 tests/gpu/special_torch.py "$T" cuda | grep "ops_scatter_reduce" | cut -c1-110
echo "== inplace_torch.py on cuda and cpu"
python3 tests/gpu/inplace_torch.py "$T" cuda | tail -3; echo "inplace cuda rc=${PIPESTATUS[0]}"
python3 tests/gpu/inplace_torch.py "$T" cpu | tail -1; echo "inplace cpu rc=${PIPESTATUS[0]}"
echo "== cpu against cuda"
check "torch_names_no_grad.txt" tests/thunder/torch_names_no_grad.txt
check "ops_scatter_reduce fuse" tests/gpu/ops.trace --entry ops_scatter_reduce --passes fuse
check "inplace_update_aliases.txt" tests/thunder/inplace_update_aliases.txt
echo "== slice write: bf16 [8, 32, 2048, 128] cache, 16 positions (bench/inplace_slice_write.trace)"
bench "tracer inplace_slice_write" $T run bench/inplace_slice_write.trace --device cuda --bench 20 --json
bench "tracer inplace_slice_write fuse,del_last_used" $T run bench/inplace_slice_write.trace --device cuda --bench 20 --json --passes fuse,del_last_used
python3 bench/inplace_slice_write_torch.py
$T run bench/inplace_slice_write.trace --device cuda --passes fuse,del_last_used 2>&1 | grep "^#" | tail -2
