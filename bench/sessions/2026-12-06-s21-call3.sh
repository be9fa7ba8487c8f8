#!/usr/bin/env bash
# Session 21 call 3: cuDNN 9.14 (the system's, tracer's default) against 9.19 (PyTorch's wheel,
# the one torch.compile's step uses): the attention backward took 0.195 ms a layer on 9.14 against
# PyTorch's 0.154 (call 2). The forward and backward interleaved with torch.compile, GPT-2 small's
# training step on 9.19, and the attention rows of the profile on both. Carry [".dev"].
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
S="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
CUDNN=$(find /opt/torch -name 'libcudnn.so.9*' 2>/dev/null | head -1)
echo "cudnn of the wheel: $CUDNN"
echo "== forward and backward against torch.compile, 9.14 and 9.19"
timeout 240 python3 bench/ab_gpt.py $T --rounds 3 --runs 15 --variant "cudnn919:TRACER_CUDNN_LIBRARY=$CUDNN" 2>&1 | grep -v Warn | tail -8
echo "== step on 9.19, 2 rounds"
for r in 1 2; do for clip in 0 1.0; do
  timeout 120 python3 bench/train_step_torch.py --runs 20 --clip $clip 2>&1 | tail -1
  TRACER_CUDNN_LIBRARY=$CUDNN timeout 120 $T run bench/train_phases.trace --allow-read examples $S -- --steps 20 --clip $clip 2>&1 | grep -E "pipelined|each phase"
done; done
echo "== attention rows of the profile, 9.14 then 9.19"
timeout 60 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
G="examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used --bench 1 --device cuda"
TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 90 $T run $G > $OUT/prof914.txt 2>&1
TRACER_CUDNN_LIBRARY=$CUDNN TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 90 $T run $G > $OUT/prof919.txt 2>&1
for f in $OUT/prof914.txt $OUT/prof919.txt; do grep -E "total|attention" $f | head -4; done
