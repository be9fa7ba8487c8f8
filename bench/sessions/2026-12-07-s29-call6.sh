#!/usr/bin/env bash
# Session 29, call 6: tests/gpu/run.sh with fuse opening composites, without its ops.trace loop
# (run in calls 1 and 3): every example on cuda against the CPU, then the attention, printouts,
# convolution, RNG and graph sections, to the time left.
cd "$(dirname "$0")/../.."
{ sed -n 1,40p tests/gpu/run.sh; sed -n "55,\$p" tests/gpu/run.sh; } > tests/gpu/run_part.tmp.sh
timeout ${LIMIT:-250} bash tests/gpu/run_part.tmp.sh .dev/tracer > /tmp/run_part.log 2>&1; echo "rc=$? (124: cut at the limit)"
grep -c "^ok" /tmp/run_part.log; grep "FAIL\|GPU TESTS" /tmp/run_part.log | head -20; tail -3 /tmp/run_part.log | cut -c1-200
[ -n "${OUT:-}" ] && cp /tmp/run_part.log $OUT/run_part.log
