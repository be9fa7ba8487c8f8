#!/usr/bin/env bash
# Benchmark (b) of issue 3: the interpreter against Lua 5.4 on the same algorithm
# (bench/lastuse.trace and bench/lastuse.lua: last use and del lists over N synthetic
# statements). Both run side by side in one invocation; the checksums must agree.
#
# Four commands are timed: each program at N and at N=0. The N=0 runs measure start-up only
# (for tracer: loading the stdlib, the module, tracing and running the one-statement `main`;
# for Lua: starting the VM), so "script" time = time(N) - time(0).
# Reported: the median of RUNS runs of each, the whole-process ratio tracer/lua and the
# script-only ratio. Target (issue 3): tracer within 2x of Lua (judged on the script-only ratio;
# the whole-process ratio is printed beside it).
#
# Usage: bench/run_interp.sh [N]      (N default 200000)
# Environment: TRACER (default build/tracer), LUA (default lua5.4), RUNS (default 5),
#              NO_HYPERFINE=1 to use the built-in timing loop even if hyperfine is installed.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${1:-200000}
RUNS=${RUNS:-5}
TRACER=${TRACER:-build/tracer}
LUA=${LUA:-lua5.4}
[ -x "$TRACER" ] || { echo "error: tracer binary '$TRACER' not found (set TRACER=...)" >&2; exit 2; }
command -v "$LUA" >/dev/null || { echo "error: '$LUA' not found (apt-get install lua5.4)" >&2; exit 2; }

tr_cmd() { "$TRACER" run bench/lastuse.trace --set "N=$1"; }
lua_cmd() { "$LUA" bench/lastuse.lua "$1"; }

# 1. Same answer from both.
tr_out=$(tr_cmd "$N" 2>/dev/null | grep '^lastuse')
lua_out=$(lua_cmd "$N" | grep '^lastuse')
echo "tracer: $tr_out"
echo "lua:    $lua_out"
if [ "$tr_out" != "$lua_out" ]; then echo "error: the checksums differ" >&2; exit 1; fi
echo "checksums agree"

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
names=(lua_N tracer_N lua_0 tracer_0)
cmds=("$LUA bench/lastuse.lua $N" "$TRACER run bench/lastuse.trace --set N=$N"
      "$LUA bench/lastuse.lua 0" "$TRACER run bench/lastuse.trace --set N=0")

# 2. Median wall time in ms of each command.
declare -A med
if command -v hyperfine >/dev/null && command -v jq >/dev/null && [ -z "${NO_HYPERFINE:-}" ]; then
  echo "timing: hyperfine, $RUNS runs each after 1 warm-up, median"
  hyperfine -N --style basic --warmup 1 --runs "$RUNS" --export-json "$tmp/h.json" "${cmds[@]}" >"$tmp/h.txt" 2>&1 \
    || { cat "$tmp/h.txt" >&2; exit 1; }
  for i in 0 1 2 3; do med[${names[$i]}]=$(jq ".results[$i].median * 1000" "$tmp/h.json"); done
  # CPU time (user + system, hyperfine gives their means): less disturbed than wall time when
  # other work shares the cores.
  cpu=$(jq -r '[.results[] | (.user + .system) * 1000] | @tsv' "$tmp/h.json")
  read -r c_ln c_tn c_l0 c_t0 <<<"$cpu"
  awk -v ln="$c_ln" -v tn="$c_tn" -v l0="$c_l0" -v t0="$c_t0" 'BEGIN {
    printf "mean CPU time (user+sys, ms): lua %.1f (N=0: %.1f), tracer %.1f (N=0: %.1f); script-only ratio %.2fx\n",
           ln, l0, tn, t0, (tn - t0) / (ln - l0) }'
else
  echo "timing: date +%s%N loop, $RUNS runs each interleaved after 1 warm-up, median"
  for r in $(seq 0 "$RUNS"); do
    for i in 0 1 2 3; do
      t0=$(date +%s%N); ${cmds[$i]} >/dev/null 2>&1; t1=$(date +%s%N)
      [ "$r" -eq 0 ] || echo "$(( (t1 - t0) / 1000 ))" >>"$tmp/${names[$i]}"
    done
  done
  for n in "${names[@]}"; do
    med[$n]=$(sort -n "$tmp/$n" | awk '{a[NR]=$1} END {m = (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2; print m / 1000}')
  done
fi

awk -v ln="${med[lua_N]}" -v tn="${med[tracer_N]}" -v l0="${med[lua_0]}" -v t0="${med[tracer_0]}" -v n="$N" 'BEGIN {
  printf "%-28s %10s %10s %10s\n", "median wall time (ms)", "N=" n, "N=0", "script"
  printf "%-28s %10.1f %10.1f %10.1f\n", "lua", ln, l0, ln - l0
  printf "%-28s %10.1f %10.1f %10.1f\n", "tracer", tn, t0, tn - t0
  whole = tn / ln; script = (tn - t0) / (ln - l0)
  printf "ratio tracer/lua: whole process %.2fx, script only %.2fx\n", whole, script
  printf "target: within 2x of Lua (script only): %s\n", (script <= 2 ? "MET" : "NOT MET")
}'
