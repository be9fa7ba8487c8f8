#!/usr/bin/env bash
# Benchmark (a) of issue 3: speed of the passes themselves.
# Runs `tracer print examples/llama_mlp_checkpoint.trace --set L=$L --passes $PASSES --time-passes`
# RUNS times and prints, per pass and for the total, the median of the times that
# --time-passes reports (stderr lines "# pass NAME  N ms"), plus the median wall time of the
# whole command (parse + stdlib load + tracing + passes + printing).
#
# Usage: bench/run_passes.sh [PASSES] [L]
#   PASSES  comma-separated pass list (default: the full pipeline of issue 3,
#           grad,checkpoint,philox,remat,del_last_used); passes this build does not know are
#           skipped with a warning, so the same command measures the full pipeline once it exists
#   L       number of blocks (default 512)
# Environment: TRACER (default build/tracer), RUNS (default 3), FILE (default the example).
# Target (issue 3): total of the full pipeline under 2000 ms at L=512.
set -euo pipefail
cd "$(dirname "$0")/.."

PASSES=${1:-grad,checkpoint,philox,remat,del_last_used}
L=${2:-512}
RUNS=${RUNS:-3}
FILE=${FILE:-examples/llama_mlp_checkpoint.trace}
TRACER=${TRACER:-build/tracer}
TARGET_MS=2000
FULL=grad,checkpoint,philox,remat,del_last_used

[ -x "$TRACER" ] || { echo "error: tracer binary '$TRACER' not found (set TRACER=...)" >&2; exit 2; }

# The passes this build knows: from the error an unknown pass name gets.
known=$("$TRACER" print examples/mlp.trace --passes __no_such_pass__ 2>&1 >/dev/null \
        | sed -n 's/.*known passes: //p' | tr -d ' ' || true)
if [ -z "$known" ]; then known=$(ls stdlib/passes/*.trace | xargs -n1 basename | sed 's/\.trace$//' | paste -sd,); fi

use=() skipped=()
IFS=, read -ra want <<<"$PASSES"
for p in "${want[@]}"; do
  if [[ ",$known," == *",$p,"* ]]; then use+=("$p"); else skipped+=("$p"); fi
done
[ ${#use[@]} -gt 0 ] || { echo "error: none of '$PASSES' exists (known: $known)" >&2; exit 2; }
run_passes=$(IFS=,; echo "${use[*]}")
[ ${#skipped[@]} -eq 0 ] || echo "warning: skipping passes this build does not have: $(IFS=,; echo "${skipped[*]}")" >&2

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "file:    $FILE --set L=$L"
echo "passes:  $run_passes"
echo "tracer:  $TRACER"
echo "runs:    $RUNS (median reported)"
for r in $(seq 1 "$RUNS"); do
  t0=$(date +%s%N)
  "$TRACER" print "$FILE" --set "L=$L" --passes "$run_passes" --time-passes >"$tmp/out" 2>"$tmp/err.$r" \
    || { cat "$tmp/err.$r" >&2; exit 1; }
  t1=$(date +%s%N)
  echo "wall $(( (t1 - t0) / 1000000 ))" >>"$tmp/err.$r"
done

# Median per pass, per total and per wall time, over the runs.
cat "$tmp"/err.* | awk -v runs="$RUNS" '
  /^# pass / { v[$3] = v[$3] " " $4; if (!($3 in seen)) { seen[$3] = 1; order[++n] = $3 } }
  /^# passes total/ { v["total"] = v["total"] " " $4 }
  /^wall / { v["wall"] = v["wall"] " " $2 }
  function median(s,   a, k, i, j, t) {
    k = split(s, a, " ")
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
  }
  END {
    for (i = 1; i <= n; i++) printf "pass %-16s %9.1f ms   (runs:%s)\n", order[i], median(v[order[i]]), v[order[i]]
    printf "passes total          %9.1f ms   (runs:%s)\n", median(v["total"]), v["total"]
    printf "whole command (wall)  %9.1f ms   (runs:%s)\n", median(v["wall"]), v["wall"]
    print median(v["total"]) > "/dev/stderr"
  }' 2>"$tmp/total"

stmts=$("$TRACER" mem "$FILE" --set "L=$L" --passes "$run_passes" 2>/dev/null | sed -n 's/^trace \([^:]*\): \([0-9]*\) statements.*/\1=\2/p' | paste -sd' ' || true)
echo "statements after the passes: $stmts"
total=$(cat "$tmp/total")
if [ "$run_passes" = "$FULL" ]; then
  awk -v t="$total" -v g="$TARGET_MS" 'BEGIN { printf "target: full pipeline under %d ms: %s\n", g, (t < g ? "MET" : "NOT MET") }'
else
  echo "target: full pipeline under $TARGET_MS ms (not judged: measured only $run_passes)"
fi
