#!/usr/bin/env bash
# Session 32's second GPU call: the slice write after the box-as-cat change and fuse's dropping
# of unread statements (bench/inplace_slice_write.trace against PyTorch), then tests/gpu/run.sh
# (fuse changed) for as long as the call allows. Run as:
#   bash bench/sessions/2026-12-07-s32-gpu2.sh $PWD/.dev/tracer
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/sessions/lib.sh
device_env "$@"
bench "tracer inplace_slice_write" $T run bench/inplace_slice_write.trace --device cuda --bench 20 --json
bench "tracer inplace_slice_write fuse,del_last_used" $T run bench/inplace_slice_write.trace --device cuda --bench 20 --json --passes fuse,del_last_used
python3 bench/inplace_slice_write_torch.py
check "inplace_slice_write fuse" bench/inplace_slice_write.trace --passes fuse,del_last_used
echo "== tests/gpu/run.sh (timeout 480 s)"
timeout 480 bash tests/gpu/run.sh "$T" > "$tmp/run.log" 2>&1; echo "run.sh rc=$?"
echo "ok lines: $(grep -c '^ok' "$tmp/run.log"), FAIL lines: $(grep -c 'FAIL' "$tmp/run.log")"
grep FAIL "$tmp/run.log" | head -20 | cut -c1-200
tail -4 "$tmp/run.log" | cut -c1-200
