#!/usr/bin/env bash
# Session 9 call 1 (issue 15's GPU part): NCCL with a world of one on cuda:0. Every distributed
# test file and example runs under `tracer launch --nproc 1` on the GPU (collectives through
# NCCL on the communication stream) and on the CPU, outputs compared (tests/gpu/compare.py); the
# fsdp case is also checked against PyTorch autograd in float64 on the same inputs.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
tmp=/tmp/s9; mkdir -p $tmp
nvidia-smi -L
# dcheck LABEL ARGS...: `tracer launch --nproc 1 -- run ARGS` on the CPU and on cuda, compared;
# the GPU run's collectives counted (they must go through NCCL).
dcheck() {
  local label=$1; shift
  rm -rf "$tmp/cpu" "$tmp/gpu"
  timeout 120 $T launch --nproc 1 -- run "$@" --output "$tmp/cpu" > "$tmp/c.log" 2>&1 || { echo "FAIL $label CPU"; tail -4 "$tmp/c.log"; return; }
  timeout 120 $T launch --nproc 1 -- run "$@" --device cuda --output "$tmp/gpu" --json > "$tmp/g.json" 2> "$tmp/g.log" || { echo "FAIL $label GPU"; tail -6 "$tmp/g.log"; sed 's/^\[rank 0\] //' "$tmp/g.json" | tail -4; return; }
  local coll=$(sed 's/^\[rank 0\] //' "$tmp/g.json" | python3 -c "import json,sys; j=json.load(sys.stdin); print(j.get('collectives'), 'fallbacks', j.get('cpu_fallbacks'), j.get('fallback_ops'))" 2>/dev/null)
  python3 tests/gpu/compare.py "$tmp/cpu" "$tmp/gpu" "$label" > "$tmp/cmp.log" 2>/dev/null
  echo "$(grep -c '^ok' "$tmp/cmp.log") ok, $(grep -c '^FAIL' "$tmp/cmp.log") FAIL: $label  collectives: $coll"
  grep '^FAIL' "$tmp/cmp.log" | head -3 | cut -c1-200
}
S="--set T=64 --set L=2 --set D=128 --set H=256"
L7="--set L=2 --set D=128 --set NH=4 --set H=352 --set V=512 --set T=64"
dcheck collectives tests/dist/collectives.trace
grep -h "maximum" "$tmp/g.log" "$tmp/g.json" 2>/dev/null | head -2
dcheck ddp tests/dist/ddp.trace --passes grad,ddp
dcheck fsdp2 tests/dist/fsdp.trace --passes grad,fsdp
dcheck fsdp3_fused tests/dist/fsdp.trace --passes "grad,fsdp(zero=3, prefetch=1),remat,fuse,del_last_used"
dcheck fsdp_shard_rep tests/dist/fsdp_replicated.trace --passes "grad,fsdp,shard(every=True),del_last_used"
dcheck tp_shard tests/dist/tp.trace --set L=3 --passes "tp,grad,remat,fuse,shard(every=True),del_last_used"
dcheck llama_mlp_fsdp3 examples/llama_mlp_fsdp.trace $S --passes "grad,fsdp(zero=3),remat,fuse,del_last_used"
dcheck llama_mlp_tp examples/llama_mlp_tp.trace $S --passes "tp,grad,remat,fuse,shard,del_last_used"
dcheck llama2_7b_fsdp3 examples/llama2_7b.trace $L7 --passes "grad,fsdp(zero=3),remat,fuse,del_last_used"
dcheck llama2_7b_fsdp2_shard examples/llama2_7b.trace $L7 --passes "grad,fsdp,remat,fuse,shard,del_last_used"

# fsdp (ZeRO-3) on the GPU against PyTorch autograd in float64 on the same inputs.
python3 - <<'PY'
import torch
from safetensors.torch import save_file
g = torch.Generator().manual_seed(3)
t = {"w1": torch.rand(7, 6, generator=g) * 2 - 1, "b1": torch.rand(7, generator=g) * 2 - 1,
     "w2": torch.rand(3, 7, generator=g) * 2 - 1, "x": torch.rand(8, 6, generator=g) * 2 - 1}
save_file(t, "/tmp/s9/fsdp_in.safetensors")
d = {k: v.double().requires_grad_() for k, v in t.items()}
h = torch.nn.functional.gelu(torch.nn.functional.linear(d["x"], d["w1"], d["b1"]))
y = torch.nn.functional.linear(h, d["w2"])
loss = (y * y).mean()
loss.backward()
torch.save({"loss": loss.detach(), **{"grad_" + k: v.grad for k, v in d.items()}}, "/tmp/s9/fsdp_ref.pt")
PY
rm -rf $tmp/gf
timeout 120 $T launch --nproc 1 -- run tests/dist/fsdp.trace --input $tmp/fsdp_in.safetensors --passes "grad,fsdp(zero=3),remat,fuse,del_last_used" --device cuda --output $tmp/gf > $tmp/gf.log 2>&1 || tail -5 $tmp/gf.log
python3 - <<'PY'
import sys, torch, numpy as np
sys.path.insert(0, "tests/gpu")
from compare import load
ref = torch.load("/tmp/s9/fsdp_ref.pt")
worst = 0
for k, v in ref.items():
    got = torch.from_numpy(load("/tmp/s9/gf/%s.npy" % k)[1])
    r = (got - v).abs().max().item() / max(1.0, v.abs().max().item())
    worst = max(worst, r)
    print("torch f64 vs tracer cuda fsdp(zero=3): %-8s rel %.2e" % (k, r))
print("fsdp vs PyTorch: %s (worst %.2e)" % ("ok" if worst < 1e-5 else "FAIL", worst))
PY
