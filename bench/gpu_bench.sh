#!/usr/bin/env bash
# Issue 4's benchmarks on one GPU machine, tracer and its PyTorch twins in one call, one table.
# Usage: bench/gpu_bench.sh [TRACER] [what...]   (what: copy launch chain llama llama_ckpt attention gpt gpt_ckpt; default all)
# Each command has a time limit; a row says TIMEOUT or FAILED instead of stopping the table.
set -uo pipefail
cd "$(dirname "$0")/.."
TRACER=${1:-build/tracer}; shift || true
WHAT=${*:-copy launch chain llama llama_ckpt attention gpt gpt_ckpt}
OUT=${OUT:-/tmp}
rows=()
row() { rows+=("$(printf '%-34s %10s %10s %12s %10s' "$@")"); }
tr_json() {  # name, timeout, tracer args...
  local name=$1 limit=$2; shift 2
  if timeout "$limit" "$TRACER" run "$@" --json >"$OUT/$name.json" 2>"$OUT/$name.err"; then
    python3 - "$OUT/$name.json" "$name" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
b = j.get("bench", {})
g = j.get("graph", {})
print(f"{sys.argv[2]} graph={j.get('cuda_graph', False)} nodes={g.get('nodes', 0)} graph_bytes={g.get('bytes', 0)} host_ms={b.get('host_median_ms', 0):.3f} launch_api_ms={b.get('launch_api_ms', 0):.3f}")
print(f"{sys.argv[2]} median_ms={b.get('median_ms', j['run_ms']):.3f} min={b.get('min_ms', 0):.3f} max={b.get('max_ms', 0):.3f} peak_bytes={j.get('device_peak_bytes', 0)} launches={j.get('kernels_launched')} gemms={j.get('gemms')} compiled={j.get('kernels_compiled')} compile_ms={j.get('compile_ms', 0):.0f} compile_wall_ms={j.get('compile_wall_ms', 0):.0f} disk_hits={j.get('kernel_disk_hits')} cpu={j.get('cpu_fallbacks')} {','.join(j.get('fallback_ops', []))} attention={j.get('attention')} cudnn={j.get('cudnn', {}).get('version', '-')}")
PY
  else
    echo "$name FAILED/TIMEOUT"; tail -3 "$OUT/$name.err"
  fi
}
pt_json() {  # limit, args
  local limit=$1; shift
  timeout "$limit" python3 bench/torch_twins.py "$@" 2>"$OUT/torch.err" || { echo "torch $* FAILED/TIMEOUT"; tail -3 "$OUT/torch.err"; }
}
for w in $WHAT; do
  case $w in
    copy) pt_json 60 copy ;;
    launch)
      tr_json launch_tracer 120 bench/launch.trace --device cuda --bench 20
      tr_json launch_tracer_graph 120 bench/launch.trace --device cuda --bench 20 --cuda-graph
      pt_json 60 launch ;;
    chain)
      tr_json chain_tracer 180 examples/chain.trace --entry chain --passes philox,fuse --device cuda --bench 20
      tr_json chain_tracer_warm 180 examples/chain.trace --entry chain --passes philox,fuse --device cuda --bench 20
      pt_json 120 chain eager; pt_json 240 chain compile ;;
    llama)
      tr_json llama_tracer_fuse 240 examples/llama_mlp.trace --passes grad,philox,remat,fuse,del_last_used --device cuda --bench 7
      tr_json llama_tracer_reorder 240 examples/llama_mlp.trace --passes grad,philox,remat,fuse_reorder,del_last_used --device cuda --bench 7
      tr_json llama_tracer_reorder_graph 240 examples/llama_mlp.trace --passes grad,philox,remat,fuse_reorder,del_last_used --device cuda --bench 7 --cuda-graph
      pt_json 120 llama eager; pt_json 300 llama compile ;;
    attention)
      tr_json attention_tracer 240 bench/attention.trace --passes grad,del_last_used --device cuda --bench 10  # cuDNN where found
      TRACER_ATTENTION=tracer tr_json attention_tracer_kernels 240 bench/attention.trace --passes grad,del_last_used --device cuda --bench 10
      pt_json 120 attention eager; pt_json 120 attention flash; pt_json 120 attention cudnn; pt_json 180 attention math ;;
    gpt|gpt_ckpt)
      # Workload 3 on GPT-2's initialisation, the same file for both (written by the twin).
      [ -f "$OUT/gpt.safetensors" ] || pt_json 120 gpt eager --write "$OUT/gpt.safetensors" >/dev/null
      if [ "$w" = gpt ]; then
        tr_json gpt_tracer_fuse 240 examples/gpt.trace --input "$OUT/gpt.safetensors" --passes grad,remat,fuse,del_last_used --device cuda --bench 9
        tr_json gpt_tracer_reorder_graph 240 examples/gpt.trace --input "$OUT/gpt.safetensors" --passes grad,remat,fuse_reorder,del_last_used --device cuda --bench 9 --cuda-graph
        pt_json 120 gpt eager; pt_json 300 gpt compile
      else
        tr_json gpt_ckpt_tracer 240 examples/gpt.trace --input "$OUT/gpt.safetensors" --set CHECKPOINT=1 --passes grad,checkpoint,remat,fuse,del_last_used --device cuda --bench 9
        tr_json gpt_ckpt_tracer_reorder_graph 240 examples/gpt.trace --input "$OUT/gpt.safetensors" --set CHECKPOINT=1 --passes grad,checkpoint,remat,fuse_reorder,del_last_used --device cuda --bench 9 --cuda-graph
        pt_json 120 gpt eager --checkpoint; pt_json 300 gpt compile --checkpoint
      fi ;;
    llama_ckpt)
      tr_json llama_ckpt_tracer 240 examples/llama_mlp_checkpoint.trace --passes grad,checkpoint,philox,remat,fuse,del_last_used --device cuda --bench 7
      tr_json llama_ckpt_tracer_reorder_graph 240 examples/llama_mlp_checkpoint.trace --passes grad,checkpoint,philox,remat,fuse_reorder,del_last_used --device cuda --bench 7 --cuda-graph
      pt_json 120 llama eager --checkpoint; pt_json 300 llama compile --checkpoint ;;
  esac
done
