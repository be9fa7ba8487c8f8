#!/usr/bin/env bash
# Session 6 call 5: why cuDNN's attention backward takes 0.18 ms a layer here against 0.148 in
# torch.compile's step: the profile's attention rows and the step, interleaved with torch.compile,
# with the qkv gradient's cat written by cuDNN (default) or after it (TRACER_ATTENTION_CAT=0),
# q/k/v read in place or copied (TRACER_ATTENTION_VIEWS=0), cuDNN 9.19, the heuristics' 2nd config.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
start=$(date +%s)
WHEEL=$(ls /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9 | head -1)
timeout 60 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
G="examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used"
prof() {
  local label=$1; shift
  env "$@" TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 90 $T run $G --bench 1 --device cuda > $OUT/prof_$label.txt 2>&1
  python3 - $OUT/prof_$label.txt $label <<'PY'
import re, sys
t = open(sys.argv[1]).read()
rows = [l for l in t.splitlines() if re.match(r"#\s+[\d.]+ ms\s+[\d.]+ MB", l)]
def ms(pat): return sum(float(l.split()[1]) for l in rows if re.search(pat, l))
tot = re.search(r"total ([\d.]+) ms", t)
print(sys.argv[2], "total", tot and tot.group(1), "attn fwd %.3f bwd %.3f, qkv cat/bias %.3f" % (ms(r"view attention|kernel attention ->"), ms(r"attention_backward"), ms(r"-> t\d+ bf16\[8, 1024, 2304\]|grad_qkv_b")))
PY
}
prof default
prof cat0 TRACER_ATTENTION_CAT=0
prof views0 TRACER_ATTENTION_VIEWS=0 TRACER_ATTENTION_CAT=0
prof wheel TRACER_CUDNN_LIBRARY=$WHEEL TRACER_CACHE_DIR=/tmp/trk_wheel
prof config1 TRACER_CUDNN_CONFIG=1 TRACER_CACHE_DIR=/tmp/trk_c1
echo "profiles done at $(( $(date +%s) - start )) s"
timeout 280 python3 bench/ab_gpt.py $T --rounds 2 --runs 15 --variant cat0:TRACER_ATTENTION_CAT=0 \
  --variant views0:TRACER_ATTENTION_VIEWS=0,TRACER_ATTENTION_CAT=0 2>$OUT/ab.err | tee $OUT/ab.txt | python3 -c "
import json,sys
for l in sys.stdin:
  j=json.loads(l)
  print(j['round'], j['variant'], j['tracer_ms'], j['compile_ms'], j['ratio']) if 'round' in j else print(j['variant'], 'median ratio', j['median_ratio'])"
tail -2 $OUT/ab.err
echo "total $(( $(date +%s) - start )) s"
