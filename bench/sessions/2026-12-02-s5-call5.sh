#!/usr/bin/env bash
# Session 5 call 5 (the budget's last minutes): the bad-index GPU test as fixed (random indices
# are drawn valid now, so the test makes bad ones), then the GPT step against torch.compile,
# interleaved, for the ratio's spread.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
printf 'def f(t: f32[8, 4], i: i64[64]):\n    return prims.take(t, i + 8, 0)\n' > /tmp/bad_index.trace
for extra in "" "--cuda-graph"; do
  if $T run /tmp/bad_index.trace --device cuda $extra > /tmp/bad.log 2>&1; then echo "FAIL bad index $extra: the run succeeded"
  else echo "bad index $extra: $(grep -o 'index -*[0-9]* is out of range for 8 rows' /tmp/bad.log)"; fi
done
timeout 40 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
row() {
  timeout 60 $T run examples/gpt.trace --input /tmp/gpt.safetensors --bench 9 --device cuda --json --passes grad,remat,fuse_reorder,del_last_used --cuda-graph > $OUT/r.json 2>$OUT/r.err
  python3 -c "
import json,sys; j=json.load(open(sys.argv[1])); b=j.get('bench',{})
print('gpt median', round(b.get('median_ms', 0), 3), 'min', round(b.get('min_ms', 0), 3), 'peak', j.get('device_peak_bytes'), 'launches', j.get('kernels_launched'))" $OUT/r.json || tail -5 $OUT/r.err
}
for k in 1 2; do
  row; row
  timeout 100 python3 bench/torch_twins.py gpt compile 2>/dev/null | tail -1 | cut -c1-120
done
