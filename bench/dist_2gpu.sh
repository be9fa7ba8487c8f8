#!/usr/bin/env bash
# Issue 15's 2-GPU measurements (run in issue 18, on the nvidia-h200-x2 kind): per-rank peak and
# step time of llama_mlp_fsdp (ZeRO-2, ZeRO-2 + shard, ZeRO-3) and llama_mlp_tp (with and without
# shard) under `tracer launch --nproc 2 --device cuda`, against PyTorch FSDP2 and DTensor tensor
# parallelism on the same GPUs through torchrun (bench/torch_fsdp.py), with tracer mem's estimate
# beside each measured peak. Targets: the peak falls by at least 90% of the replicated saved bytes
# shard slices away; step time at most +10% with shard.
#   bash bench/dist_2gpu.sh [NPROC]      # from the repository root; .dev/tracer is the binary
set -uo pipefail
N=${1:-2}
T=${TRACER:-.dev/tracer}
export TRACER_CACHE_DIR=${TRACER_CACHE_DIR:-/tmp/trk} NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
tmp=${TMPDIR:-/tmp}/dist2gpu; mkdir -p $tmp
S="--set T=8192 --set L=8 --set D=4096 --set H=11008"
nvidia-smi -L
row() {  # row LABEL FILE PASSES: tracer's ranks, median step, measured and estimated peak per rank
  local label=$1 file=$2 passes=$3
  timeout 300 $T launch --nproc $N -- run $file $S --passes "$passes" --device cuda --bench 10 --json > $tmp/r.txt 2> $tmp/r.err \
    || { echo "FAIL $label"; tail -5 $tmp/r.err; return; }
  python3 - "$label" $tmp/r.txt <<'PY'
import json, re, sys
text = open(sys.argv[2]).read()
ranks = {}
for line in text.splitlines():
    m = re.match(r"\[rank (\d+)\] (.*)", line)
    if m: ranks.setdefault(int(m.group(1)), []).append(m.group(2))
for r in sorted(ranks):
    j = json.loads("\n".join(ranks[r]))
    b = j["bench"]
    print("%-34s rank %d  median %8.3f ms  min %8.3f  peak %6.3f GiB  estimated %6.3f GiB  collectives %s" % (
        sys.argv[1], r, b["median_ms"], b.get("min_ms", 0), j.get("device_peak_bytes", 0) / 2**30,
        j.get("estimated_peak_bytes", 0) / 2**30, j.get("collectives")))
PY
}
row "tracer fsdp zero=2" examples/llama_mlp_fsdp.trace "grad,fsdp,remat,fuse,del_last_used"
row "tracer fsdp zero=2 + shard" examples/llama_mlp_fsdp.trace "grad,fsdp,remat,fuse,shard,del_last_used"
row "tracer fsdp zero=3" examples/llama_mlp_fsdp.trace "grad,fsdp(zero=3),remat,fuse,del_last_used"
row "tracer tp" examples/llama_mlp_tp.trace "tp,grad,remat,fuse,del_last_used"
row "tracer tp + shard" examples/llama_mlp_tp.trace "tp,grad,remat,fuse,shard,del_last_used"
for z in 2 3; do timeout 300 torchrun --nproc_per_node $N bench/torch_fsdp.py fsdp --zero $z 2>&1 | grep '^{' ; done
timeout 300 torchrun --nproc_per_node $N bench/torch_fsdp.py tp 2>&1 | grep '^{'
