// NVRTC, loaded at run time (dlopen): CUDA C++ to cubin or PTX, with no GPU and no CUDA toolkit
// at build time. The library is found as $TRACER_NVRTC (a path), else libnvrtc.so.13 / .12 /
// libnvrtc.so on the loader's path, else under $CUDA_HOME/lib64 and /usr/local/cuda/lib64.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace tracer::codegen {

enum class Emit { cuda, ptx, cubin };

struct CompileResult {
  bool ok = false;
  std::string binary;  // the cubin or PTX text
  std::string log;     // the compiler's log (warnings too)
  double ms = 0;       // wall time of the compilation
};

class Nvrtc {
 public:
  // The loaded library, or null with the reason in *why (every place searched).
  static std::shared_ptr<Nvrtc> load(std::string* why);
  ~Nvrtc();
  Nvrtc(const Nvrtc&) = delete;
  Nvrtc& operator=(const Nvrtc&) = delete;

  // "13.0"
  std::string version() const;
  // The options every compilation uses besides the architecture (part of cache keys).
  // --fmad=false: no contraction of a * b + c into one rounding, so results match the CPU's.
  static const char* options() { return "-std=c++17 --device-as-default-execution-space --fmad=false"; }
  const std::string& path() const { return path_; }
  // Compiles source (one translation unit named name) for arch ("sm_90"): a cubin, or PTX for
  // the matching virtual architecture when emit is Emit::ptx.
  CompileResult compile(const std::string& source, const std::string& name, const std::string& arch, Emit emit) const;

  // A failed compilation as users read it: the kernel, the generated source with line numbers,
  // the compiler's log.
  static std::string explain(const std::string& name, const std::string& source, const std::string& log);

 private:
  Nvrtc() = default;
  struct Api;
  void* handle_ = nullptr;
  std::string path_;
  std::unique_ptr<Api> api_;
};

}  // namespace tracer::codegen
