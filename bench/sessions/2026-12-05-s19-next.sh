#!/usr/bin/env bash
# For the next session with a GPU (session 19 had none): the optimizer and GPT-2 small's step
# after linking the tracer program with tcmalloc (predicted: the optimizer's host time halves,
# below its ~0.6 ms of device time on an H100, so the update runs at memory speed), and the
# printouts session 19 added, on cuda against the CPU (module prologue, DTensor backward, the
# RNG state operators). One call: carry [".dev"] after `strip -o .dev/tracer build/tracer`.
set -uo pipefail
export T=.dev/tracer tmp=/tmp/s19 TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
mkdir -p $tmp
source bench/sessions/lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== Thunder's printouts of tests/thunder, cuda against the CPU"
check "prologue_module_params prologue" tests/thunder/prologue_module_params.txt --entry prologue
check "prologue_module_params computation" tests/thunder/prologue_module_params.txt --entry computation
check "dtensor_backward" tests/thunder/dtensor_backward.txt --entry backward_fn
check "rng_state_2024" tests/thunder/rng_state_2024.txt
check "rng_state_mid2024" tests/thunder/rng_state_mid2024.txt --entry augmented_forward_fn
echo "== nvFuser repro script on cuda (prints its own checks)"
timeout 60 $T run tests/lang/nvfuser_repro.trace --device cuda 2>&1 | head -4
echo "== optimizer alone"
for r in 1 2 3; do timeout 150 $T run bench/optim_step.trace --allow-read examples -- --steps 100 2>&1 | tail -1; done
rounds 2 "--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
