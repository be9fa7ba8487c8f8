#!/usr/bin/env bash
# Session 7 call 4: the GPU test suite on this session's final build (DGELU epilogue where no
# bias gradient is fused with it; fuse_reorder's sideways move putting remat's GELU into the GELU
# backward's column kernel), the check against PyTorch, the profile's rows, and the table: the GPT
# step (and with checkpoint) interleaved with torch.compile, llama_mlp.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
start=$(date +%s)
timeout 330 tests/gpu/run.sh $T > $OUT/gpu_tests.txt 2>&1; rc=$?
echo "tests/gpu/run.sh rc=$rc in $(( $(date +%s) - start )) s: $(grep -c '^ok' $OUT/gpu_tests.txt) ok lines, $(grep -c 'FAIL' $OUT/gpu_tests.txt) FAIL lines; $(tail -1 $OUT/gpu_tests.txt | cut -c1-150)"
grep "FAIL" $OUT/gpu_tests.txt | head -8 | cut -c1-200
timeout 100 python3 bench/gpt_check.py $T --size small --devices cuda 2>&1 | tail -1
timeout 60 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
G="examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used"
TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 90 $T run $G --bench 1 --device cuda > $OUT/prof.txt 2>&1
python3 - $OUT/prof.txt <<'PY'
import re, sys
rows = [l for l in open(sys.argv[1]) if re.match(r"#\s+[\d.]+ ms\s+[\d.]+ MB", l)]
tot = re.search(r"total ([\d.]+) ms", open(sys.argv[1]).read())
def ms(pat): return sum(float(l.split()[1]) for l in rows if re.search(pat, l))
print("profile total", tot and tot.group(1), "| GELU + GELU bwd + fc bias (12) %.3f | GELU recompute alone %.3f | matmul %.3f" % (
    ms(r"kernel fusion\d+ -> bw_t\d+ bf16\[8, 1024, 3072\]"), ms(r"gelu -> bw_"), ms(r"cublasLt")))
PY
timeout 170 python3 bench/ab_gpt.py $T --rounds 5 --runs 15 2>$OUT/ab.err | tee $OUT/ab.txt | python3 -c "
import json,sys
for l in sys.stdin:
  j=json.loads(l)
  print(j['round'], j['tracer_ms'], j['compile_ms'], j['ratio'], j['tracer_peak'], j['tracer_launches']) if 'round' in j else print(l.strip()[:200])"
timeout 110 python3 bench/ab_gpt.py $T --checkpoint --rounds 2 --runs 15 2>>$OUT/ab.err | tee $OUT/ab_ckpt.txt | python3 -c "
import json,sys
for l in sys.stdin:
  j=json.loads(l)
  print('ckpt', j['round'], j['tracer_ms'], j['compile_ms'], j['ratio'], j['tracer_peak'], j['tracer_launches']) if 'round' in j else print(l.strip()[:200])"
timeout 80 $T run examples/llama_mlp.trace --bench 9 --device cuda --json --passes grad,philox,remat,fuse_reorder,del_last_used --cuda-graph > $OUT/r.json 2>$OUT/r.err
python3 -c "
import json,sys; j=json.load(open(sys.argv[1])); b=j.get('bench',{})
print('llama_mlp median', round(b.get('median_ms', 0), 3), 'peak', j.get('device_peak_bytes'), 'est', j.get('estimated_peak_bytes'), 'launches', j.get('kernels_launched'))" $OUT/r.json || tail -3 $OUT/r.err
tail -2 $OUT/ab.err
echo "total $(( $(date +%s) - start )) s"
