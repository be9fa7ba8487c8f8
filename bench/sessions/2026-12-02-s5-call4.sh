#!/usr/bin/env bash
# Session 5 call 4: the GPU test suite (tests/gpu/run.sh) on this session's build, then the
# table: the GPT step (and with checkpoint), llama_mlp, PyTorch eager and torch.compile (and
# with checkpoint) in the same call; a gated profile's summary.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
start=$(date +%s)
timeout 330 tests/gpu/run.sh $T > $OUT/gpu_tests.txt 2>&1; rc=$?
echo "tests/gpu/run.sh rc=$rc in $(( $(date +%s) - start )) s: $(grep -c '^ok' $OUT/gpu_tests.txt) ok lines, $(grep -c 'FAIL' $OUT/gpu_tests.txt) FAIL lines; $(tail -1 $OUT/gpu_tests.txt)"
grep "FAIL" $OUT/gpu_tests.txt | head -8 | cut -c1-200
timeout 40 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors 2>/dev/null | tail -1 | cut -c1-150
row() {  # label, file, args
  local label=$1 f=$2; shift 2
  timeout 100 $T run $f --bench 9 --device cuda --json "$@" > $OUT/r.json 2>$OUT/r.err
  python3 -c "
import json,sys; j=json.load(open(sys.argv[1])); b=j.get('bench',{})
print(sys.argv[2], 'median', round(b.get('median_ms', 0), 3), 'min', round(b.get('min_ms', 0), 3), 'peak', j.get('device_peak_bytes'), 'est', j.get('estimated_peak_bytes'), 'launches', j.get('kernels_launched'))" $OUT/r.json "$label" || tail -5 $OUT/r.err
}
G="examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used --cuda-graph"
row gpt $G
row gpt $G
timeout 100 python3 bench/torch_twins.py gpt compile 2>/dev/null | tail -1 | cut -c1-170
row gpt $G
row gpt_ckpt examples/gpt.trace --input /tmp/gpt.safetensors --set CHECKPOINT=1 --passes grad,checkpoint,remat,fuse_reorder,del_last_used --cuda-graph
timeout 100 python3 bench/torch_twins.py gpt compile --checkpoint 2>/dev/null | tail -1 | cut -c1-170
row llama_mlp examples/llama_mlp.trace --passes grad,philox,remat,fuse_reorder,del_last_used --cuda-graph
TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=30 timeout 60 $T run examples/gpt.trace --input /tmp/gpt.safetensors --bench 1 --device cuda \
  --passes grad,remat,fuse_reorder,del_last_used > $OUT/tracer_profile.txt 2>&1
grep -A12 "GPU profile" $OUT/tracer_profile.txt | cut -c1-120
echo "total $(( $(date +%s) - start )) s"
