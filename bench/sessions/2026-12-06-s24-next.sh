#!/usr/bin/env bash
# Ready for the next session (written in session 24, whose device time ran out first): column groups of five and six reductions (no launch bound, a wave of 132
# blocks: session 23's rule, never run on a GPU), odd sizes, against the CPU; and the five-sum
# group of bench/sessions/2026-12-06-s23-next.sh timed against the earlier rule (TRACER_COLUMN_WAVE=0).
# Carry [".dev"].
set -uo pipefail
export T=.dev/tracer TRACER_CACHE_DIR=/tmp/trk
tmp=$(mktemp -d)
source bench/sessions/lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
cat > /tmp/cols.trace <<'TR'
def f(x0: bf16[3001, 197], x1: bf16[3001, 197], x2: f32[3001, 197], x3: bf16[3001, 197], x4: bf16[3001, 197], y: f32[777, 40]):
    a = x0.float() * x1.float()
    b = x2 * 3.0
    c = x3.float() - x4.float()
    return (sum(a, (0,)), sum(b, (0,)), amax(c, (0,)), sum(a * c, (0,)), amin(b + c, (0,)), sum(x4.float(), (0,)),
            sum(y, (0,)), sum(y * y, (0,)), amax(y, (0,)), sum(y + 1.0, (0,)), sum(y * 2.0, (0,)))
def g(x0: bf16[8192, 768], x1: bf16[8192, 768], x2: bf16[8192, 768], x3: bf16[8192, 768], x4: bf16[8192, 768]):
    return sum(x0.float() * x1.float(), (0,)), sum(x1.float() * x2.float(), (0,)), sum(x2.float() * x3.float(), (0,)), sum(x3.float() * x4.float(), (0,)), sum(x4.float() * x0.float(), (0,))
TR
check "columns: 6 and 5 reductions, odd sizes, fuse" /tmp/cols.trace --entry f --passes fuse
TRACER_COLUMN_WAVE=0 check "columns: the same, earlier rule" /tmp/cols.trace --entry f --passes fuse
check "columns: five sums [8192, 768]" /tmp/cols.trace --entry g --passes fuse
for v in "" "TRACER_COLUMN_WAVE=0" "" "TRACER_COLUMN_WAVE=0"; do
  echo "cols5 [$v] $(env $v TRACER_GPU_PROFILE=2 timeout 60 $T run /tmp/cols.trace --entry g --passes fuse --device cuda --bench 50 2>&1 | grep -E '^#  .* kernel fusion' | head -1)"
done
