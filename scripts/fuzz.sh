#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz/: the module loader and interpreter through the C
# API; the .npy and .safetensors readers) with clang, ASan and UBSan into build-fuzz/, and runs
# each, seeded from every .trace file and printout in the tree (and ../shared/thunder_traces),
# with the language's dictionary. Every input in tests/fuzz/regressions/ is replayed first.
#
#   scripts/fuzz.sh            each harness for FUZZ_SECONDS (default 60) seconds
#   FUZZ_SECONDS=3600 scripts/fuzz.sh    an hour each
#   scripts/fuzz.sh --ci       the regressions, then each harness for a fixed number of runs from
#                              a fixed seed (FUZZ_RUNS_MODULE=250, FUZZ_RUNS_TENSORS=4000;
#                              deterministic; scripts/test.sh runs this)
# A crash leaves crash-* in build-fuzz/out/: minimize it (-minimize_crash=1), fix the bug, and add
# the input to tests/fuzz/regressions/<harness>/.
set -euo pipefail
cd "$(dirname "$0")/.."
ci=0
[ "${1:-}" = "--ci" ] && ci=1
jobs=$(nproc)
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DTRACER_FUZZ=ON -DTRACER_BUILD_TESTS=OFF >/dev/null
cmake --build build-fuzz -j"$jobs" --target tracer_fuzz_module tracer_fuzz_tensors
seeds=build-fuzz/seeds
rm -rf "$seeds" && mkdir -p "$seeds/module" "$seeds/tensors" build-fuzz/out build-fuzz/corpus/module build-fuzz/corpus/tensors
# Seeds named by their contents, so that every machine reads the same corpus in the same order.
for f in $(find examples tests stdlib -name '*.trace') tests/thunder/*.txt ../shared/thunder_traces/*; do
  [ -f "$f" ] && cp "$f" "$seeds/module/$(sha1sum < "$f" | cut -c1-16)"
done
for f in tests/cli/*.safetensors; do cp "$f" "$seeds/tensors/$(sha1sum < "$f" | cut -c1-16)"; done
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
for h in module tensors; do
  bin=build-fuzz/tests/fuzz/tracer_fuzz_$h
  reg=tests/fuzz/regressions/$h
  if [ -d "$reg" ] && [ -n "$(ls -A "$reg")" ]; then
    echo "fuzz $h: replaying $(ls "$reg" | wc -l) regression inputs"
    "$bin" -rss_limit_mb=4096 "$reg"/*
  fi
  opts=(-rss_limit_mb=4096 -timeout=30 -max_len=16384 -artifact_prefix=build-fuzz/out/ -print_final_stats=1)
  [ $h = module ] && opts+=(-dict=tests/fuzz/trace.dict)
  if [ $ci = 1 ]; then
    # From the seeds alone, a fixed seed and number of runs: the same inputs on every machine.
    # The module harness opens a session an input, which parses the whole standard library under
    # the sanitizers (about 1.5 s an input with session 30's; 400 runs took 10 of CI's minutes):
    # 250 runs.
    runs=$([ $h = module ] && echo "${FUZZ_RUNS_MODULE:-250}" || echo "${FUZZ_RUNS_TENSORS:-4000}")
    "$bin" "${opts[@]}" -seed=1 -runs="$runs" "$seeds/$h" 2>&1 | tail -3
  else
    "$bin" "${opts[@]}" -max_total_time="${FUZZ_SECONDS:-60}" "build-fuzz/corpus/$h" "$seeds/$h" 2>&1 | tail -4
  fi
done
