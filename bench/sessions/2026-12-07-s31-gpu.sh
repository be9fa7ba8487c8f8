#!/usr/bin/env bash
# Session 31's two GPU calls: the pieces of tests/gpu/run.sh (at 012309e; line numbers of that
# commit) that session 30 could not run, cut out of it into .dev/ and run from there as
#   bash .dev/partA.sh $PWD/.dev/tracer      (the in-place twin, lines 90-165)
#   bash .dev/partB.sh $PWD/.dev/tracer      (run.sh's cuDNN choice, lines 243-end)
# Results: bench/results/2026-12-07-h200-s31.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
r=tests/gpu/run.sh
{ sed -n 1,16p $r
  echo 'python3 tests/gpu/inplace_torch.py "$TRACER" cuda; [ $? = 0 ] || { echo "FAIL inplace_torch.py"; fail=1; }'
  echo 'python3 tests/gpu/inplace_torch.py "$TRACER" cpu | tail -1; [ ${PIPESTATUS[0]} = 0 ] || { echo "FAIL inplace_torch.py cpu"; fail=1; }'
  sed -n 78,165p $r
  echo '[ $fail = 0 ] && echo "PART A PASSED" || echo "PART A FAILED"'; } > .dev/partA.sh
{ sed -n 1,16p $r; sed -n 78,89p $r; sed -n 171,174p $r; sed -n '243,$p' $r; } > .dev/partB.sh
sed -i 's|^cd "$(dirname "$0")/../.."|cd "$(dirname "$0")/.."|' .dev/partA.sh .dev/partB.sh
