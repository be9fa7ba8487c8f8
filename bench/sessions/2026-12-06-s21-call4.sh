#!/usr/bin/env bash
# Session 21 call 4: the cuDNN attention's engine configurations at GPT-2 small's shape (B=8,
# H=12, L=1024, E=64, causal, bf16): the heuristics' first (tracer's choice) against the next
# ones (TRACER_CUDNN_CONFIG=i; each in its own plan cache), the forward and backward rows of the
# profile. PyTorch's cuDNN backward took 0.154 ms a layer (call 2), tracer's 0.195. Carry [".dev"].
set -uo pipefail
export T=.dev/tracer PYTHONUNBUFFERED=1
A="bench/attention.trace --set B=8 --set H=12 --set L=1024 --set E=64 --passes grad,remat,fuse,del_last_used --device cuda"
for cfg in 0 1 2 3 4 5 6 7; do
  out=$(TRACER_CACHE_DIR=/tmp/trk_cfg$cfg TRACER_CUDNN_CONFIG=$cfg TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 60 $T run $A --bench 5 2>&1)
  echo "config $cfg: $(echo "$out" | grep -E '^#   [0-9.]+ ms +[0-9]+x  (kernel attention_backward|kernel attention|view attention)' | tr '\n' ' ' | tr -s ' ')"
  echo "$out" | grep -iE "error|warning" | head -2
done
for cfg in 0 2; do
  TRACER_CACHE_DIR=/tmp/trk_cfg$cfg TRACER_CUDNN_CONFIG=$cfg timeout 60 $T run $A --bench 20 --json --cuda-graph > /tmp/a.json 2>/dev/null
  python3 -c "import json; j=json.load(open('/tmp/a.json')); print('config $cfg: fwd+bwd median %.3f ms' % j['bench']['median_ms'])"
done
