# Helpers of the device-call scripts (source it; $T is the tracer binary, $tmp a scratch folder).
# device_env: what every device call's script sets up: PyTorch's venv on PATH, NVLink multicast
# off, $tmp a scratch folder removed at exit, $T the tracer binary ($1 of the script, else build's).
device_env() {
  export PATH=/opt/torch/.venv/bin:$PATH NCCL_NVLS_ENABLE=0
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  T=${1:-build/tracer}
  nvidia-smi --query-gpu=name --format=csv,noheader
}
# check LABEL ARGS...: runs `tracer run ARGS` on the CPU and on cuda and compares every output
# (tests/gpu/compare.py), one line of counts (and the GPU run's first warning).
check() {
  local label=$1; shift
  rm -rf "$tmp/cpu" "$tmp/gpu"
  $T run "$@" --output "$tmp/cpu" > "$tmp/c.log" 2>&1 || { echo "FAIL $label CPU"; tail -3 "$tmp/c.log"; return; }
  $T run "$@" --device cuda --output "$tmp/gpu" > "$tmp/g.log" 2>&1 || { echo "FAIL $label GPU"; tail -3 "$tmp/g.log"; return; }
  # (a run as one rank of a job, --world-size, writes its outputs under rankR/)
  local c="$tmp/cpu" g="$tmp/gpu"
  [ -z "$(ls "$c"/*.npy 2>/dev/null)" ] && [ -d "$c/$(ls "$c" | head -1)" ] && { c="$c/$(ls "$c" | head -1)"; g="$g/$(basename "$c")"; }
  python3 tests/gpu/compare.py "$c" "$g" "$label" > "$tmp/cmp.log" 2>&1
  echo "$(grep -c '^ok' "$tmp/cmp.log") ok, $(grep -c -E '^FAIL|no outputs written' "$tmp/cmp.log") FAIL: $label $(grep '^warning' "$tmp/g.log" | head -1 | cut -c1-150)"
  grep '^FAIL' "$tmp/cmp.log" | head -3 | cut -c1-200
}
# bench LABEL COMMAND...: runs a `tracer run ... --json --bench N` command, one line of its median,
# minimum, device peak, launches and cuDNN version.
bench() {
  local label=$1; shift
  timeout 60 "$@" > "$tmp/b.json" 2>"$tmp/b.err"
  python3 -c "
import json,sys; j=json.load(open(sys.argv[1])); b=j['bench']
print('%-52s median %.3f min %.3f ms  peak %d  launches %s  cudnn %s' % (sys.argv[2], b['median_ms'], b.get('min_ms', 0), j.get('device_peak_bytes', 0), j.get('kernels_launched'), j.get('cudnn', {}).get('version')))" "$tmp/b.json" "$label" || tail -3 "$tmp/b.err"
}
# rounds N SIZES: GPT-2 small's step, PyTorch's (bench/train_step_torch.py) and tracer's
# (bench/train_phases.trace) interleaved, without clipping and with clip 1.0, N rounds.
rounds() {
  local n=$1 sizes=$2 round clip
  for round in $(seq 1 "$n"); do
    echo "== round $round"
    for clip in 0 1.0; do
      timeout 120 python3 bench/train_step_torch.py --runs 20 --clip $clip 2>&1 | tail -1
      timeout 150 $T run bench/train_phases.trace --allow-read examples $sizes -- --steps 20 --clip $clip 2>&1 | grep -E "pipelined|repeated"
    done
  done
}
# copy_ceiling: the device's copy bandwidth (torch, 256 MiB, read + write), the bar for "memory speed".
copy_ceiling() {
  python3 - <<'PY'
import torch
x = torch.empty(256 << 20, dtype=torch.uint8, device="cuda"); y = torch.empty_like(x)
for _ in range(3): y.copy_(x)
s, e = torch.cuda.Event(True), torch.cuda.Event(True); s.record()
for _ in range(50): y.copy_(x)
e.record(); torch.cuda.synchronize(); ms = s.elapsed_time(e) / 50
print("copy 256 MiB: %.3f ms, %.0f GB/s (read + write)" % (ms, 2 * x.numel() / ms / 1e6))
PY
}
# summ PROFILE: one line of a GPT-2 small TRACER_GPU_PROFILE=2 listing: its total, the cross
# entropy's kernels, the 24 norm-gradient column groups, the 12 GELU backwards, the attention
# backwards (session 23's calls 3-4 defined it in their own text).
summ() {
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
