#!/usr/bin/env bash
# Session 6 call 3: column groups load 4 rows a thread before computing (in-place outputs kept
# their loads behind the stores), and reduce f32 values in f32 over each batch (rows: each
# vector) before one conversion to double. Checks against the CPU, the profile's rows, and the
# step interleaved with torch.compile, online row sums on and off.
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
  echo "$(grep -c '^ok' $tmp/cmp.log) ok, $(grep -c '^FAIL' $tmp/cmp.log) FAIL: $label"; grep '^FAIL' $tmp/cmp.log | head -3 | cut -c1-160
}
for on in 0 1; do
  for p in "" fuse; do TRACER_ROWS_ONLINE=$on check "online=$on ops_rows $p" tests/gpu/ops.trace --entry ops_rows ${p:+--passes $p}; done
done
for e in ops_columns ops_column_views ops_reduce_f32 ops_reduce_lowp ops_f64 ops_views; do
  for p in "" fuse; do check "$e $p" tests/gpu/ops.trace --entry $e ${p:+--passes $p}; done
done
check "mlp fused" examples/mlp.trace --passes grad,remat,fuse,del_last_used
check "llama_mlp fused" examples/llama_mlp.trace --set T=64 --set D=128 --set H=256 --set L=2 --passes grad,philox,remat,fuse,del_last_used
python3 -c "import sys; sys.path.insert(0, 'bench'); import gpt_torch as g; g.save_safetensors(sys.argv[1], g.make_inputs(2, 128, 512, 128, 4, 2, device='cpu'))" $tmp/gpt.safetensors
for on in 0 1; do
  for p in grad,remat,fuse,del_last_used grad,remat,fuse_reorder,del_last_used; do
    TRACER_ROWS_ONLINE=$on check "online=$on gpt T=128 $p" examples/gpt.trace --set B=2 --set T=128 --set V=512 --set D=128 --set NH=4 --set L=2 --input $tmp/gpt.safetensors --passes $p
  done
done
timeout 120 python3 bench/gpt_check.py $T --size small 2>&1 | tail -1
TRACER_ROWS_ONLINE=1 timeout 120 python3 bench/gpt_check.py $T --size small 2>&1 | tail -1
echo "checks done at $(( $(date +%s) - start )) s"
timeout 60 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
G="examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used"
prof() {  # label, env...
  local label=$1; shift
  env "$@" TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 90 $T run $G --bench 1 --device cuda > $OUT/prof_$label.txt 2>&1
  python3 - $OUT/prof_$label.txt $label <<'PY'
import re, sys
rows = [l for l in open(sys.argv[1]) if re.match(r"#\s+[\d.]+ ms\s+[\d.]+ MB", l)]
tot = re.search(r"total ([\d.]+) ms", open(sys.argv[1]).read())
def ms(pat): return sum(float(l.split()[1]) for l in rows if re.search(pat, l))
print(sys.argv[2], "total", tot and tot.group(1), "| CE fwd %.3f bwd %.3f | bias/norm columns %.3f | GELU bwd %.3f | LN rows %.3f | attn fwd %.3f bwd %.3f | matmul %.3f" % (
    ms(r"f32\[8192, 1\]"), ms(r"bf16\[8192, 50304\]") - ms(r"cublasLt.*bf16\[8192, 50304\]"), ms(r"kernel fusion\d+ -> grad_(out|proj)_b"),
    ms(r"kernel fusion\d+ -> t\d+ bf16\[8, 1024, 3072\]"), ms(r"kernel fusion\d+ -> t\d+ f32\[8, 1024, 1\]"), ms(r"view attention|kernel attention ->"), ms(r"attention_backward"), ms(r"cublasLt")))
PY
}
prof default
prof online TRACER_ROWS_ONLINE=1
echo "profiles done at $(( $(date +%s) - start )) s"
timeout 400 python3 bench/ab_gpt.py $T --rounds 3 --runs 15 --variant online:TRACER_ROWS_ONLINE=1 2>$OUT/ab.err | tee $OUT/ab.txt | grep -v '"round"' | cut -c1-130
grep '"round"' $OUT/ab.txt | python3 -c "
import json,sys
for l in sys.stdin: j=json.loads(l); print(j['round'], j['variant'], j['tracer_ms'], j['compile_ms'], j['ratio'], j['tracer_peak'], j['tracer_launches'])"
tail -2 $OUT/ab.err
echo "total $(( $(date +%s) - start )) s"
