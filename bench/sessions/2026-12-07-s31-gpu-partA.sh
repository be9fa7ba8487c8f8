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
python3 tests/gpu/inplace_torch.py "$TRACER" cuda; [ $? = 0 ] || { echo "FAIL inplace_torch.py"; fail=1; }
python3 tests/gpu/inplace_torch.py "$TRACER" cpu | tail -1; [ ${PIPESTATUS[0]} = 0 ] || { echo "FAIL inplace_torch.py cpu"; fail=1; }
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
[ $fail = 0 ] && echo "PART A PASSED" || echo "PART A FAILED"
