#!/usr/bin/env bash
# Session 8 call 6: the collectives and ddp on a GPU run with a world of one (no job: each value
# its own; the device machine has no Gloo and tracer no NCCL yet, so no job of more ranks), against
# the CPU; then the GPT and bench/attention.trace once more on this build (distribution types,
# the collectives in the op table), to see nothing moved.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
tmp=$(mktemp -d)
. bench/sessions/lib.sh
check "dist collectives, world of one" tests/dist/collectives.trace
check "dist grad, world of one" tests/dist/grad.trace --passes grad,remat,fuse,del_last_used
check "ddp, world of one" tests/dist/ddp.trace --passes grad,ddp,remat,fuse,del_last_used
check "types, world of one" tests/dist/types.trace --passes grad,del_last_used
$T run tests/dist/collectives.trace --device cuda 2>&1 | grep -v "^#" | head -3
timeout 60 $T run bench/attention.trace --passes grad,remat,fuse,del_last_used --device cuda --bench 20 --json --cuda-graph > $tmp/a.json 2>/dev/null
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('attention.trace median', round(j['bench']['median_ms'],3), 'launches', j['kernels_launched'])" $tmp/a.json
timeout 150 python3 bench/ab_gpt.py $T --rounds 2 --runs 15 2>/dev/null | python3 -c "
import json,sys
for l in sys.stdin:
  j=json.loads(l)
  print(j['round'], j['tracer_ms'], j['compile_ms'], j['ratio'], j['tracer_peak'], j['tracer_launches']) if 'round' in j else print(l.strip()[:200])"
