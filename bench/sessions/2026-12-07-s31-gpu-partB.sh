#!/usr/bin/env bash
# GPU tests (ctest label "gpu"): every example, with and without the training pipeline, runs on
# the CPU and on cuda:0 and the outputs (loss and every gradient) must agree within their dtype's
# tolerance (tests/gpu/compare.py). Needs a GPU; scripts/test.sh runs it only where nvidia-smi
# finds one. Usage: tests/gpu/run.sh [TRACER]
set -uo pipefail
cd "$(dirname "$0")/../.."
TRACER=${1:-build/tracer}
SMALL_SETS="T=64 L=2 D=128 H=256 R=64 C=256 B=4 N=32 NH=4 V=512"
small() {  # the small sizes a file names (tracer refuses --set for a name its file never mentions)
  local out=()
  for kv in $SMALL_SETS; do grep -qw "${kv%%=*}" "$1" && out+=(--set "$kv"); done
  echo "${out[@]}"
}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
check() {  # label, CPU args..., --, GPU extra args...
  local label=$1; shift
  local cpu=() extra=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do cpu+=("$1"); shift; done
  shift; extra=("$@")
  rm -rf "$tmp/cpu" "$tmp/gpu"
  "$TRACER" run "${cpu[@]}" --output "$tmp/cpu" >"$tmp/cpu.log" 2>&1 || { echo "FAIL $label: CPU"; cat "$tmp/cpu.log"; fail=1; return; }
  "$TRACER" run "${cpu[@]}" --device cuda "${extra[@]}" --output "$tmp/gpu" >"$tmp/gpu.log" 2>&1 || { echo "FAIL $label: GPU"; cat "$tmp/gpu.log"; fail=1; return; }
  grep "^#" "$tmp/gpu.log" | sed "s|^|   $label |" | tail -3
  python3 tests/gpu/compare.py "$tmp/cpu" "$tmp/gpu" "$label" || fail=1
  if grep -q "^warning" "$tmp/gpu.log"; then echo "FAIL $label: $(grep '^warning' "$tmp/gpu.log")"; fail=1; fi
}
SYSTEM_CUDNN=${TRACER_CUDNN_LIBRARY:-}
for w in /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9; do
  [ -z "${TRACER_CUDNN_LIBRARY:-}" ] && [ -e "$w" ] && export TRACER_CUDNN_LIBRARY=$w
done
for f in examples/*.trace; do
  [ "$(basename "$f")" = gpt.trace ] && continue  # below, on its own data
  [ "$(basename "$f")" = train_gpt.trace ] && continue  # a training script: no outputs to compare
  f32=(); [ "$(basename "$f")" = llama2_7b.trace ] && f32=(--set F32=1)  # (its bf16 rounding, as above)
  check "$(basename "$f") cuda-graph" "$f" $(small "$f") "${f32[@]}" --passes grad,philox,remat,fuse,del_last_used -- --cuda-graph --bench 2
done
check "examples/chain.trace 2^22 elements cuda-graph" examples/chain.trace --entry chain --passes philox,fuse --set R=1024 --set C=4096 -- --cuda-graph
check "bench/launch.trace cuda-graph" bench/launch.trace -- --cuda-graph --bench 3
# A gather with indices out of range fails the run with a clear message (random indices lie
# in [0, 16), the table has 8 rows), eagerly and under --cuda-graph.
# (Random indices are drawn below what they index, so the bad ones are made: i + 8.)
printf 'def f(t: f32[8, 4], i: i64[64]):\n    return prims.take(t, i + 8, 0)\n' >"$tmp/bad_index.trace"
for extra in "" "--cuda-graph"; do
  if "$TRACER" run "$tmp/bad_index.trace" --device cuda $extra >"$tmp/bad.log" 2>&1; then
    echo "FAIL bad index $extra: the run succeeded"; fail=1
  elif ! grep -q "is out of range for 8 rows" "$tmp/bad.log"; then
    echo "FAIL bad index $extra: no clear message"; cat "$tmp/bad.log"; fail=1
  else
    echo "ok   bad index $extra: $(grep -o 'index -*[0-9]* is out of range for 8 rows' "$tmp/bad.log")"
  fi
done
# A program that needs the CPU for a statement (an integer matmul) is not captured: a warning,
# and the run goes on without a graph, its outputs still right.
rm -rf "$tmp/cpu" "$tmp/gpu"
"$TRACER" run tests/cli/int_matmul.trace --output "$tmp/cpu" >"$tmp/cpu.log" 2>&1
if "$TRACER" run tests/cli/int_matmul.trace --device cuda --cuda-graph --output "$tmp/gpu" >"$tmp/gpu.log" 2>&1 &&
   grep -q "was not captured" "$tmp/gpu.log"; then
  python3 tests/gpu/compare.py "$tmp/cpu" "$tmp/gpu" "int_matmul.trace uncapturable --cuda-graph" || fail=1
else
  echo "FAIL int_matmul.trace uncapturable --cuda-graph: no warning or a failed run"; cat "$tmp/gpu.log"; fail=1
fi
# The GPT (examples/gpt.trace, small, bf16) under every pipeline docs/passes.md recommends,
# against the CPU; with checkpoint regions too. Then once with TRACER_GPU_CHECK=2 (every statement
# against the CPU from the GPU's own inputs, and every live value watched for being overwritten),
# and against PyTorch's float32 math on the same data (bench/gpt_check.py; issue 12's bug gave
# errors of 1e5 on the bias and norm gradients under remat,fuse,del_last_used).
GPT="--set B=2 --set T=64 --set V=512 --set D=128 --set NH=4 --set L=2"
# GPT-2's initialisation (bench/gpt_torch.py), written once for every check.
python3 -c "import sys; sys.path.insert(0, 'bench'); import gpt_torch as g; g.save_safetensors(sys.argv[1], g.make_inputs(2, 64, 512, 128, 4, 2, device='cpu'))" "$tmp/gpt.safetensors" ||
  { echo "FAIL gpt.trace: could not write its inputs"; fail=1; }
GPT="$GPT --input $tmp/gpt.safetensors"
check "gpt.trace forward" examples/gpt.trace $GPT --
check "gpt.trace cuda-graph" examples/gpt.trace $GPT --passes grad,philox,remat,fuse,del_last_used -- --cuda-graph --bench 2
for passes in grad,del_last_used grad,fuse,del_last_used grad,remat,del_last_used grad,remat,fuse,del_last_used \
              grad,remat,fuse_reorder,del_last_used grad,philox,remat,fuse,del_last_used; do
  check "gpt.trace $passes" examples/gpt.trace $GPT --passes $passes --
done
for passes in grad,checkpoint,remat,fuse,del_last_used grad,checkpoint,remat,fuse_reorder,del_last_used; do
  check "gpt.trace CHECKPOINT=1 $passes" examples/gpt.trace $GPT --set CHECKPOINT=1 --passes $passes --
done
# Operands read in place (on by default; TRACER_ATTENTION_VIEWS=0 turns it off):
# q, k and v (and the output gradient) read by cuDNN out of the fusions' inputs, against the CPU;
# and the runs must have read some in place.
for passes in grad,philox,remat,fuse,del_last_used grad,fuse,del_last_used; do
  TRACER_ATTENTION_VIEWS=1 check "attention.trace attention_causal $passes views" tests/gpu/attention.trace --entry attention_causal --passes $passes --
done
for passes in grad,fuse,del_last_used grad,remat,fuse_reorder,del_last_used; do
  TRACER_ATTENTION_VIEWS=1 check "gpt.trace $passes views" examples/gpt.trace $GPT --passes $passes --
done
TRACER_ATTENTION_VIEWS=1 check "gpt.trace CHECKPOINT=1 views" examples/gpt.trace $GPT --set CHECKPOINT=1 --passes grad,checkpoint,remat,fuse_reorder,del_last_used --
for args in "tests/gpu/attention.trace --entry attention_causal" "examples/gpt.trace $GPT"; do
  TRACER_ATTENTION_VIEWS=1 "$TRACER" run $args --passes grad,remat,fuse,del_last_used --device cuda --json > "$tmp/v.json" 2>/dev/null
  n=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['attention']['fusions_read_in_place'])" "$tmp/v.json" 2>/dev/null || echo 0)
  if [ "${n:-0}" -gt 0 ]; then echo "ok   views: $n fusions read in place ($args)"; else echo "FAIL views: none read in place ($args)"; fail=1; fi
done
# Attention outputs written transposed (as the output projection reads them; on by default,
# TRACER_ATTENTION_OUT_LAYOUT=0 writes them packed): at T=64 cuDNN 9.14 runs no backward, so
# tracer's kernels take the output put back packed; at T=128 cuDNN's backward reads it strided.
python3 -c "import sys; sys.path.insert(0, 'bench'); import gpt_torch as g; g.save_safetensors(sys.argv[1], g.make_inputs(2, 128, 512, 128, 4, 2, device='cpu'))" "$tmp/gpt128.safetensors"
GPT128="--set B=2 --set T=128 --set V=512 --set D=128 --set NH=4 --set L=2 --input $tmp/gpt128.safetensors"
for passes in grad,remat,fuse_reorder,del_last_used grad,checkpoint,remat,fuse_reorder,del_last_used; do
  ck=$([ "${passes#grad,checkpoint}" != "$passes" ] && echo "--set CHECKPOINT=1")
  check "gpt.trace T=128 $passes" examples/gpt.trace $GPT128 $ck --passes $passes --
  TRACER_ATTENTION_OUT_LAYOUT=0 check "gpt.trace T=128 $passes packed outputs" examples/gpt.trace $GPT128 $ck --passes $passes --
done
for args in "$GPT" "$GPT128"; do
  "$TRACER" run examples/gpt.trace $args --passes grad,remat,fuse_reorder,del_last_used --device cuda --json > "$tmp/v.json" 2>/dev/null
  n=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['attention']['outputs_written_transposed'])" "$tmp/v.json" 2>/dev/null || echo 0)
  if [ "${n:-0}" -gt 0 ]; then echo "ok   attention outputs written transposed: $n ($args)"; else echo "FAIL no attention output written transposed ($args)"; fail=1; fi
done
for passes in grad,remat,fuse,del_last_used grad,checkpoint,remat,fuse_reorder,del_last_used; do
  if TRACER_GPU_CHECK=2 "$TRACER" run examples/gpt.trace $GPT --set CHECKPOINT=1 --passes $passes --device cuda >"$tmp/chk.log" 2>&1; then
    echo "ok   gpt.trace TRACER_GPU_CHECK=2 $passes: $(grep -c 'outputs compared' "$tmp/chk.log") traces, $(grep -o '[0-9]* outputs compared' "$tmp/chk.log" | tr '\n' ' ')"
  else
    echo "FAIL gpt.trace TRACER_GPU_CHECK=2 $passes"; grep "gpu-check\|error" "$tmp/chk.log" | head -20; fail=1
  fi
done
if python3 -c "import torch" 2>/dev/null; then
  python3 bench/gpt_check.py "$TRACER" --size small || fail=1
  python3 bench/gpt_check.py "$TRACER" --size wide || fail=1
else
  echo "FAIL bench/gpt_check.py: PyTorch is not installed"; fail=1
fi
# The stateful uniform (dropout without the philox pass) draws on the device: the CPU's numbers,
# eagerly and captured in a graph whose replays draw anew.
for extra in "" "--cuda-graph"; do
  check "chain.trace stateful uniform $extra" examples/chain.trace --entry chain --set R=64 --set C=96 -- $extra
done
[ $fail = 0 ] && echo "GPU TESTS PASSED" || echo "GPU TESTS FAILED"
exit $fail
