#!/usr/bin/env bash
# Session 22 call 4: examples/train_gpt.trace on cuda with and without its CUDA graph (the same
# losses, step by step), then every GPU test (tests/gpu/run.sh) after the session's changes
# (horizontal column kernels, fuse's split of column groups, cuda_graph=True). Carry [".dev"].
set -uo pipefail
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for g in 1 0; do
  timeout 120 .dev/tracer run examples/train_gpt.trace --device cuda -- --steps 60 --log 20 --cuda-graph $g > /tmp/tg$g.log 2>&1
  echo "== train_gpt --cuda-graph $g: rc $?"; grep -E "^step|graph|error" /tmp/tg$g.log | cut -c1-160
done
diff <(grep -o "loss [0-9.]*" /tmp/tg1.log) <(grep -o "loss [0-9.]*" /tmp/tg0.log) > /dev/null && echo "losses with and without the graph: equal" || echo "losses with and without the graph: DIFFER"
timeout 500 bash tests/gpu/run.sh .dev/tracer > /tmp/gpu.log 2>&1; echo "== tests/gpu/run.sh rc $?"
cp /tmp/gpu.log $OUT/gpu-tests.log 2>/dev/null
echo "$(grep -c '^ok' /tmp/gpu.log) ok lines, $(grep -c 'FAIL' /tmp/gpu.log) FAIL lines"
grep FAIL /tmp/gpu.log | head -20 | cut -c1-250
tail -3 /tmp/gpu.log
