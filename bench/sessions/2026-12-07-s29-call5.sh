#!/usr/bin/env bash
# Session 29, call 5: fuse opening composites no kernel holds whole (.dev/tracer) against the
# binary before it (.dev/tracer_old = call 4's state) on the same GPU: the ResNet block f32 and
# bf16, GPT-2 small's training step (bench/train_phases.trace, CUDA graph); conv_torch.py.
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
S="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
for T in .dev/tracer_old .dev/tracer; do
  for e in resnet_block resnet_block_bf16; do
    echo "$T $e: $($T run bench/conv_probe.trace --entry $e --device cuda --passes grad,fuse,del_last_used --bench 20 2>&1 | grep '^# bench\|device peak\|error' | sed 's/.*device peak/device peak/' | tr '\n' ' ' | cut -c1-200)"
  done
  echo "$T gpt step clip 0: $(timeout 100 $T run bench/train_phases.trace --allow-read examples $S -- --steps 20 --clip 0 --cuda-graph 1 2>&1 | grep -E 'pipelined|error' | cut -c1-140)"
done
python3 bench/conv_torch.py
echo "== conv_torch cuda"; python3 tests/gpu/conv_torch.py .dev/tracer cuda | grep -v "^ok"; echo "rc=${PIPESTATUS[0]}"
