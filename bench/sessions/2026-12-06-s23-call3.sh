#!/usr/bin/env bash
# Session 23 call 3: column kernels sized to one wave (launch bounds 256, 2) against the earlier
# rule (TRACER_COLUMN_WAVE=0); long-row kernels with B blocks a multiprocessor
# (TRACER_ROWS_RESIDENT=B) and the online logsumexp (TRACER_ROWS_ONLINE=1) for the cross entropy;
# GPT-2 small's profile under each, then its step against PyTorch's. Carry [".dev"].
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name --format=csv,noheader
S="--set B=8 --set T=1024 --set V=50304 --set D=768 --set NH=12 --set L=12"
for e in ln_cols bias_cols gelu_cols; do
  for v in "" "TRACER_COLUMN_WAVE=0"; do
    r=$(env $v TRACER_GPU_PROFILE=2 timeout 60 $T run bench/column_probe.trace --entry $e --passes fuse,del_last_used --device cuda --bench 50 2>&1 | grep -E "^#  .* kernel fusion0" | head -1)
    echo "$e [$v] $r"
  done
done
timeout 60 python3 bench/torch_twins.py gpt eager --write /tmp/gpt.safetensors > /dev/null 2>&1
G="examples/gpt.trace --input /tmp/gpt.safetensors --passes grad,remat,fuse_reorder,del_last_used --bench 1 --device cuda"
summ() {  # total; the cross entropy's two kernels; the column kernels of [8192, 768] (24) and the others
  python3 - "$1" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
tot = re.search(r"total ([0-9.]+) ms", t)
rows = re.findall(r"^#\s+([0-9.]+) ms\s+([0-9.]+) MB\s+\d+ GB/s\s+(.*)$", t, re.M)
ce = sum(float(a) for a, mb, n in rows if "8192, 50304]" in n or ("f32[8192, 1]" in n and float(mb) > 800))
ln = [float(a) for a, mb, n in rows if n.startswith("kernel fusion") and n.endswith("bf16[768]") and abs(float(mb) - 37.8) < 0.2]
g = [float(a) for a, mb, n in rows if n.startswith("kernel fusion") and "bf16[8, 1024, 3072]" in n]
at = [float(a) for a, mb, n in rows if "attention_backward" in n]
print("total %s ms | CE %.3f | ln-cols %d x %.4f = %.3f | gelu-bwd %d x %.4f | attn-bwd %.3f" % (tot.group(1) if tot else "?", ce, len(ln), sum(ln) / max(1, len(ln)), sum(ln), len(g), sum(g) / max(1, len(g)), sum(at)))
PY
}
for v in "" "TRACER_COLUMN_WAVE=0" "TRACER_ROWS_RESIDENT=2" "TRACER_ROWS_RESIDENT=3" "TRACER_ROWS_RESIDENT=4" "TRACER_ROWS_ONLINE=1"; do
  env $v TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=0 timeout 120 $T run $G > $OUT/prof.txt 2>&1
  echo "[$v] $(summ $OUT/prof.txt)"
done
for round in 1 2; do
  for clip in 0 1.0; do
    timeout 100 python3 bench/train_step_torch.py --runs 20 --clip $clip 2>&1 | tail -1 | cut -c1-150
    for v in "" "TRACER_COLUMN_WAVE=0"; do
      echo "-- [$v] clip $clip: $(env $v timeout 100 $T run bench/train_phases.trace --allow-read examples $S -- --steps 20 --clip $clip --cuda-graph 1 2>&1 | grep -E "pipelined|error" | cut -c1-120)"
    done
  done
done
