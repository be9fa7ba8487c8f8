#!/usr/bin/env bash
# Session 5 call 3 (call 2 again: a transpose of a view is taken before the group kernels): take_backward added into its dying addend (the tied embedding's gradient) and
# attention outputs written transposed. Checks against the CPU (gathers, the small GPT at T=128
# so that cuDNN 9.14 runs the backward, with the new paths on and off), then the GPT step, an
# A/B of the output layout, torch.compile in the same call, a gated profile, and PyTorch's
# embedding backward on the same sizes.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
tmp=$(mktemp -d)
fail=0
check() {  # label, args...
  local label=$1; shift
  rm -rf $tmp/cpu $tmp/gpu
  $T run "$@" --output $tmp/cpu > $tmp/c.log 2>&1 || { echo "FAIL $label CPU"; tail -3 $tmp/c.log; fail=1; return; }
  $T run "$@" --device cuda ${EXTRA:-} --output $tmp/gpu > $tmp/g.log 2>&1 || { echo "FAIL $label GPU"; tail -3 $tmp/g.log; fail=1; return; }
  python3 tests/gpu/compare.py ${EXACT:-} $tmp/cpu $tmp/gpu "$label" > $tmp/cmp.log || fail=1
  echo "$(grep -c '^ok' $tmp/cmp.log) ok, $(grep -c '^FAIL' $tmp/cmp.log) FAIL: $label"
  grep "^FAIL" $tmp/cmp.log | head -3
}
for p in "" fuse; do check "ops_gather $p" tests/gpu/ops.trace --entry ops_gather ${p:+--passes $p}; done
for p in del_last_used fuse,del_last_used; do EXACT=--exact check "ops_gather_add $p" tests/gpu/ops.trace --entry ops_gather_add --passes $p; done
$T run tests/gpu/ops.trace --entry ops_gather_add --passes del_last_used --device cuda --json 2>/dev/null | python3 -c "import json,sys; print('adds in place', json.load(sys.stdin)['take_backward_adds_in_place'])"
python3 -c "import sys; sys.path.insert(0, 'bench'); import gpt_torch as g; g.save_safetensors(sys.argv[1], g.make_inputs(2, 128, 512, 128, 4, 2, device='cpu'))" $tmp/gpt.safetensors
GPT="examples/gpt.trace --set B=2 --set T=128 --set V=512 --set D=128 --set NH=4 --set L=2 --input $tmp/gpt.safetensors"
for p in grad,remat,fuse,del_last_used grad,remat,fuse_reorder,del_last_used; do check "gpt T=128 $p" $GPT --passes $p; done
TRACER_ATTENTION_OUT_LAYOUT=0 check "gpt T=128 packed outputs" $GPT --passes grad,remat,fuse_reorder,del_last_used
check "gpt T=128 CHECKPOINT=1" $GPT --set CHECKPOINT=1 --passes grad,checkpoint,remat,fuse_reorder,del_last_used
EXTRA="--cuda-graph --bench 2" check "gpt T=128 cuda-graph" $GPT --passes grad,remat,fuse_reorder,del_last_used
python3 -c "import sys; sys.path.insert(0, 'bench'); import gpt_torch as g; g.save_safetensors(sys.argv[1], g.make_inputs(2, 64, 512, 128, 4, 2, device='cpu'))" $tmp/gpt64.safetensors
check "gpt T=64 (tracer's backward)" examples/gpt.trace --set B=2 --set T=64 --set V=512 --set D=128 --set NH=4 --set L=2 --input $tmp/gpt64.safetensors --passes grad,remat,fuse_reorder,del_last_used
$T run $GPT --passes grad,remat,fuse_reorder,del_last_used --device cuda --json 2>/dev/null | python3 -c "import json,sys; j=json.load(sys.stdin); print('attention', j['attention'], 'take adds', j['take_backward_adds_in_place'])"
timeout 120 python3 bench/gpt_check.py $T --size small 2>&1 | tail -11 | cut -c1-110
echo "checks: $([ $fail = 0 ] && echo PASSED || echo FAILED)"
timeout 40 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors 2>/dev/null | tail -1 | cut -c1-150
row() {  # label, file, args
  local label=$1 f=$2; shift 2
  timeout 100 $T run $f --bench 9 --device cuda --json "$@" > $OUT/r.json 2>$OUT/r.err
  python3 -c "
import json,sys; j=json.load(open(sys.argv[1])); b=j.get('bench',{})
print(sys.argv[2], 'median', round(b.get('median_ms', 0), 3), 'min', round(b.get('min_ms', 0), 3), 'peak', j.get('device_peak_bytes'), 'est', j.get('estimated_peak_bytes'), 'launches', j.get('kernels_launched'), 'out_layout', j['attention'].get('outputs_written_transposed'))" $OUT/r.json "$label" || tail -5 $OUT/r.err
}
G="examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used --cuda-graph"
row gpt $G
row gpt $G
TRACER_ATTENTION_OUT_LAYOUT=0 row gpt_packed_out $G
timeout 100 python3 bench/torch_twins.py gpt compile 2>/dev/null | tail -1 | cut -c1-170
row gpt $G
TRACER_ATTENTION_OUT_LAYOUT=0 row gpt_packed_out $G
row gpt_ckpt examples/gpt.trace --input /tmp/gpt.safetensors --set CHECKPOINT=1 --passes grad,checkpoint,remat,fuse_reorder,del_last_used --cuda-graph
TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 60 $T run examples/gpt.trace --input /tmp/gpt.safetensors --bench 1 --device cuda \
  --passes grad,remat,fuse_reorder,del_last_used > $OUT/tracer_profile.txt 2>&1
grep -E "GPU profile|take_backward|transpose|kernel add|attention" $OUT/tracer_profile.txt | head -12 | cut -c1-120
python3 - <<'PY'
import torch
g = torch.randn(8192, 768, device="cuda", dtype=torch.bfloat16)
idx = torch.randint(0, 50304, (8192,), device="cuda")
w = torch.randn(50304, 768, device="cuda", dtype=torch.bfloat16)
def emb(): return torch.ops.aten.embedding_dense_backward(g, idx, 50304, -1, False)
def emb_add(): return w + emb()
for name, f in (("embedding_dense_backward", emb), ("embedding_dense_backward + add", emb_add)):
    for _ in range(3): f()
    ts = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); f(); b.record(); torch.cuda.synchronize(); ts.append(a.elapsed_time(b))
    ts.sort(); print(f"torch {name}: median {ts[10]:.4f} ms")
PY
