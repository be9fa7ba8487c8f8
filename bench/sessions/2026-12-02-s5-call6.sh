#!/usr/bin/env bash
# Session 5 call 6: the cross entropy's forward row kernel (0.64 ms, 1.3 TB/s over the GPT's
# [8192, 50304] bf16 logits) with its rows copied to shared memory (the default) against every
# pass reading them from memory (TRACER_ROWS_SHARED=0; the second pass mostly from L2) and the
# online form (TRACER_ROWS_ONLINE=1): the row tests against the CPU, the kernel's time in a gated
# profile, and the step against torch.compile, for each.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
tmp=$(mktemp -d)
timeout 40 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
for v in "" "TRACER_ROWS_SHARED=0" "TRACER_ROWS_ONLINE=1 TRACER_ROWS_SHARED=0"; do
  rm -rf $tmp/cpu $tmp/gpu
  $T run tests/gpu/ops.trace --entry ops_rows --passes fuse --output $tmp/cpu > /dev/null 2>&1
  env $v $T run tests/gpu/ops.trace --entry ops_rows --passes fuse --device cuda --output $tmp/gpu > /dev/null 2>&1
  echo "[$v] ops_rows: $(python3 tests/gpu/compare.py $tmp/cpu $tmp/gpu rows | grep -c '^ok') ok, $(python3 tests/gpu/compare.py $tmp/cpu $tmp/gpu rows | grep -c FAIL) FAIL"
  env $v TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 60 $T run examples/gpt.trace --input /tmp/gpt.safetensors --bench 1 --device cuda \
    --passes grad,remat,fuse_reorder,del_last_used > $OUT/p.txt 2>&1
  echo "[$v] $(grep -E 'total' $OUT/p.txt | head -1 | cut -c1-80); CE forward: $(grep -E 'kernel fusion37 ->' $OUT/p.txt | head -1 | cut -c1-70)"
  for k in 1 2; do
    env $v timeout 60 $T run examples/gpt.trace --input /tmp/gpt.safetensors --bench 9 --device cuda --json --passes grad,remat,fuse_reorder,del_last_used --cuda-graph > $OUT/r.json 2>$OUT/r.err
    python3 -c "
import json,sys; j=json.load(open(sys.argv[1])); b=j.get('bench',{})
print(sys.argv[2], 'gpt median', round(b.get('median_ms', 0), 3), 'min', round(b.get('min_ms', 0), 3), 'peak', j.get('device_peak_bytes'))" $OUT/r.json "[$v]" || tail -3 $OUT/r.err
  done
done
timeout 100 python3 bench/torch_twins.py gpt compile 2>/dev/null | tail -1 | cut -c1-120
