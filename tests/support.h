// Helpers shared by the tests: locating test data, reading files, running script sources.
#pragma once
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <map>
#include <stdexcept>

#include "interpreter/interp.h"
#include "interpreter/passes.h"

namespace tracer::test {

#ifndef TRACER_SOURCE_DIR_DEFAULT
#define TRACER_SOURCE_DIR_DEFAULT "."
#endif
#ifndef TRACER_THUNDER_TRACES_DEFAULT
#define TRACER_THUNDER_TRACES_DEFAULT "../shared/thunder_traces"
#endif

// The source tree (for examples/ and tests/ data); TRACER_SOURCE_DIR overrides.
inline std::string source_dir() {
  const char* d = std::getenv("TRACER_SOURCE_DIR");
  return d ? d : TRACER_SOURCE_DIR_DEFAULT;
}

// The shared Thunder printouts; TRACER_THUNDER_TRACES overrides the configured default
// (the CMake setting of the same name, ../shared/thunder_traces beside the checkout).
inline std::string thunder_dir() {
  const char* d = std::getenv("TRACER_THUNDER_TRACES");
  return d ? d : TRACER_THUNDER_TRACES_DEFAULT;
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::vector<std::string> files_in(const std::string& dir, const std::string& ext) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ext) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// The examples that are traced programs (an entry with typed inputs), not scripts: a script
// (`if __name__ == "__main__":`, like examples/train_gpt.trace) runs its own top level and has
// its own tests.
inline std::vector<std::string> example_programs(const std::string& examples_dir) {
  std::vector<std::string> out;
  for (const std::string& f : files_in(examples_dir, ".trace"))
    if (read_file(f).find("\nif __name__ == \"__main__\":") == std::string::npos) out.push_back(f);
  return out;
}

// Runs `tracer ARGS` (the binary at cli, in the source tree) and returns what it printed: stdout,
// and stderr too with_stderr; *rc gets the exit status as pclose gives it.
inline std::string run_tracer(const std::string& cli, const std::string& args, bool with_stderr, int* rc) {
  std::string full = "cd '" + source_dir() + "' && '" + cli + "' " + args + (with_stderr ? " 2>&1" : " 2>/dev/null");
  std::string out;
  FILE* p = popen(full.c_str(), "r");
  if (!p) {
    *rc = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *rc = pclose(p);
  return out;
}

struct ScriptRun {
  bool ok = false;
  std::string output;
  std::string rendered;  // diagnostics
  DiagnosticList diags;
  SourceManager sm;
};

// Loads (runs) a module from text with a fresh interpreter, capturing print() output.
// allow_read: a directory the script may also read below (load, load_module), beside its own.
inline void run_script(ScriptRun& r, const std::string& name, const std::string& text, interp::Options opts = {},
                       const std::string& allow_read = "") {
  interp::Interpreter in(r.sm, opts);
  if (!allow_read.empty()) in.allow_read(allow_read);
  in.on_print = [&](const std::string& s) { r.output += s; };
  r.ok = in.load(name, text, r.diags) != nullptr;
  r.rendered = r.diags.render_all(r.sm);
}

inline std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream is(s);
  std::string l;
  while (std::getline(is, l)) out.push_back(l);
  return out;
}

// The traces of examples/gpt.trace at a small size (B=2, T=32, V=256, D=64, 4 heads, 2 blocks)
// after `passes`.
inline interp::Traces gpt_program(interp::Interpreter& in, const std::vector<std::string>& passes) {
  DiagnosticList diags;
  std::map<std::string, interp::Value> small = {{"B", interp::Value::integer(2)},  {"T", interp::Value::integer(32)},
                                                {"V", interp::Value::integer(256)}, {"D", interp::Value::integer(64)},
                                                {"NH", interp::Value::integer(4)},  {"L", interp::Value::integer(2)}};
  auto m = in.load("gpt.trace", read_file(source_dir() + "/examples/gpt.trace"), diags, small);
  if (!m) throw std::runtime_error("examples/gpt.trace did not load");
  auto t = in.trace(*m->globals.at("main").as<interp::FunctionObj>(), {});
  return interp::run_passes(in, {t}, passes, {}, nullptr);
}

}  // namespace tracer::test
