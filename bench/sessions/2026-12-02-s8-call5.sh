#!/usr/bin/env bash
# Session 8 call 5: the GPT step's share of attention (issue 14's target: at most a fifth), from
# the per-statement profile of the documented pipeline, on both cuDNNs.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
W=$(ls /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9 2>/dev/null | head -1)
timeout 60 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
G="examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used"
for lib in system wheel; do
  if [ $lib = wheel ]; then export TRACER_CUDNN_LIBRARY=$W; else unset TRACER_CUDNN_LIBRARY; fi
  TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 90 $T run $G --bench 2 --device cuda > $OUT/prof_$lib.txt 2>&1
  python3 - $OUT/prof_$lib.txt $lib <<'PY'
import re, sys
text = open(sys.argv[1]).read()
tot = float(re.search(r"total ([\d.]+) ms", text).group(1))
rows = re.findall(r"^#\s+([\d.]+) ms\s+\d+x\s+(.*)$", text, re.M)
att = sum(float(ms) for ms, what in rows if "attention" in what)
print("%s: profile total %.3f ms, attention %.3f ms = %.1f%%; %s" % (sys.argv[2], tot, att, 100 * att / tot,
      "; ".join("%s %s" % (ms, w) for ms, w in rows if "attention" in w)))
PY
  timeout 60 $T run $G --bench 9 --device cuda --cuda-graph --json > $OUT/g.json 2>/dev/null
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[2], 'step median', round(j['bench']['median_ms'],3), 'ms, attention paths', j['attention'])" $OUT/g.json $lib
done
