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
for f in examples/*.trace; do
  # The GPT is checked below on data it is meant for (uniform [-1, 1) weights make its deep
  # layers' gradients ill-conditioned: bf16 rounding differences grow past any tolerance).
  [ "$(basename "$f")" = gpt.trace ] && continue
  for passes in "" "grad,philox,remat,del_last_used" "grad,checkpoint,philox,remat,fuse,del_last_used"; do
    label="$(basename "$f") ${passes:-no passes}"
    args=($(small "$f"))
    # The small Llama-2's bf16 gradients differ from the CPU's by its own rounding (uniform
    # weights; up to 6.7e-2 against 2e-2, with and without passes, bench/results/2026-12-02-h200-nccl-s9.md):
    # it is compared in f32.
    [ "$(basename "$f")" = llama2_7b.trace ] && args+=(--set F32=1)
    [ -n "$passes" ] && args+=(--passes "$passes")
    rm -rf "$tmp/cpu" "$tmp/gpu"
    if ! "$TRACER" run "$f" "${args[@]}" --output "$tmp/cpu" >"$tmp/cpu.log" 2>&1; then
      if grep -q "grad needs\|no input requires" "$tmp/cpu.log"; then continue; fi
      echo "FAIL $label: the CPU run failed"; cat "$tmp/cpu.log"; fail=1; continue
    fi
    if ! "$TRACER" run "$f" "${args[@]}" --device cuda --output "$tmp/gpu" >"$tmp/gpu.log" 2>&1; then
      echo "FAIL $label: the GPU run failed"; cat "$tmp/gpu.log"; fail=1; continue
    fi
    grep "^#" "$tmp/gpu.log" | sed "s|^|   $label |" | tail -2
    python3 tests/gpu/compare.py "$tmp/cpu" "$tmp/gpu" "$label" || fail=1
  done
done
# Every elementwise primitive on every dtype, reductions, broadcasts, matmuls and fallbacks
# (tests/gpu/ops.trace), one kernel per op and fused.
for e in ops_f32 ops_unary_more ops_special ops_thunder_more ops_bitcast ops_thunder_shape ops_bf16 ops_f16 ops_f64 ops_i32 ops_i64 ops_i8 ops_u8 ops_b8 ops_reduce_f32 ops_reduce_lowp ops_broadcast ops_matmul ops_layout ops_views ops_fallback ops_gather ops_gather_long ops_round ops_rows ops_columns ops_rows_columns ops_total ops_column_views ops_slice_views ops_scatter_reduce ops_pads; do
  for passes in "" "fuse"; do
    label="ops.trace $e ${passes:-no passes}"
    args=(--entry "$e")
    [ -n "$passes" ] && args+=(--passes "$passes")
    rm -rf "$tmp/cpu" "$tmp/gpu"
    "$TRACER" run tests/gpu/ops.trace "${args[@]}" --output "$tmp/cpu" >"$tmp/cpu.log" 2>&1 || { echo "FAIL $label: CPU"; cat "$tmp/cpu.log"; fail=1; continue; }
    "$TRACER" run tests/gpu/ops.trace "${args[@]}" --device cuda --output "$tmp/gpu" >"$tmp/gpu.log" 2>&1 || { echo "FAIL $label: GPU"; cat "$tmp/gpu.log"; fail=1; continue; }
    grep "^#" "$tmp/gpu.log" | sed "s|^|   $label |" | tail -1
    python3 tests/gpu/compare.py $( { [ "$e" = ops_round ] || [ "$e" = ops_bitcast ] || [ "$e" = ops_gather_long ]; } && echo --exact) "$tmp/cpu" "$tmp/gpu" "$label" || fail=1
  done
done
# The special functions, gathers and sorts against PyTorch on the same data (where torch is).
if python3 -c "import torch, safetensors" 2>/dev/null; then
  python3 tests/gpu/special_torch.py "$TRACER" cuda | grep -v "^ok" ; [ "${PIPESTATUS[0]}" = 0 ] || { echo "FAIL special_torch.py"; fail=1; }
  # Convolutions (prims.convolution's windows and products) and their gradients against torch's.
  python3 tests/gpu/conv_torch.py "$TRACER" cuda; [ $? = 0 ] || { echo "FAIL conv_torch.py"; fail=1; }
  # Thunder's executors' operators (stdlib/executors.trace) and grid_sample against ATen's kernels.
  python3 tests/gpu/executors_torch.py "$TRACER" cuda | grep -v "^ok" ; [ "${PIPESTATUS[0]}" = 0 ] || { echo "FAIL executors_torch.py"; fail=1; }
  # In-place ops through views (prims.copy_, update_aliases) against PyTorch's writes into memory.
  python3 tests/gpu/inplace_torch.py "$TRACER" cuda; [ $? = 0 ] || { echo "FAIL inplace_torch.py"; fail=1; }
fi
# take_backward added in place into a dying addend (needs the dels of del_last_used); the stats
# must show the in-place path ran.
for passes in "del_last_used" "fuse,del_last_used"; do
  label="ops.trace ops_gather_add $passes"
  rm -rf "$tmp/cpu" "$tmp/gpu"
  "$TRACER" run tests/gpu/ops.trace --entry ops_gather_add --passes "$passes" --output "$tmp/cpu" >"$tmp/cpu.log" 2>&1 || { echo "FAIL $label: CPU"; cat "$tmp/cpu.log"; fail=1; continue; }
  "$TRACER" run tests/gpu/ops.trace --entry ops_gather_add --passes "$passes" --device cuda --json --output "$tmp/gpu" >"$tmp/gpu.json" 2>"$tmp/gpu.log" || { echo "FAIL $label: GPU"; cat "$tmp/gpu.log"; fail=1; continue; }
  python3 -c "import json,sys; n=json.load(open(sys.argv[1]))['take_backward_adds_in_place']; print('   $label: adds in place', n); sys.exit(0 if n == 4 else 1)" "$tmp/gpu.json" || { echo "FAIL $label: not every take_backward ran into its addend"; fail=1; }
  python3 tests/gpu/compare.py --exact "$tmp/cpu" "$tmp/gpu" "$label" || fail=1
done
# Attention (the fused flash kernels; with a mask, cuBLASLt and generated kernels), forward and
# backward; and whole programs captured as CUDA graphs (--cuda-graph): the outputs of the first
# replay against the CPU, random numbers included.
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
# Online sums of exponentials (on by default for rows over 4096 elements): the special-value rows
# with every row online (TRACER_ROWS_ONLINE=1) and with none (0).
TRACER_ROWS_ONLINE=1 check "ops.trace ops_rows fuse online" tests/gpu/ops.trace --entry ops_rows --passes fuse --
TRACER_ROWS_ONLINE=0 check "ops.trace ops_rows fuse two-pass" tests/gpu/ops.trace --entry ops_rows --passes fuse --
# Batch-one shapes ([1, T, C]) fused: the GPU's kernels against the CPU's blocks.
for passes in "grad,philox,del_last_used" "grad,philox,fuse,del_last_used"; do
  check "batch_one.trace $passes" tests/gpu/batch_one.trace --passes "$passes" --
done
# Thunder's printouts of tests/thunder on cuda against the CPU: a module's prologue and its
# computation, a DTensor backward (local tensors), the 2024 and mid-2024 RNG state operators (the
# same philox numbers on both devices), a backward with collections.
check "prologue_module_params.txt prologue" tests/thunder/prologue_module_params.txt --entry prologue --
check "prologue_module_params.txt computation" tests/thunder/prologue_module_params.txt --entry computation --
check "dtensor_backward.txt" tests/thunder/dtensor_backward.txt --entry backward_fn --
check "rng_state_2024.txt" tests/thunder/rng_state_2024.txt --
check "rng_state_mid2024.txt" tests/thunder/rng_state_mid2024.txt --entry augmented_forward_fn --
# A tensor-parallel MLP's DTensor prims on rank 1 of 2 (the pieces given by type; the outputs in
# rank1/), and torch._grouped_mm's three grouped forms under grad.
TP=(tests/thunder/dtensor_tp_prims.txt --world-size 2 --rank 1 --type "l_x_=f32[4, 6]" --type "l_w1_=f32[4, 6]"
    --type "l_b1_=f32[4]" --type "l_w2_=f32[5, 4]" --type "l_s_=f32[5]")
rm -rf "$tmp/cpu" "$tmp/gpu"
if "$TRACER" run "${TP[@]}" --output "$tmp/cpu" >"$tmp/cpu.log" 2>&1 && "$TRACER" run "${TP[@]}" --device cuda --output "$tmp/gpu" >"$tmp/gpu.log" 2>&1; then
  python3 tests/gpu/compare.py "$tmp/cpu/rank1" "$tmp/gpu/rank1" "dtensor_tp_prims.txt rank 1 of 2" || fail=1
else
  echo "FAIL dtensor_tp_prims.txt"; cat "$tmp/cpu.log" "$tmp/gpu.log"; fail=1
fi
check "grouped_mm.trace" tests/gpu/grouped_mm.trace --passes grad,fuse,del_last_used --
# Convolutions under grad, f32 and bf16, against the CPU.
for e in main bf16 bf16_smooth; do check "conv.trace $e" tests/gpu/conv.trace --entry $e --passes grad,fuse,del_last_used --; done
# Row reductions without keepdim (Thunder's prims) fused as row groups, under grad too.
check "rows_dropped_grad.trace" tests/gpu/rows_dropped_grad.trace --passes grad,fuse,del_last_used --
for f in fuse_rows_dropped fuse_rows_dropped_nvfusion; do check "$f.trace fuse" tests/pass_checks/$f.trace --passes fuse --; done
# Compiled functions in the language on the GPU (jit, value_and_grad, AdamW) against the CPU.
if "$TRACER" run tests/gpu/jit_cuda.trace > "$tmp/jit.log" 2>&1 && tail -1 "$tmp/jit.log" | grep -q "^ok$"; then
  echo "ok   jit_cuda.trace: compiled functions on cuda equal the CPU's"
else
  echo "FAIL jit_cuda.trace"; cat "$tmp/jit.log"; fail=1
fi
# The C API on the GPU: the embedding example's training step through tracer_call on cuda:0
# against the same on the CPU (HOST_C: the built tests/tracer_embed_host_c, if given).
if [ -n "${HOST_C:-}" ]; then
  if "$HOST_C" examples/embed/model.trace cuda > "$tmp/host.log" 2>&1 && grep -q "agrees" "$tmp/host.log"; then
    echo "ok   embedding C API on cuda: $(grep agrees "$tmp/host.log")"
  else
    echo "FAIL embedding C API on cuda"; cat "$tmp/host.log"; fail=1
  fi
fi
# cuBLASLt's GELU epilogue (tests/gpu/epilogue.trace): the outputs as above, and the run must say
# it used the epilogue.
for passes in "" "del_last_used" "grad,philox,remat,fuse,del_last_used"; do
  for e in main f32; do
    [ "$e" = f32 ] && [ "${passes#grad}" != "$passes" ] && continue  # f32 returns no loss
    label="epilogue.trace $e ${passes:-no passes}"
    check "$label" tests/gpu/epilogue.trace --entry $e ${passes:+--passes $passes} --
    grep -q "with the GELU epilogue" "$tmp/gpu.log" || { echo "FAIL $label: the GELU epilogue was not used"; fail=1; }
  done
done
# cuBLASLt's DGELU(_BGRAD) epilogue: the matmul giving a gelu's cotangent runs its gelu_backward;
# by default (auto) only where no bias gradient is fused with it (backward_f32; backward_f16's
# sum stays apart only without fuse), with TRACER_DGELU_EPILOGUE=apart or bgrad also there; a
# hidden width that is no multiple of 8 never. Under fuse_reorder as under fuse: remat's GELU
# joins the gelu_backward's fusion only where its guards allow (no rise of the estimated peak,
# no run split from its producer), which these small cases do not (the GPT's blocks do).
for mode in auto apart bgrad; do
  for passes in "grad,del_last_used" "grad,philox,remat,fuse,del_last_used" "grad,remat,fuse_reorder,del_last_used"; do
    for e in backward_f16 backward_f32 backward_odd; do
      label="epilogue.trace $e $passes TRACER_DGELU_EPILOGUE=$mode"
      TRACER_DGELU_EPILOGUE=$mode check "$label" tests/gpu/epilogue.trace --entry $e --passes $passes --
      used=$(grep -c "with the GELU backward's" "$tmp/gpu.log")
      want=1
      [ "$e" = backward_odd ] && want=0
      [ "$e" = backward_f16 ] && [ $mode = auto ] && [ "${passes#*fuse}" != "$passes" ] && want=0
      [ "$used" = "$want" ] || { echo "FAIL $label: the GELU backward's epilogue used: $used, expected $want"; fail=1; }
    done
  done
done
# Attention runs on cuDNN where the loaded cuDNN has an engine (docs/cudnn.md): these tests use
# the newest one there is ($TRACER_CUDNN_LIBRARY, else PyTorch's wheel's, else the system's), so
# that every case cuDNN can take goes there without a warning; then the system's cuDNN (warnings
# allowed: 9.14 has no backward for key lengths that are no multiple of 128) and tracer's own
# kernels (TRACER_ATTENTION=tracer) on the same cases.
SYSTEM_CUDNN=${TRACER_CUDNN_LIBRARY:-}
for w in /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9; do
  [ -z "${TRACER_CUDNN_LIBRARY:-}" ] && [ -e "$w" ] && export TRACER_CUDNN_LIBRARY=$w
done
if [ -n "${CUDNN_CHECK:-}" ]; then  # tests/gpu/cudnn_attention.cpp, built
  for lib in "${TRACER_CUDNN_LIBRARY:-}" "$SYSTEM_CUDNN"; do
    if TRACER_CUDNN_LIBRARY=$lib "$CUDNN_CHECK" > "$tmp/dnn.log" 2>&1; then
      echo "ok   cuDNN attention against the CPU: $(head -1 "$tmp/dnn.log"): $(tail -1 "$tmp/dnn.log")"
    else
      echo "FAIL cuDNN attention against the CPU ($lib)"; grep -v "^ok" "$tmp/dnn.log" | head -30; fail=1
    fi
  done
fi
ATTENTION_CASES="attention_causal attention_masked attention_heads64 attention_heads128 attention_heads20 attention_rows_f32
                 attention_rows_f64 attention_rows_wide attention_rows_ev attention_cudnn_d256 attention_cudnn_long
                 attention_mask_bool attention_mask_add attention_mask_keys attention_mask_padding attention_mask_padding_add"
for e in $ATTENTION_CASES; do
  for passes in "" "grad,philox,remat,del_last_used" "grad,philox,remat,fuse,del_last_used"; do
    args=(tests/gpu/attention.trace --entry "$e")
    [ -n "$passes" ] && args+=(--passes "$passes")
    check "attention.trace $e ${passes:-no passes}" "${args[@]}" --
    check "attention.trace $e ${passes:-no passes} cuda-graph" "${args[@]}" -- --cuda-graph
    TRACER_ATTENTION=tracer check "attention.trace $e ${passes:-no passes} tracer's kernels" "${args[@]}" --
  done
done
# A row with every key masked: NaN at the same places as the CPU's.
check "attention.trace attention_mask_empty_row" tests/gpu/attention.trace --entry attention_mask_empty_row --
TRACER_ATTENTION=tracer check "attention.trace attention_mask_empty_row tracer's kernels" tests/gpu/attention.trace --entry attention_mask_empty_row --
# Which path each case took: cuDNN for bf16/f16 heads of a multiple of 8, tracer's kernels else.
for e in $ATTENTION_CASES; do
  "$TRACER" run tests/gpu/attention.trace --entry "$e" --passes grad,del_last_used --device cuda --json > "$tmp/a.json" 2>"$tmp/a.err"
  paths=$(python3 -c "import json,sys; a=json.load(open(sys.argv[1]))['attention']; print(a['cudnn'], a['tracer'])" "$tmp/a.json")
  case $e in
    attention_causal|attention_heads64|attention_heads128|attention_rows_wide|attention_cudnn_d256|attention_cudnn_long) want="2 0" ;;
    attention_mask_bool|attention_mask_add) want="2 0" ;;  # a b8 or I/O-dtype mask [1|b, 1|h, L, S]: cuDNN's bias
    attention_mask_padding|attention_mask_padding_add) want="2 0" ;;  # [b, 1, 1, S]: the bias at stride 0 over queries
    *) want="0 2" ;;  # f32, f64, head size 20, values of another head size, an f32 mask
  esac
  if [ "$paths" = "$want" ]; then echo "ok   attention.trace $e: cudnn, tracer = $paths"; else
    echo "FAIL attention.trace $e: cudnn, tracer = $paths, expected $want"; cat "$tmp/a.err"; fail=1; fi
done
# The system's cuDNN: the same outputs, with a warning where it has no engine.
if [ -n "$SYSTEM_CUDNN$(ls /usr/lib/x86_64-linux-gnu/libcudnn.so.9 2>/dev/null)" ]; then
  for e in attention_heads64 attention_heads128 attention_cudnn_long; do
    rm -rf "$tmp/cpu" "$tmp/gpu"
    "$TRACER" run tests/gpu/attention.trace --entry $e --passes grad,del_last_used --output "$tmp/cpu" >"$tmp/cpu.log" 2>&1
    if TRACER_CUDNN_LIBRARY=$SYSTEM_CUDNN "$TRACER" run tests/gpu/attention.trace --entry $e --passes grad,del_last_used --device cuda \
         --output "$tmp/gpu" >"$tmp/gpu.log" 2>&1; then
      grep "^warning\|^# attention" "$tmp/gpu.log" | sed "s|^|   system cuDNN $e |"
      python3 tests/gpu/compare.py "$tmp/cpu" "$tmp/gpu" "attention.trace $e system cuDNN" || fail=1
    else
      echo "FAIL attention.trace $e system cuDNN"; cat "$tmp/gpu.log"; fail=1
    fi
  done
fi
# Forcing cuDNN where it has no engine fails with the reason; a cuDNN that is not there is a
# warning and tracer's kernels.
if TRACER_ATTENTION=cudnn "$TRACER" run tests/gpu/attention.trace --entry attention_rows_f32 --device cuda >"$tmp/f.log" 2>&1; then
  echo "FAIL TRACER_ATTENTION=cudnn on f32 attention succeeded"; fail=1
elif grep -q "TRACER_ATTENTION=cudnn, but cuDNN cannot run prims.attention: cuDNN's fused attention takes bf16 and f16" "$tmp/f.log"; then
  echo "ok   TRACER_ATTENTION=cudnn on f32: $(grep -o 'cuDNN cannot run.*' "$tmp/f.log" | head -1)"
else
  echo "FAIL TRACER_ATTENTION=cudnn on f32: no clear message"; cat "$tmp/f.log"; fail=1
fi
rm -rf "$tmp/cpu" "$tmp/gpu"
"$TRACER" run tests/gpu/attention.trace --entry attention_heads64 --output "$tmp/cpu" >"$tmp/cpu.log" 2>&1
if TRACER_CUDNN_LIBRARY=/nonexistent/libcudnn.so.9 "$TRACER" run tests/gpu/attention.trace --entry attention_heads64 --device cuda \
     --output "$tmp/gpu" >"$tmp/gpu.log" 2>&1 && grep -q "^warning: .*not cuDNN: cuDNN (libcudnn.so.9) was not found" "$tmp/gpu.log"; then
  python3 tests/gpu/compare.py "$tmp/cpu" "$tmp/gpu" "attention.trace no cuDNN: tracer's kernels" || fail=1
else
  echo "FAIL no cuDNN: no warning or a failed run"; cat "$tmp/gpu.log"; fail=1
fi
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
