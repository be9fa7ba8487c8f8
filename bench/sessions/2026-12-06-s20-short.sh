#!/usr/bin/env bash
# Session 20, a short call for the last device minutes: the printouts on cuda against the CPU,
# then the 16-layer Llama-2 augmented forward (does it finish now that outputs are summed in
# parallel?). Carry [".dev"] after `strip -o .dev/tracer build/tracer`.
set -uo pipefail
export T=.dev/tracer tmp=/tmp/s20 TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
mkdir -p $tmp
source bench/sessions/lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
sed -n '/== Thunder/,/== nvFuser/p' bench/sessions/2026-12-06-s20-call2.sh | grep -v "^echo \"== nvFuser" > $tmp/printouts.sh
source $tmp/printouts.sh
L=.dev/corpus/02_llama2_16layer_augmented_forward.txt
LT="--type t1=f32[4096,128] --type t2=f32[4096,128] --type t117=bf16[32000,4096]"
/usr/bin/time -f "wall %e s, host max RSS %M KB" timeout 150 $T run $L $LT --device cuda --json > $tmp/l.json 2>$tmp/l.err
tail -2 $tmp/l.err | cut -c1-300
python3 -c "
import json; j=json.load(open('$tmp/l.json'))
print('llama16 unfused: trace %.0f ms, run %.0f ms, device peak %.3f GiB, %d outputs, launches %s' % (j['trace_ms'], j['run_ms'], j.get('device_peak_bytes',0)/2**30, len(j['outputs']), j.get('kernels_launched')))"
