#!/usr/bin/env bash
# Session 8 call 2: bench/attention.trace with fuse in the pipeline (call 1 ran it without: a
# GPU run fuses only what its passes fuse), on cuDNN 9.14 and 9.19, against PyTorch; the profile.
set -uo pipefail
T=.dev/tracer
export TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
W=$(ls /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9 2>/dev/null | head -1)
tmp=$(mktemp -d)
. bench/sessions/lib.sh
rm -rf $tmp/cpu $tmp/gpu
$T run bench/attention.trace --set L=256 --passes grad,remat,fuse,del_last_used --output $tmp/cpu > /dev/null 2>&1
$T run bench/attention.trace --set L=256 --passes grad,remat,fuse,del_last_used --device cuda --output $tmp/gpu > /dev/null 2>&1
python3 tests/gpu/compare.py $tmp/cpu $tmp/gpu "attention L=256 grad,remat,fuse,del_last_used" | tail -5
for round in 1 2; do
  for lib in system wheel; do
    for p in grad,fuse,del_last_used grad,remat,fuse,del_last_used; do
      for g in "" --cuda-graph; do
        if [ $lib = wheel ]; then export TRACER_CUDNN_LIBRARY=$W; else unset TRACER_CUDNN_LIBRARY; fi
        bench "tracer $lib $p $g" $T run bench/attention.trace --passes $p --device cuda --bench 20 --json $g
      done
    done
  done
  unset TRACER_CUDNN_LIBRARY
  for m in eager flash cudnn; do timeout 60 python3 bench/torch_twins.py attention $m 2>/dev/null | tail -1 | cut -c1-120; done
done
TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 60 $T run bench/attention.trace --passes grad,remat,fuse,del_last_used --device cuda --bench 1 > $OUT/att_prof.txt 2>&1
grep -E "^#" $OUT/att_prof.txt | head -24 | cut -c1-160
