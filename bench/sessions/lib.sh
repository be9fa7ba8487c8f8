# Helpers of the device-call scripts (source it; $T is the tracer binary, $tmp a scratch folder).
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
