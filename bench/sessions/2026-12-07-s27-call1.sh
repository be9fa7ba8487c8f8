#!/usr/bin/env bash
# Session 27, call 1: the new primitives on the GPU. tests/gpu/ops.trace's ops_special,
# ops_thunder_more and ops_unary_more on cuda against the CPU (both without passes and fused),
# then tests/gpu/special_torch.py against PyTorch on the same data (cuda, and the CPU build),
# the sort kernel against the host path and torch (bench/sort_probe.trace, bench/sort_torch.py),
# then the whole GPU suite (tests/gpu/run.sh).
set -u
cd "$(dirname "$0")/../.."
T=.dev/tracer
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__)"
tmp=$(mktemp -d)
for e in ops_special ops_thunder_more ops_unary_more; do
  for passes in "" "fuse"; do
    rm -rf $tmp/c $tmp/g
    $T run tests/gpu/ops.trace --entry $e ${passes:+--passes $passes} --output $tmp/c > $tmp/c.log 2>&1 || { echo "FAIL $e cpu"; tail -5 $tmp/c.log; }
    $T run tests/gpu/ops.trace --entry $e ${passes:+--passes $passes} --device cuda --output $tmp/g > $tmp/g.log 2>&1 || { echo "FAIL $e gpu"; tail -20 $tmp/g.log; }
    grep "^#" $tmp/g.log | tail -1
    python3 tests/gpu/compare.py $tmp/c $tmp/g "$e ${passes:-none}" | grep -v "^ok" ; echo "compare $e ${passes:-none} rc=${PIPESTATUS[0]}"
  done
done
echo "== special_torch cuda"; python3 tests/gpu/special_torch.py $T cuda; echo "rc=$?"
echo "== special_torch cpu"; python3 tests/gpu/special_torch.py $T cpu | grep -v "^ok"; echo "rc=${PIPESTATUS[0]}"
echo "== sort bench (median of 20 after a warm-up run; bench/sort_probe.trace)"
for e in router_top2 sample_top50 sort_rows; do
  echo "tracer $e kernel: $($T run bench/sort_probe.trace --entry $e --device cuda --bench 20 2>&1 | grep '^# bench')"
  echo "tracer $e host:   $(TRACER_SORT_HOST=1 $T run bench/sort_probe.trace --entry $e --device cuda --bench 20 2>&1 | grep '^# bench')"
done
python3 bench/sort_torch.py
echo "== printout"; $T run tests/thunder/topk_gather_special.txt --device cuda 2>&1 | tail -1
echo "== tests/gpu/run.sh"; timeout ${RUN_SH_LIMIT:-300} bash tests/gpu/run.sh $T > $tmp/run.log 2>&1; echo "run.sh rc=$? (124: cut at the limit)"
grep -c "^ok\|  ok" $tmp/run.log; grep "FAIL" $tmp/run.log | head -20; [ -n "${OUT:-}" ] && cp $tmp/run.log $OUT/run.log
