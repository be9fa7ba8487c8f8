#!/usr/bin/env bash
# Session 22 call 6: the part of tests/gpu/run.sh that call 4's 500 s did not reach (from the
# examples' --cuda-graph loop's end: gathers, the uncapturable program, the GPT under every
# pipeline, TRACER_GPU_CHECK=2, bench/gpt_check.py against PyTorch, the stateful uniform).
# Carry [".dev"].
set -uo pipefail
export TRACER_CACHE_DIR=/tmp/trk
sed -n '1,16p;68,79p;232,$p' tests/gpu/run.sh > tests/gpu/_tail.sh
timeout 170 bash tests/gpu/_tail.sh $PWD/.dev/tracer > /tmp/tail.log 2>&1; echo "== rc $?"
cp /tmp/tail.log $OUT/gpu-tests-tail.log
echo "$(grep -c '^ok' /tmp/tail.log) ok lines, $(grep -c 'FAIL' /tmp/tail.log) FAIL lines"
grep FAIL /tmp/tail.log | head -10 | cut -c1-250
tail -2 /tmp/tail.log
