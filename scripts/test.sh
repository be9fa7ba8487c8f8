#!/usr/bin/env bash
# Sets up, builds and runs every test: the release build, then every test again under
# AddressSanitizer and UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$jobs"
# Tests labelled gpu need an NVIDIA GPU; without one they are left out, and said so.
gpu_args=(-LE gpu)
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then gpu_args=(); else
  echo "no GPU found: the tests labelled gpu are not run"; fi
ctest --test-dir build -j"$jobs" --output-on-failure "${gpu_args[@]}"
# -O1: the sanitizers' own advice for a usable speed (the tests ran 2 to 4 times slower at -O0);
# assertions stay on (Debug).
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" -DCMAKE_C_FLAGS_DEBUG="-O1 -g" \
  -DTRACER_SANITIZE=ON
cmake --build build-asan -j"$jobs"
# The 120-step training run checks convergence, which the release build checked above; under the
# sanitizers it would take ten minutes, and its code paths run in the resume test all the same.
# intercept_tls_get_addr=0: GCC 12's sanitizer runtime takes a dynamic TLS block (NVRTC's, loaded
# by dlopen) whose address is 16 past a page boundary for a glibc-2.19 header and reads a bogus
# range from it; LeakSanitizer then crashes at exit after every assertion passed
# (google/sanitizers#1322; fixed in GCC 14 and LLVM 17). No tracer memory lives in dynamic TLS.
# suppressions: scripts/asan.supp (NVRTC's own strlen past its buffer, read from NVRTC's code).
# Under the sanitizers CI's time goes where memory errors can hide (it took 45 of CI's 70 minutes
# with everything, session 28): 400 mutants instead of 600 (70 s); one NVRTC test
# (tests/gpu/ops.trace, which generates every kind of kernel source) instead of six; the
# command-line tests only for the multi-rank jobs (the others run the same interpreter code
# the in-process tests run here, and all of them run in the release build above).
export ASAN_OPTIONS=detect_leaks=1:intercept_tls_get_addr=0:suppressions=$PWD/scripts/asan.supp UBSAN_OPTIONS=print_stacktrace=1
TRACER_MUTANTS=400 ctest --test-dir build-asan -j"$jobs" --output-on-failure -LE "gpu|cli" \
  -E "the loss falls well below|NVRTC compiles every example|NVRTC compiles a convolution|NVRTC compiles attention|NVRTC compiles the kernels of (Thunder|writes)"
ctest --test-dir build-asan -j"$jobs" --output-on-failure -L cli -R "^cli\.dist_"
# The libFuzzer harnesses (clang): the regression inputs, then a bounded deterministic run each.
./scripts/fuzz.sh --ci
