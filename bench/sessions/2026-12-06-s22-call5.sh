#!/usr/bin/env bash
# Session 22 call 5: examples/train_gpt.trace on cuda with and without its CUDA graph (the same
# losses, step by step). Carry [".dev"].
set -uo pipefail
export TRACER_CACHE_DIR=/tmp/trk
for g in 1 0; do
  timeout 100 .dev/tracer run examples/train_gpt.trace --device cuda -- --steps 60 --log 20 --cuda-graph $g > /tmp/tg$g.log 2>&1
  echo "== train_gpt --cuda-graph $g: rc $?"; grep -E "^step|graph|error" /tmp/tg$g.log | cut -c1-160
done
n=$(grep -c "^step" /tmp/tg1.log)
[ "$n" -gt 0 ] && diff <(grep -o "loss [0-9.]*" /tmp/tg1.log) <(grep -o "loss [0-9.]*" /tmp/tg0.log) > /dev/null && echo "losses with and without the graph: equal ($n lines)" || echo "losses with and without the graph: DIFFER or missing"
