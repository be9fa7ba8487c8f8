#!/usr/bin/env bash
# Session 20 call 2: the printouts sessions 18-19 added, on cuda against the CPU (module prologue,
# DTensor backward, RNG state operators, nvFuser repro), and the 16-layer Llama-2 augmented
# forward on cuda, unfused and fused, with its time split (session 18's runs did not finish in
# 120 s; session 20 found summing the outputs one get() at a time took most of a CPU run's time).
# Carry [".dev"] after `strip -o .dev/tracer build/tracer` (.dev/corpus holds the printout).
set -uo pipefail
export T=.dev/tracer tmp=/tmp/s20 TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
mkdir -p $tmp
source bench/sessions/lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== Thunder's printouts of tests/thunder, cuda against the CPU"
check "prologue_module_params prologue" tests/thunder/prologue_module_params.txt --entry prologue
check "prologue_module_params computation" tests/thunder/prologue_module_params.txt --entry computation
check "dtensor_backward" tests/thunder/dtensor_backward.txt --entry backward_fn
check "rng_state_2024" tests/thunder/rng_state_2024.txt
check "rng_state_mid2024" tests/thunder/rng_state_mid2024.txt --entry augmented_forward_fn
for f in ../shared/thunder_traces/*.txt; do check "$(basename $f)" $f; done
for args in "tests/thunder/dtensor_ops.txt --world-size 3 --rank 1" "tests/thunder/dtensor_prims.txt --world-size 2 --rank 1 --type l_x_=f32[3,4] --type l_w_=f32[3,4]"; do
  rm -rf $tmp/cpu $tmp/gpu
  $T run $args --output $tmp/cpu > $tmp/c.log 2>&1 && $T run $args --device cuda --output $tmp/gpu > $tmp/g.log 2>&1 \
    && python3 tests/gpu/compare.py $tmp/cpu/rank1 $tmp/gpu/rank1 "${args%% *}" | tail -2 || { echo "FAIL $args"; tail -3 $tmp/c.log $tmp/g.log; }
done
echo "== nvFuser repro script on cuda (prints its own checks)"
timeout 60 $T run tests/lang/nvfuser_repro.trace --device cuda 2>&1 | head -4
echo "== Llama-2 16 layers (augmented forward), cuda"
L=.dev/corpus/02_llama2_16layer_augmented_forward.txt
LT="--type t1=f32[4096,128] --type t2=f32[4096,128] --type t117=bf16[32000,4096]"
for p in "" "fuse,del_last_used"; do
  pa=(); [ -n "$p" ] && pa=(--passes $p)
  timeout 100 $T mem $L $LT --device cuda "${pa[@]}" 2>&1 | tail -1
  /usr/bin/time -f "wall %e s, host max RSS %M KB" timeout 150 $T run $L $LT --device cuda "${pa[@]}" --json > $tmp/l${p:+f}.json 2>$tmp/l.err
  tail -2 $tmp/l.err | cut -c1-300
  python3 - $tmp/l${p:+f}.json "${p:-unfused}" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print("%-20s trace %.0f ms  passes %.0f ms  run %.0f ms  compile wall %s ms  device peak %.3f GiB  outputs %d  launches %s" % (
    sys.argv[2], j.get("trace_ms", 0), j.get("passes_ms", 0), j.get("run_ms", 0), j.get("compile_wall_ms"),
    j.get("device_peak_bytes", 0) / 2**30, len(j["outputs"]), j.get("kernels_launched")))
PY
done
python3 - $tmp/l.json $tmp/lf.json <<'PY'
import json, sys, math
a, b = (json.load(open(p))["outputs"] for p in sys.argv[1:3])
worst = (0, "")
bad = 0
for x, y in zip(a, b):
    if "sum" not in x: continue
    d = abs(x["sum"] - y["sum"]) / max(1.0, abs(x["sum"]))
    h = max([abs(u - v) / max(1.0, abs(u)) for u, v in zip(x.get("head", []), y.get("head", []))] or [0])
    if max(d, h) > worst[0]: worst = (max(d, h), x["name"])
    if not math.isfinite(y["sum"]) or max(d, h) > 2e-2: bad += 1
print("fused against unfused: %d outputs, %d differ by more than 2e-2 (relative, sums and first values); worst %.2e (%s)" % (len(a), bad, worst[0], worst[1]))
PY
