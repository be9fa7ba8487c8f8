#!/usr/bin/env bash
# Session 18 call 2: batch-one fusions on the GPU against the CPU (blocks now split at the first
# dimension that is not 1); Thunder's printouts on cuda against the CPU (.dev/corpus: the shared
# ones and 37 from Thunder's docs, notebooks and issues, carried); the 16-layer Llama-2 printout
# on cuda, unfused against fused, with its peak against tracer mem; then the optimizer's host
# path after its trimming, and GPT-2 small's step against PyTorch's, two rounds.
set -uo pipefail
export T=.dev/tracer tmp=/tmp/s18 TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
mkdir -p $tmp
source bench/sessions/lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== batch one"
for p in grad,philox,del_last_used grad,philox,fuse,del_last_used; do check "batch_one $p" tests/gpu/batch_one.trace --passes $p; done
echo "== Thunder's printouts, cuda against the CPU"
for f in .dev/corpus/*.txt; do
  timeout 30 $T run "$f" > /dev/null 2>&1 || continue
  check "$(basename "$f" .txt)" "$f"
done
echo "== Llama-2 16 layers (augmented forward), cuda: unfused, then fuse,del_last_used"
L=.dev/corpus/02_llama2_16layer_augmented_forward.txt
LT="--type t1=f32[4096,128] --type t2=f32[4096,128] --type t117=bf16[32000,4096]"
$T mem $L $LT --device cuda 2>&1 | tail -1
$T mem $L $LT --device cuda --passes fuse,del_last_used 2>&1 | tail -1
rm -rf $tmp/l0 $tmp/l1
timeout 120 $T run $L $LT --device cuda --output $tmp/l0 --json > $tmp/l0.json 2>$tmp/l0.err || tail -3 $tmp/l0.err
timeout 120 $T run $L $LT --device cuda --passes fuse,del_last_used --output $tmp/l1 --json > $tmp/l1.json 2>$tmp/l1.err || tail -3 $tmp/l1.err
for j in l0 l1; do python3 -c "
import json,sys; j=json.load(open(sys.argv[1]))
print(sys.argv[2], 'device peak %.3f GiB, estimated %.3f GiB,' % (j.get('device_peak_bytes', 0) / 2**30, j.get('estimated_peak_bytes', 0) / 2**30), 'launches', j.get('kernels_launched'), 'run ms', j.get('run_ms', j.get('time_ms')))" $tmp/$j.json $j 2>&1 | tail -1; done
python3 tests/gpu/compare.py $tmp/l0 $tmp/l1 "llama16 fused vs unfused (cuda)" 2>&1 | tail -4
echo "== optimizer alone"
for r in 1 2 3; do timeout 150 $T run bench/optim_step.trace --allow-read examples -- --steps 100 2>&1 | tail -1; done
rounds 2 "--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
