#!/usr/bin/env bash
# Session 7 call 2: call 1 found cuBLASLt's DGELU_BGRAD matmul at 0.23 ms in the GPT (the plain
# product 0.06), and the GPT's gradients not bitwise repeatable run to run. This probes the
# epilogue alone (bench/dgelu_probe.trace: with and without the bias gradient, more tuning
# candidates) and which outputs differ between two runs with the epilogue off.
set -uo pipefail
T=.dev/tracer
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
start=$(date +%s)
tmp=$(mktemp -d)
prof() {  # label, env assignments..., --, args
  local label=$1; shift
  local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  env TRACER_CACHE_DIR=$tmp/cache-$label "${envs[@]}" TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 120 $T run "$@" --device cuda --bench 1 > $tmp/p.txt 2>&1 || { tail -3 $tmp/p.txt; return; }
  python3 - $tmp/p.txt "$label" <<'PY'
import re, sys
rows = [l for l in open(sys.argv[1]) if re.match(r"#\s+[\d.]+ ms\s+[\d.]+ MB", l)]
def ms(pat): return sum(float(l.split()[1]) for l in rows if re.search(pat, l))
print("%-28s matmuls %.3f ms | other kernels %.3f ms | %d rows" % (sys.argv[2], ms(r"cublasLt"), ms(r"kernel "), len(rows)))
PY
}
rep() {  # label, env..., --, args: two runs, exact comparison
  local label=$1; shift
  local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  for r in 1 2; do rm -rf $tmp/rep$r; env TRACER_CACHE_DIR=$tmp/cache-rep "${envs[@]}" timeout 120 $T run "$@" --device cuda --output $tmp/rep$r > /dev/null 2>$tmp/rep.log || tail -3 $tmp/rep.log; done
  python3 tests/gpu/compare.py --exact $tmp/rep1 $tmp/rep2 "$label" > $tmp/cmp.log 2>&1
  echo "repeat $label: $(grep -c '^ok' $tmp/cmp.log) ok, $(grep -c '^FAIL' $tmp/cmp.log) FAIL: $(grep '^FAIL' $tmp/cmp.log | head -6 | awk '{print $2}' | tr '\n' ' ')"
}
P=bench/dgelu_probe.trace
prof bgrad-epilogue -- $P --entry dgelu_bgrad --passes fuse,del_last_used
prof bgrad-epilogue-32 TRACER_MATMUL_TUNE_CANDIDATES=32 -- $P --entry dgelu_bgrad --passes fuse,del_last_used
prof bgrad-off TRACER_DGELU_EPILOGUE=0 -- $P --entry dgelu_bgrad --passes fuse,del_last_used
prof dgelu-epilogue -- $P --entry dgelu --passes del_last_used
prof dgelu-epilogue-32 TRACER_MATMUL_TUNE_CANDIDATES=32 -- $P --entry dgelu --passes del_last_used
prof dgelu-off TRACER_DGELU_EPILOGUE=0 -- $P --entry dgelu --passes del_last_used
rep bgrad-epilogue -- $P --entry dgelu_bgrad --passes fuse,del_last_used
rep dgelu-epilogue -- $P --entry dgelu --passes del_last_used
rep bgrad-off TRACER_DGELU_EPILOGUE=0 -- $P --entry dgelu_bgrad --passes fuse,del_last_used
timeout 60 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
G="examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used"
rep gpt-off TRACER_DGELU_EPILOGUE=0 -- $G --cuda-graph
rep gpt-off-nograph TRACER_DGELU_EPILOGUE=0 -- $G
rep gpt-off-notune TRACER_DGELU_EPILOGUE=0 TRACER_MATMUL_TUNE=0 -- $G
echo "total $(( $(date +%s) - start )) s"
