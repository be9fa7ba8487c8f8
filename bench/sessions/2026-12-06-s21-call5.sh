#!/usr/bin/env bash
# Session 21 call 5: why the GPT's attention backward takes 0.195 ms a layer where the same
# problem alone takes 0.165 (call 4): which path each attention took (--json's attention counts)
# and the backward's rows with the in-place cat and the transposed output layout off in turn.
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
timeout 60 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
G="examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used --device cuda"
for v in "" TRACER_ATTENTION_CAT=0 TRACER_ATTENTION_OUT_LAYOUT=0 "TRACER_ATTENTION_CAT=0 TRACER_ATTENTION_OUT_LAYOUT=0" TRACER_ATTENTION_VIEWS=0; do
  env $v timeout 90 $T run $G --bench 10 --cuda-graph --json > /tmp/g.json 2>/tmp/g.err || tail -2 /tmp/g.err
  python3 -c "
import json; j=json.load(open('/tmp/g.json')); a=j.get('attention', {})
print('%-60s step %.3f ms  attention %s  warnings %s' % ('$v' or 'default', j['bench']['median_ms'], json.dumps(a), len(j.get('warnings', []))))"
  env $v TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 90 $T run $G --bench 1 2>&1 | grep -E "^#   [0-9.]+ ms +12x .*attention" | tr '\n' ' '; echo
done
grep -i warning /tmp/g.err | head -3
