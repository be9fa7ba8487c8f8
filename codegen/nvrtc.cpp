// NVRTC through dlopen; see nvrtc.h. The few entry points used are declared here (NVRTC's C API
// is stable across versions), so building needs no CUDA headers.
#include "codegen/nvrtc.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

namespace tracer::codegen {

namespace {
using Result = int;  // nvrtcResult; 0 is NVRTC_SUCCESS
using Program = void*;
}  // namespace

struct Nvrtc::Api {
  Result (*version)(int*, int*) = nullptr;
  Result (*create)(Program*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  Result (*compile)(Program, int, const char* const*) = nullptr;
  Result (*log_size)(Program, size_t*) = nullptr;
  Result (*log)(Program, char*) = nullptr;
  Result (*cubin_size)(Program, size_t*) = nullptr;
  Result (*cubin)(Program, char*) = nullptr;
  Result (*ptx_size)(Program, size_t*) = nullptr;
  Result (*ptx)(Program, char*) = nullptr;
  Result (*destroy)(Program*) = nullptr;
  const char* (*error)(Result) = nullptr;
};

std::shared_ptr<Nvrtc> Nvrtc::load(std::string* why) {
  std::vector<std::string> candidates;
  if (const char* p = std::getenv("TRACER_NVRTC")) candidates.push_back(p);
  for (const char* n : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) candidates.push_back(n);
  std::vector<std::string> dirs;
  if (const char* h = std::getenv("CUDA_HOME")) dirs.push_back(std::string(h) + "/lib64");
  dirs.push_back("/usr/local/cuda/lib64");
  for (const auto& d : dirs)
    for (const char* n : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) candidates.push_back(d + "/" + n);
  std::string tried;
  for (const auto& c : candidates) {
    void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      tried += "\n  " + c + ": " + dlerror();
      continue;
    }
    std::shared_ptr<Nvrtc> n(new Nvrtc());
    n->handle_ = h;
    n->path_ = c;
    n->api_ = std::make_unique<Api>();
    Api& a = *n->api_;
    bool ok = true;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      if (!fn) {
        ok = false;
        tried += "\n  " + c + ": no symbol " + name;
      }
    };
    sym(a.version, "nvrtcVersion");
    sym(a.create, "nvrtcCreateProgram");
    sym(a.compile, "nvrtcCompileProgram");
    sym(a.log_size, "nvrtcGetProgramLogSize");
    sym(a.log, "nvrtcGetProgramLog");
    sym(a.cubin_size, "nvrtcGetCUBINSize");
    sym(a.cubin, "nvrtcGetCUBIN");
    sym(a.ptx_size, "nvrtcGetPTXSize");
    sym(a.ptx, "nvrtcGetPTX");
    sym(a.destroy, "nvrtcDestroyProgram");
    sym(a.error, "nvrtcGetErrorString");
    if (ok) return n;
  }
  if (why) *why = "NVRTC (the CUDA runtime compiler) was not found; set TRACER_NVRTC to libnvrtc.so's path. Tried:" + tried;
  return nullptr;
}

// The library stays loaded for the life of the process: NVRTC keeps allocations in its own
// globals (its C++ runtime's pools), which unloading would turn into leaks.
Nvrtc::~Nvrtc() = default;

std::string Nvrtc::version() const {
  int major = 0, minor = 0;
  api_->version(&major, &minor);
  return std::to_string(major) + "." + std::to_string(minor);
}

CompileResult Nvrtc::compile(const std::string& source, const std::string& name, const std::string& arch, Emit emit) const {
  CompileResult r;
  auto t0 = std::chrono::steady_clock::now();
  const Api& a = *api_;
  // TRACER_DUMP_KERNELS=DIR: every kernel's source as compiled (DIR/NAME.cu), for profilers and
  // for reading what a run generated (the executor's horizontal kernels among them).
  if (const char* dir = std::getenv("TRACER_DUMP_KERNELS"); dir && *dir) {
    std::ofstream f(std::string(dir) + "/" + name + ".cu");
    f << source;
  }
  Program prog = nullptr;
  Result rc = a.create(&prog, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr);
  if (rc != 0) {
    r.log = std::string("nvrtcCreateProgram: ") + a.error(rc);
    return r;
  }
  // A real architecture (sm_90) gives a cubin; its virtual one (compute_90) gives PTX.
  std::string target = arch;
  if (emit == Emit::ptx && target.rfind("sm_", 0) == 0) target = "compute_" + target.substr(3);
  std::string gpu = "--gpu-architecture=" + target;
  const char* opts[] = {gpu.c_str(), "-std=c++17", "--device-as-default-execution-space", "--fmad=false"};
  rc = a.compile(prog, 4, opts);
  size_t n = 0;
  if (a.log_size(prog, &n) == 0 && n > 1) {
    r.log.resize(n);
    a.log(prog, r.log.data());
    while (!r.log.empty() && (r.log.back() == '\0' || r.log.back() == '\n')) r.log.pop_back();
  }
  if (rc == 0) {
    bool want_ptx = emit == Emit::ptx;
    if ((want_ptx ? a.ptx_size(prog, &n) : a.cubin_size(prog, &n)) == 0) {
      r.binary.resize(n);
      if ((want_ptx ? a.ptx(prog, r.binary.data()) : a.cubin(prog, r.binary.data())) == 0) {
        if (want_ptx)
          while (!r.binary.empty() && r.binary.back() == '\0') r.binary.pop_back();
        r.ok = true;
      }
    }
    if (!r.ok && r.log.empty()) r.log = "NVRTC compiled the program but returned no " + std::string(want_ptx ? "PTX" : "cubin") + " for " + target;
  } else if (r.log.empty()) {
    r.log = a.error(rc);
  }
  a.destroy(&prog);
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string Nvrtc::explain(const std::string& name, const std::string& source, const std::string& log) {
  // The compiler's words first; then only the source lines they point at ("prog(123): error"),
  // with two lines either side. `tracer compile --emit cuda -o DIR` writes the whole source.
  std::ostringstream o;
  std::string trimmed = log;
  while (!trimmed.empty() && (trimmed.back() == '\n' || trimmed.back() == ' ' || trimmed.back() == '\0')) trimmed.pop_back();
  o << "NVRTC could not compile kernel '" << name << "':\n" << trimmed << "\n";
  std::vector<std::string> lines;
  {
    std::istringstream in(source);
    std::string line;
    while (std::getline(in, line)) lines.push_back(line);
  }
  std::set<size_t> wanted;
  for (size_t at = log.find("): "); at != std::string::npos; at = log.find("): ", at + 1)) {
    size_t open = log.rfind('(', at);
    if (open == std::string::npos) continue;
    std::string num = log.substr(open + 1, at - open - 1);
    if (num.empty() || num.size() > 7 || num.find_first_not_of("0123456789") != std::string::npos) continue;
    size_t n = std::stoul(num);
    if (n == 0 || n > lines.size()) continue;
    for (size_t k = n > 2 ? n - 2 : 1; k <= std::min(lines.size(), n + 2); ++k) wanted.insert(k);
  }
  if (!wanted.empty()) {
    o << "generated source (the lines the log names; " << lines.size() << " in all):\n";
    size_t prev = 0;
    for (size_t k : wanted) {
      if (prev && k != prev + 1) o << "  ... |\n";
      char num[16];
      std::snprintf(num, sizeof num, "%5zu | ", k);
      o << num << lines[k - 1] << "\n";
      prev = k;
    }
  }
  o << "(tracer compile --emit cuda -o DIR writes the generated source)";
  return o.str();
}

}  // namespace tracer::codegen
