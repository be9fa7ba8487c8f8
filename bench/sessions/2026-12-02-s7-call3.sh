#!/usr/bin/env bash
# Session 7 call 3: DGELU with the bias gradient's column kernel after it (the default now;
# TRACER_DGELU_EPILOGUE=bgrad keeps cuBLASLt's DGELU_BGRAD, 0 turns both off). Checks against the
# CPU and PyTorch, the probe, repeatability with tracer's attention kernels, and the step
# interleaved with torch.compile for the three settings.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
start=$(date +%s)
tmp=$(mktemp -d)
check() {
  local label=$1; shift
  rm -rf $tmp/cpu $tmp/gpu
  $T run "$@" --output $tmp/cpu > $tmp/c.log 2>&1 || { echo "FAIL $label CPU"; tail -3 $tmp/c.log; return; }
  $T run "$@" --device cuda --output $tmp/gpu > $tmp/g.log 2>&1 || { echo "FAIL $label GPU"; tail -3 $tmp/g.log; return; }
  python3 tests/gpu/compare.py $tmp/cpu $tmp/gpu "$label" > $tmp/cmp.log 2>/dev/null
  echo "$(grep -c '^ok' $tmp/cmp.log) ok, $(grep -c '^FAIL' $tmp/cmp.log) FAIL, dgelu $(grep -o '[0-9]* with the GELU backward.s' $tmp/g.log | cut -d' ' -f1): $label"; grep '^FAIL' $tmp/cmp.log | head -3 | cut -c1-160
}
for mode in 1 bgrad; do
  for p in grad,del_last_used grad,philox,remat,fuse,del_last_used grad,remat,fuse_reorder,del_last_used; do
    for e in main backward_f16 backward_f32 backward_odd; do TRACER_DGELU_EPILOGUE=$mode check "$mode epilogue $e $p" tests/gpu/epilogue.trace --entry $e --passes $p; done
  done
done
python3 -c "import sys; sys.path.insert(0, 'bench'); import gpt_torch as g; g.save_safetensors(sys.argv[1], g.make_inputs(2, 128, 512, 128, 4, 2, device='cpu'))" $tmp/gpt.safetensors
for p in grad,remat,fuse,del_last_used grad,remat,fuse_reorder,del_last_used grad,checkpoint,remat,fuse_reorder,del_last_used; do
  check "gpt T=128 $p" examples/gpt.trace --set B=2 --set T=128 --set V=512 --set D=128 --set NH=4 --set L=2 --input $tmp/gpt.safetensors --passes $p
done
timeout 150 python3 bench/gpt_check.py $T --size small 2>&1 | tail -2
echo "checks done at $(( $(date +%s) - start )) s"
for mode in 1 bgrad 0; do
  TRACER_DGELU_EPILOGUE=$mode TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 120 $T run bench/dgelu_probe.trace --entry dgelu_bgrad --passes fuse,del_last_used --device cuda --bench 1 > $tmp/p.txt 2>&1
  python3 - $tmp/p.txt "probe $mode" <<'PY'
import re, sys
rows = [l for l in open(sys.argv[1]) if re.match(r"#\s+[\d.]+ ms\s+[\d.]+ MB", l)]
def ms(pat): return sum(float(l.split()[1]) for l in rows if re.search(pat, l))
print("%-12s matmuls %.3f ms | kernels %.3f ms | %d rows" % (sys.argv[2], ms(r"cublasLt"), ms(r"kernel "), len(rows)))
PY
done
timeout 60 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
G="examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used"
rep() {  # label, env..., --, args: two runs, exact comparison
  local label=$1; shift
  local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  for r in 1 2; do rm -rf $tmp/rep$r; env "${envs[@]}" timeout 120 $T run "$@" --device cuda --output $tmp/rep$r > /dev/null 2>$tmp/rep.log || tail -3 $tmp/rep.log; done
  python3 tests/gpu/compare.py --exact $tmp/rep1 $tmp/rep2 "$label" > $tmp/cmp.log 2>&1
  echo "repeat $label: $(grep -c '^ok' $tmp/cmp.log) ok, $(grep -c '^FAIL' $tmp/cmp.log) FAIL; equal: $(grep '^ok' $tmp/cmp.log | awk '{print $3}' | tr '\n' ' ' | cut -c1-300)"
}
rep gpt-default X=1 -- $G --cuda-graph
rep gpt-tracer-attention TRACER_ATTENTION=tracer -- $G --cuda-graph
TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 90 $T run $G --bench 1 --device cuda > $OUT/prof.txt 2>&1
python3 - $OUT/prof.txt <<'PY'
import re, sys
rows = [l for l in open(sys.argv[1]) if re.match(r"#\s+[\d.]+ ms\s+[\d.]+ MB", l)]
tot = re.search(r"total ([\d.]+) ms", open(sys.argv[1]).read())
def ms(pat): return sum(float(l.split()[1]) for l in rows if re.search(pat, l))
print("profile total", tot and tot.group(1), "| dgelu matmuls %.3f | fc bias sums %.3f | GELU recompute %.3f | matmul %.3f" % (
    ms(r"cublasLt matmul -> t\d+ bf16\[8, 1024, 3072\]"), ms(r"-> grad_fc_b"), ms(r"gelu -> bw_"), ms(r"cublasLt")))
PY
grep "grad_fc_b\|8, 1024, 3072" $OUT/prof.txt | head -4 | cut -c1-150
timeout 330 python3 bench/ab_gpt.py $T --rounds 4 --runs 15 --variant nodgelu:TRACER_DGELU_EPILOGUE=0 --variant bgrad:TRACER_DGELU_EPILOGUE=bgrad 2>$OUT/ab.err | tee $OUT/ab.txt | python3 -c "
import json,sys
for l in sys.stdin:
  j=json.loads(l)
  print(j['round'], j['variant'], j['tracer_ms'], j['compile_ms'], j['ratio'], j['tracer_peak'], j['tracer_launches']) if 'round' in j else print(l.strip()[:200])"
tail -2 $OUT/ab.err
echo "total $(( $(date +%s) - start )) s"
