// libFuzzer harness: the .npy and .safetensors readers on any bytes (written to a file, as the
// readers take paths). A malformed file must be an exception with a message; a crash, a
// sanitizer report or an allocation past the limit is a bug. Built by scripts/fuzz.sh.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>

#include "runtime/io.h"
#include "runtime/tensor.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/tracer_fuzz_tensors_" + std::to_string(getpid());
  static tracer::rt::Allocator* al = [] {
    auto* a = new tracer::rt::Allocator();
    a->set_limit(size_t{256} << 20);  // a header that claims terabytes must be refused, not tried
    return a;
  }();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    (void)tracer::rt::read_npy(path, al);
  } catch (const std::exception&) {
  }
  try {
    (void)tracer::rt::read_safetensors(path, al);
  } catch (const std::exception&) {
  }
  return 0;
}
