#!/usr/bin/env bash
# Session 32's third GPU call: the rest of tests/gpu/run.sh (at 1873e99) that the second call's
# timeout did not reach: its header and check(), the cuDNN library choice (lines 171-186), then
# lines 196 to the end (attention's empty row and paths, the system's cuDNN, CUDA graphs, bad
# indices, the GPT under every pipeline). Made into .dev/partB.sh and run as
#   bash bench/sessions/2026-12-07-s32-gpu3.sh $PWD/.dev/tracer
set -uo pipefail
cd "$(dirname "$0")/../.."
r=tests/gpu/run.sh
mkdir -p .dev
{ sed -n 1,16p $r; sed -n 78,89p $r; sed -n 171,186p $r; sed -n '196,$p' $r; } > .dev/partB.sh
sed -i 's|^cd "$(dirname "$0")/../.."|cd "$(dirname "$0")/.."|' .dev/partB.sh
export PATH=/opt/torch/.venv/bin:$PATH NCCL_NVLS_ENABLE=0
timeout 560 bash .dev/partB.sh "${1:-build/tracer}" > .dev/partB.log 2>&1; echo "partB rc=$?"
echo "ok lines: $(grep -c '^ok' .dev/partB.log), FAIL lines: $(grep -c 'FAIL' .dev/partB.log)"
grep FAIL .dev/partB.log | head -20 | cut -c1-200
tail -5 .dev/partB.log | cut -c1-200
