// libFuzzer harness: a module through the C API, as a host would use it. The input is a
// module's text: it is loaded (parsed, its top level run), and when it defines `main` taking
// nothing, main is called eagerly and then traced with fuse (a step limit bounds runaway scripts
// and a memory limit runaway values). Any input must end in a result or a diagnostic: a crash or
// a sanitizer report is a bug. Built by scripts/fuzz.sh (clang, -fsanitize=fuzzer,address,undefined).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tracer/tracer.h"

namespace {
// Tensor storage through the C API's hooks, at most 64 MiB at once: a full-size model among the
// seeds fails its first big allocation with a message instead of running for minutes.
size_t held = 0;
void* fuzz_alloc(void*, size_t size, size_t align) {
  if (size > (size_t{64} << 20) - held) return nullptr;
  void* p = std::aligned_alloc(align < 16 ? 16 : align, (size + 63) / 64 * 64);
  if (p) held += size;
  return p;
}
void fuzz_free(void*, void* p, size_t size) {
  held -= size;
  std::free(p);
}
}  // namespace

// Lists and strings of the script are bounded too (check_size reads the same limit).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("TRACER_MEMORY_LIMIT", "64M", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  tracer_config cfg;
  tracer_config_init(&cfg);
  cfg.step_limit = 20000;
  cfg.alloc = fuzz_alloc;
  cfg.free = fuzz_free;
  tracer_state* S = nullptr;
  if (tracer_open(&cfg, &S) != TRACER_OK) return 0;
  if (tracer_load_string(S, "fuzz.trace", text.c_str()) == TRACER_OK) {
    tracer_function* f = nullptr;
    if (tracer_function_get(S, "main", &f) == TRACER_OK) {
      tracer_value results[16];
      size_t n = 0;
      if (tracer_call(S, f, nullptr, 0, results, 16, &n) == TRACER_OK) tracer_values_release(results, n);
      if (tracer_set_passes(S, "fuse,del_last_used") == TRACER_OK &&
          tracer_call(S, f, nullptr, 0, results, 16, &n) == TRACER_OK)
        tracer_values_release(results, n);
      tracer_function_release(f);
    }
  }
  (void)tracer_diagnostics_rendered(S);
  tracer_close(S);
  return 0;
}
