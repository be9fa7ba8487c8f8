#!/usr/bin/env bash
# Session 9 call 2: (1) fsdp(zero=3) on the GPU against PyTorch autograd in float64; (2) the
# small Llama-2 in f32 (F32=1) under fsdp on the GPU against the CPU, and in bf16 without any
# distributed pass (is call 1's bf16 difference the collectives' or the model's?); (3) what the
# collectives cost on a world of one: llama_mlp's step with and without fsdp(zero=3), on cuda:0.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
tmp=/tmp/s9; mkdir -p $tmp
source bench/sessions/lib.sh
sed -n '/^# fsdp (ZeRO-3) on the GPU against PyTorch/,$p' bench/sessions/2026-12-02-s9-call1.sh > $tmp/torch_part.sh
bash $tmp/torch_part.sh
eval "$(sed -n '/^dcheck() {/,/^}/p' bench/sessions/2026-12-02-s9-call1.sh)"
L7="--set L=2 --set D=128 --set NH=4 --set H=352 --set V=512 --set T=64"
dcheck llama2_7b_f32_fsdp3 examples/llama2_7b.trace $L7 --set F32=1 --passes "grad,fsdp(zero=3),remat,fuse,del_last_used"
dcheck llama2_7b_f32_fsdp2_shard examples/llama2_7b.trace $L7 --set F32=1 --passes "grad,fsdp,remat,fuse,shard,del_last_used"
check llama2_7b_bf16_no_dist examples/llama2_7b.trace $L7 --passes grad,remat,fuse,del_last_used
M="--set T=4096 --set L=4 --set D=4096 --set H=11008"
bench "llama_mlp grad,remat,fuse,dlu (no dist)" $T run examples/llama_mlp.trace $M --passes grad,remat,fuse,del_last_used --device cuda --bench 5 --json
timeout 120 $T launch --nproc 1 -- run examples/llama_mlp_fsdp.trace $M --passes "grad,fsdp(zero=3),remat,fuse,del_last_used" --device cuda --bench 5 --json 2>/dev/null | sed 's/^\[rank 0\] //' > $tmp/f.json
python3 -c "
import json; j=json.load(open('$tmp/f.json')); b=j['bench']
print('%-52s median %.3f min %.3f ms  peak %d  collectives %s' % ('llama_mlp_fsdp zero=3 on a world of one', b['median_ms'], b.get('min_ms', 0), j.get('device_peak_bytes', 0), j.get('collectives')))"
timeout 120 $T launch --nproc 1 -- run examples/llama_mlp_fsdp.trace $M --passes "grad,fsdp,remat,fuse,shard,del_last_used" --device cuda --bench 5 --json 2>/dev/null | sed 's/^\[rank 0\] //' > $tmp/f2.json
python3 -c "
import json; j=json.load(open('$tmp/f2.json')); b=j['bench']
print('%-52s median %.3f min %.3f ms  peak %d  collectives %s' % ('llama_mlp_fsdp zero=2+shard on a world of one', b['median_ms'], b.get('min_ms', 0), j.get('device_peak_bytes', 0), j.get('collectives')))"
