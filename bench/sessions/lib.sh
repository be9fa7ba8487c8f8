# Helpers of the device-call scripts (source it; $T is the tracer binary, $tmp a scratch folder).
# check LABEL ARGS...: runs `tracer run ARGS` on the CPU and on cuda and compares every output
# (tests/gpu/compare.py), one line of counts (and the GPU run's first warning).
check() {
  local label=$1; shift
  rm -rf "$tmp/cpu" "$tmp/gpu"
  $T run "$@" --output "$tmp/cpu" > "$tmp/c.log" 2>&1 || { echo "FAIL $label CPU"; tail -3 "$tmp/c.log"; return; }
  $T run "$@" --device cuda --output "$tmp/gpu" > "$tmp/g.log" 2>&1 || { echo "FAIL $label GPU"; tail -3 "$tmp/g.log"; return; }
  python3 tests/gpu/compare.py "$tmp/cpu" "$tmp/gpu" "$label" > "$tmp/cmp.log" 2>/dev/null
  echo "$(grep -c '^ok' "$tmp/cmp.log") ok, $(grep -c '^FAIL' "$tmp/cmp.log") FAIL: $label $(grep '^warning' "$tmp/g.log" | head -1 | cut -c1-150)"
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
