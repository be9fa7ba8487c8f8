// The public Session API over the interpreter, the Trace IR and the CPU runtime.
#include "tracer/session.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <future>
#include <regex>
#include <thread>
#include <fstream>
#include <iostream>
#include <set>
#include <unordered_set>
#include <sstream>

#include "api/inputs.h"
#include "codegen/cuda_codegen.h"
#include "codegen/cuda_exec.h"
#include "codegen/nvrtc.h"
#include "interpreter/builtins.h"
#include "interpreter/interp.h"
#include "interpreter/passes.h"
#include "ir/memory.h"
#include "ir/verify.h"
#include "runtime/io.h"
#include "runtime/summary.h"

namespace tracer {

using interp::Interpreter;
using interp::Value;
using interp::VT;

struct Session::Impl {
  SessionOptions opts;
  SourceManager sm;
  std::unique_ptr<Interpreter> in;
  std::shared_ptr<interp::Module> module;
  std::map<std::string, Value> pinned;
  std::map<std::string, rt::Tensor> inputs;
  std::map<std::string, std::string> input_sources;
  std::vector<std::string> passes;
  interp::PassOptions pass_opts;
  std::vector<PassInfo> timings;
  std::vector<DiagnosticInfo> diags;
  std::unique_ptr<rt::cuda::Device> gpu;
  std::unique_ptr<codegen::GpuExecutor> gexec;
  int bench = 0;
  bool cuda_graph = false;

  explicit Impl(SessionOptions o) : opts(std::move(o)) {
    interp::Options io;
    io.seed = opts.seed;
    io.step_limit = opts.step_limit;
    in = std::make_unique<Interpreter>(sm, io);
    in->on_print = opts.print ? opts.print : [](const std::string& s) { std::cout << s << std::flush; };
    pass_opts.on_print_after = [this](const std::string& pass, const interp::Traces& ts) {
      in->on_print("# after " + pass + "\n" + interp::print_traces(ts));
    };
  }

  // The entry traced, then transformed by the session's passes.
  std::optional<interp::Traces> program(const std::string& entry) {
    auto t = trace(entry);
    if (!t) return std::nullopt;
    if (passes.empty()) return interp::Traces{t};
    timings.clear();
    std::vector<interp::PassTiming> ts;
    try {
      interp::Traces out = interp::run_passes(*in, {t}, passes, pass_opts, &ts);
      for (const auto& x : ts) timings.push_back({x.name, x.ms});
      return out;
    } catch (const interp::PassError& e) {
      add(e.diag);
      return std::nullopt;
    }
  }

  void add(const Diagnostic& d) {
    auto info = [&](const Diagnostic& x) {
      DiagnosticInfo i;
      i.severity = x.severity == Severity::error ? "error" : x.severity == Severity::warning ? "warning" : "note";
      if (x.loc.valid()) {
        i.file = sm.name(x.loc.file);
        LineCol lc = sm.line_col(x.loc);
        i.line = lc.line;
        i.column = lc.col;
      }
      i.message = x.message;
      i.rendered = render(sm, x);
      return i;
    };
    DiagnosticInfo main = info(d);
    main.rendered = render(sm, d);  // with its notes
    diags.push_back(std::move(main));
  }
  void add_all(const DiagnosticList& l) {
    for (const auto& d : l.items()) add(d);
  }
  void error(const std::string& msg) { add(Diagnostic{Severity::error, {}, msg, {}}); }
  std::vector<rt::Tensor> make_inputs(const ir::Trace& t, const std::string& entry, RunReport& rep, bool* ok);
  void script_error(const interp::ScriptError& e) { add(in->diagnose(e)); }

  static bool read_file(const std::string& path, std::string* out, std::string* why) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      *why = "is a directory";
      return false;
    }
    std::ifstream f(path, std::ios::binary);
    if (!f) {
      *why = std::strerror(errno);
      return false;
    }
    std::ostringstream ss;
    ss << f.rdbuf();
    *out = ss.str();
    return true;
  }

  // Thunder separates the traces of one printout by a line of asterisks: read it as a comment.
  static void comment_separators(std::string& text) {
    size_t pos = 0;
    while (pos < text.size()) {
      size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      size_t n = end - pos;
      if (n >= 8 && text.find_first_not_of("*\r", pos) >= end) text[pos] = '#';
      pos = end + 1;
    }
  }

  const interp::FunctionObj* function(const std::string& name) {
    if (!module) return nullptr;
    auto it = module->globals.find(name);
    if (it == module->globals.end() || !it->second.is(VT::Function)) return nullptr;
    return it->second.as<interp::FunctionObj>();
  }

  std::map<std::string, ir::TensorType> given_types() const {
    std::map<std::string, ir::TensorType> out;
    for (const auto& [name, t] : inputs) out[name] = ir::TensorType{t.dtype(), t.shape(), "cpu"};
    return out;
  }

  std::shared_ptr<ir::Trace> trace(const std::string& entry) {
    const interp::FunctionObj* fn = function(entry);
    if (!fn) {
      error("no function named '" + entry + "' in the module");
      return nullptr;
    }
    try {
      auto t = in->trace(*fn, given_types());
      if (!verify_trace(*t, "tracing")) return nullptr;
      return t;
    } catch (const interp::ScriptError& e) {
      script_error(e);
      return nullptr;
    }
  }

  bool verify_trace(const ir::Trace& t, const std::string& stage) {
    auto errs = ir::verify(t);
    for (const auto& e : errs)
      add(Diagnostic{Severity::error, e.loc, "internal error: the trace after " + stage + " is invalid: " + e.message +
                                                 (e.stmt.empty() ? "" : " (in: " + e.stmt + ")") +
                                                 "; please report this with the input file",
                     {}});
    return errs.empty();
  }

  void undefined_names(const interp::Module& m) {
    std::set<std::pair<uint32_t, std::string>> seen;
    for (const ast::Expr* e : m.global_refs) {
      if (m.module_defs.count(e->name) || in->builtins().lookup(e->name) || pinned.count(e->name)) continue;
      if (!seen.insert({e->loc.offset, e->name}).second) continue;
      add(Diagnostic{Severity::error, e->loc, "name '" + e->name + "' is not defined", {}});
    }
  }
};

Session::Session(SessionOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {}
Session::~Session() = default;

void Session::set(const std::string& name, const std::string& value) {
  Value v;
  char* end = nullptr;
  long long i = std::strtoll(value.c_str(), &end, 10);
  if (!value.empty() && *end == '\0') {
    v = Value::integer(i);
  } else {
    double d = std::strtod(value.c_str(), &end);
    if (!value.empty() && *end == '\0') v = Value::number(d);
    else if (value == "True" || value == "False") v = Value::boolean(value == "True");
    else v = interp::str_value(value);
  }
  impl_->pinned[name] = v;
}

bool Session::load_string(const std::string& name, const std::string& text) {
  std::string t = text;
  Impl::comment_separators(t);
  DiagnosticList dl;
  impl_->module = impl_->in->load(name, std::move(t), dl, impl_->pinned);
  impl_->add_all(dl);
  return impl_->module != nullptr;
}

bool Session::load_file(const std::string& path) {
  std::string text, why;
  if (!Impl::read_file(path, &text, &why)) {
    impl_->error("cannot read '" + path + "': " + why);
    return false;
  }
  return load_string(path, text);
}

bool Session::check_file(const std::string& path, bool parse_only, const std::string& entry) {
  std::string text, why;
  if (!Impl::read_file(path, &text, &why)) {
    impl_->error("cannot read '" + path + "': " + why);
    return false;
  }
  Impl::comment_separators(text);
  DiagnosticList dl;
  auto m = impl_->in->parse(path, text, dl);
  impl_->add_all(dl);
  if (!m || parse_only) return m != nullptr;
  size_t before = impl_->diags.size();
  impl_->undefined_names(*m);
  if (impl_->diags.size() != before) return false;
  // Module top levels are definitions; run them quietly so the entry can be traced symbolically.
  auto print = impl_->in->on_print;
  impl_->in->on_print = [](const std::string&) {};
  bool loaded = load_string(path, text);
  impl_->in->on_print = print;
  if (!loaded) return false;
  auto e = this->entry(entry);
  if (!e) return entry.empty() && impl_->diags.size() == before;  // a module without functions
  const interp::FunctionObj* fn = impl_->function(*e);
  try {
    impl_->in->input_types(*fn, impl_->given_types());
  } catch (const interp::ScriptError& e) {
    // An entry without input types is not an error for check: there is nothing to trace.
    if (entry.empty() && e.message.find("has no tensor type") != std::string::npos) return true;
    impl_->script_error(e);
    return false;
  }
  return impl_->trace(*e) != nullptr;
}

std::vector<std::string> Session::functions() const {
  std::vector<std::string> out;
  if (!impl_->module) return out;
  for (const auto& s : impl_->module->ast->body)
    if (s->kind == ast::StmtKind::FunctionDef) out.push_back(s->name);
  return out;
}

std::optional<std::string> Session::entry(const std::string& requested) {
  std::vector<std::string> fs = functions();
  if (!requested.empty()) {
    if (impl_->function(requested)) return requested;
    std::string known;
    for (const auto& f : fs) known += (known.empty() ? "" : ", ") + f;
    impl_->error("no function named '" + requested + "'" + (known.empty() ? "" : " (functions: " + known + ")"));
    return std::nullopt;
  }
  if (impl_->function("main")) return std::string("main");
  for (auto it = fs.rbegin(); it != fs.rend(); ++it)
    if (impl_->function(*it)) return *it;
  impl_->error("the module defines no function to run");
  return std::nullopt;
}

bool Session::add_input(const std::string& name, const std::string& path) {
  try {
    bool st = path.size() > 12 && path.compare(path.size() - 12, 12, ".safetensors") == 0;
    if (st) {
      for (auto& [k, t] : rt::read_safetensors(path, &impl_->in->allocator())) {
        if (!name.empty() && k != name) continue;
        impl_->inputs[k] = t;
        impl_->input_sources[k] = path;
      }
      return true;
    }
    impl_->inputs[name] = rt::read_npy(path, &impl_->in->allocator());
    impl_->input_sources[name] = path;
    return true;
  } catch (const std::exception& e) {
    impl_->error(std::string("input '") + name + "': " + e.what());
    return false;
  }
}

std::vector<std::string> Session::known_passes() const { return impl_->in->pass_names(); }

bool Session::add_pass_file(const std::string& path) {
  std::string text, why;
  if (!Impl::read_file(path, &text, &why)) {
    impl_->error("cannot read pass file '" + path + "': " + why);
    return false;
  }
  DiagnosticList dl;
  auto m = impl_->in->load(path, text, dl, {}, /*names_values=*/false);
  impl_->add_all(dl);
  if (!m) return false;
  size_t n = 0;
  for (const auto& st : m->ast->body) {
    if (st->kind != ast::StmtKind::FunctionDef || st->name.empty() || st->name[0] == '_') continue;
    impl_->in->register_pass(st->name, m->globals.at(st->name));
    ++n;
  }
  if (n == 0) impl_->error("pass file '" + path + "' defines no public function");
  return n > 0;
}

void Session::set_pass_options(bool verify, const std::vector<std::string>& print_after) {
  impl_->pass_opts.verify = verify;
  impl_->pass_opts.print_after = print_after;
}

const std::vector<PassInfo>& Session::pass_timings() const { return impl_->timings; }

bool Session::set_passes(const std::vector<std::string>& passes) {
  std::vector<std::string> known = known_passes();
  for (const std::string& p : passes) {
    if (std::find(known.begin(), known.end(), p) != known.end()) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    impl_->error("unknown pass '" + p + "'; known passes: " + list);
    return false;
  }
  impl_->passes = passes;
  return true;
}

std::optional<std::string> Session::print(const std::string& entry) {
  auto p = impl_->program(entry);
  if (!p) return std::nullopt;
  return interp::print_traces(*p);
}

static std::vector<const ir::Trace*> raw(const interp::Traces& ts) {
  std::vector<const ir::Trace*> out;
  for (const auto& t : ts) out.push_back(t.get());
  return out;
}

std::optional<MemoryReport> Session::memory(const std::string& entry) {
  auto p = impl_->program(entry);
  if (!p) return std::nullopt;
  ir::MemReport m = ir::estimate_memory(raw(*p));
  MemoryReport r;
  r.peak_bytes = m.peak_bytes;
  r.peak_trace = m.phases.empty() ? "" : m.phases[static_cast<size_t>(m.peak_phase)];
  r.peak_index = m.peak_index;
  r.peak_statement = m.peak_stmt;
  r.saved_for_backward_bytes = m.saved_bytes;
  r.input_bytes = m.input_bytes;
  r.traces = m.phases;
  r.peak_live = m.peak_live;
  for (const auto& pt : m.timeline) r.timeline.push_back({pt.phase, pt.index, pt.live_bytes});
  return r;
}

std::optional<CompileReport> Session::compile(const std::string& entry, const std::string& arch,
                                              const std::string& emit, const std::string& out_dir) {
  namespace cg = codegen;
  if (!std::regex_match(arch, std::regex("sm_[0-9]{2,3}[a-z]?"))) {
    impl_->error("unknown GPU architecture '" + arch + "' (expected sm_NN, for example sm_90)");
    return std::nullopt;
  }
  cg::Emit kind;
  if (emit == "cuda") kind = cg::Emit::cuda;
  else if (emit == "ptx") kind = cg::Emit::ptx;
  else if (emit == "cubin") kind = cg::Emit::cubin;
  else {
    impl_->error("unknown --emit '" + emit + "' (expected cuda, ptx or cubin)");
    return std::nullopt;
  }
  std::shared_ptr<cg::Nvrtc> nvrtc;
  if (kind != cg::Emit::cuda) {
    std::string why;
    nvrtc = cg::Nvrtc::load(&why);
    if (!nvrtc) {
      impl_->error(why);
      return std::nullopt;
    }
  }
  auto p = impl_->program(entry);
  if (!p) return std::nullopt;
  if (std::find(impl_->passes.begin(), impl_->passes.end(), "fuse") == impl_->passes.end()) {
    try {
      *p = interp::run_passes(*impl_->in, *p, {"fuse"}, impl_->pass_opts, nullptr);
    } catch (const interp::PassError& e) {
      impl_->add(e.diag);
      return std::nullopt;
    }
  }
  struct Job {
    cg::Kernel kernel;
    std::string trace;
  };
  std::vector<Job> jobs;
  try {
    for (const auto& t : *p)
      for (auto& k : cg::kernels_for(*t)) jobs.push_back({std::move(k), t->name});
  } catch (const std::exception& e) {
    impl_->error(e.what());
    return std::nullopt;
  }
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) {
    impl_->error("cannot create the output directory '" + out_dir + "': " + ec.message());
    return std::nullopt;
  }
  CompileReport rep;
  rep.arch = arch;
  rep.emit = emit;
  rep.out_dir = out_dir;
  if (nvrtc) rep.nvrtc_version = nvrtc->version();
  // Kernels that differ only in names compile once (by structure); distinct ones compile in
  // parallel, one thread per core.
  auto t0 = std::chrono::steady_clock::now();
  std::vector<size_t> unique;                      // job index of each distinct structure
  std::unordered_map<std::string, size_t> slot_of;  // symbol -> index into unique
  std::vector<size_t> slot(jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) {
    auto [it, fresh] = slot_of.emplace(jobs[j].kernel.symbol, unique.size());
    if (fresh) unique.push_back(j);
    slot[j] = it->second;
  }
  std::vector<cg::CompileResult> results(unique.size());
  if (nvrtc) {
    size_t workers = std::max<size_t>(1, std::min<size_t>(unique.size(), std::thread::hardware_concurrency()));
    std::atomic<size_t> next{0};
    std::vector<std::thread> pool;
    for (size_t w = 0; w < workers; ++w)
      pool.emplace_back([&] {
        for (size_t u = next++; u < unique.size(); u = next++) {
          const cg::Kernel& k = jobs[unique[u]].kernel;
          results[u] = nvrtc->compile(k.structure, k.symbol, arch, kind);
        }
      });
    for (auto& th : pool) th.join();
    rep.compiled = unique.size();
  }
  rep.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  bool ok = true;
  std::unordered_set<size_t> written, files_done;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const cg::Kernel& k = jobs[j].kernel;
    const cg::CompileResult* res = nvrtc ? &results[slot[j]] : nullptr;
    if (res && !res->ok) {
      if (written.insert(slot[j]).second) {
        impl_->error(cg::Nvrtc::explain(k.name + " (" + k.symbol + ")", k.structure, res->log));
        ok = false;
      }
      continue;
    }
    const char* ext = kind == cg::Emit::cuda ? ".cu" : kind == cg::Emit::ptx ? ".ptx" : ".cubin";
    std::string file = (std::filesystem::path(out_dir) / ((res ? k.symbol : k.name) + ext)).string();
    const std::string& data = res ? res->binary : k.source;
    // Written whole or not at all (once per distinct kernel).
    std::string err;
    if ((!res || files_done.insert(slot[j]).second) && !rt::write_file_atomically(file, data, &err)) {
      impl_->error(err);
      return std::nullopt;
    }
    KernelInfo info;
    info.name = k.name;
    info.symbol = k.symbol;
    info.trace = jobs[j].trace;
    info.statement = k.origin;
    info.file = file;
    info.bytes = data.size();
    info.compile_ms = res && unique[slot[j]] == j ? res->ms : 0;
    info.elements = k.elements;
    info.vector_width = k.vector_width;
    rep.kernels.push_back(std::move(info));
  }
  if (!ok) return std::nullopt;
  return rep;
}

static void flatten_outputs(const ir::Arg& a, const std::string& path, std::vector<std::pair<std::string, ir::Arg>>& out) {
  if (a.kind == ir::Arg::Kind::Tensor) {
    out.emplace_back(path, a);
    return;
  }
  if (a.is_seq() || a.kind == ir::Arg::Kind::Dict) {
    for (size_t i = 0; i < a.items.size(); ++i)
      flatten_outputs(a.items[i], a.kind == ir::Arg::Kind::Dict ? path + "[" + a.keys[i] + "]" : path + "[" + std::to_string(i) + "]",
                      out);
    return;
  }
  out.emplace_back(path, a);
}

static void proxy_names(const ir::Arg& a, std::vector<std::string>& out) {
  if (a.kind == ir::Arg::Kind::Proxy) out.push_back(a.proxy->name);
  else if (a.items.empty()) out.push_back("");
  for (const auto& x : a.items) proxy_names(x, out);
}

namespace {

bool describe_output(const std::string& name, const ir::Arg& a, const std::string& output_dir, OutputInfo* o,
                     std::string* err) {
  o->name = name;
  if (a.kind != ir::Arg::Kind::Tensor) {
    o->summary = ir::print_arg(a);
    return true;
  }
  o->is_tensor = true;
  o->dtype = rt::dtype_name(a.tensor.dtype());
  o->shape = a.tensor.shape();
  o->summary = rt::summarize(a.tensor);
  for (int64_t k = 0; k < a.tensor.numel(); ++k) {
    o->sum += a.tensor.get(k);
    if (k < 6) o->head.push_back(a.tensor.get(k));
  }
  if (output_dir.empty()) return true;
  std::error_code ec;
  std::filesystem::create_directories(output_dir, ec);
  try {
    rt::write_npy(output_dir + "/" + name + ".npy", a.tensor);
  } catch (const std::exception& e) {
    *err = std::string("cannot write output: ") + e.what();
    return false;
  }
  return true;
}

}  // namespace

std::vector<rt::Tensor> Session::Impl::make_inputs(const ir::Trace& t, const std::string& entry, RunReport& rep,
                                                   bool* ok) {
  rt::Allocator& al = in->allocator();
  std::vector<rt::Tensor> xs;
  for (size_t i = 0; i < t.inputs.size(); ++i) {
    const ir::Proxy& p = *t.inputs[i];
    auto it = inputs.find(p.name);
    if (it != inputs.end()) {
      xs.push_back(it->second);
      inputs.erase(it);
    } else {
      xs.push_back(api::random_input(p.type.dtype, p.type.shape, opts.seed, i, &al));
    }
    rep.inputs.push_back({p.name, rt::dtype_name(p.type.dtype),
                          input_sources.count(p.name) ? input_sources[p.name] : "random", p.type.shape});
  }
  for (const auto& kv : inputs) error("input '" + kv.first + "' is not a parameter of '" + entry + "'");
  *ok = inputs.empty();
  return xs;
}

// Runs the backward of a (forward, backward) program: the saved tensors move in, the forward's
// output is shared, every other input (a cotangent) is ones.
static ir::Arg run_backward(const ir::Trace& fw, const ir::Trace& bw, ir::Arg& fw_out, ir::ExecContext& ctx) {
  if (!fw_out.is_seq() || fw_out.items.size() != 2 || !fw_out.items[1].is_seq())
    throw ir::ExecError{"the forward trace must return (output, saved) for its backward", {}, ""};
  std::unordered_map<const ir::Proxy*, size_t> saved;
  const auto& saved_proxies = fw.output.items[1].items;
  for (size_t i = 0; i < saved_proxies.size(); ++i)
    if (saved_proxies[i].kind == ir::Arg::Kind::Proxy) saved.emplace(saved_proxies[i].proxy.get(), i);
  const ir::Arg& out_proxy = fw.output.items[0];
  std::unordered_set<const ir::Proxy*> forward_values;
  for (const auto& p : fw.inputs) forward_values.insert(p.get());
  for (const auto& s : fw.stmts)
    for (const auto& p : s.outputs) forward_values.insert(p.get());
  std::vector<rt::Tensor> in;
  for (const auto& p : bw.inputs) {
    if (!saved.count(p.get()) && forward_values.count(p.get()) && !(out_proxy.kind == ir::Arg::Kind::Proxy && out_proxy.proxy == p))
      throw ir::ExecError{"the backward reads '" + p->name + "', which the forward computes but does not save", {}, ""};
    auto it = saved.find(p.get());
    if (it != saved.end()) {
      in.push_back(std::move(fw_out.items[1].items[it->second].tensor));
    } else if (out_proxy.kind == ir::Arg::Kind::Proxy && out_proxy.proxy == p) {
      in.push_back(fw_out.items[0].tensor);
    } else {
      in.push_back(rt::full(p->type.shape, rt::Scalar{1.0, 1, false}, p->type.dtype, ctx.allocator));
    }
  }
  fw_out.items[1].items.clear();
  return ir::execute(bw, std::move(in), ctx);
}

bool Session::set_device(const std::string& device) {
  if (device == "cpu") {
    impl_->gexec.reset();
    impl_->gpu.reset();
    return true;
  }
  std::smatch m;
  if (!std::regex_match(device, m, std::regex("cuda(:([0-9]+))?"))) {
    impl_->error("unknown device '" + device + "' (expected cpu, cuda or cuda:N)");
    return false;
  }
  int ordinal = m[2].matched ? std::stoi(m[2].str()) : 0;
  std::string why;
  impl_->gexec.reset();
  impl_->gpu = rt::cuda::Device::open(ordinal, &why);
  if (!impl_->gpu) {
    impl_->error("cannot use " + device + ": " + why);
    return false;
  }
  std::string nv_why;
  auto nvrtc = codegen::Nvrtc::load(&nv_why);
  if (!nvrtc) {
    impl_->error("cannot use " + device + ": " + nv_why);
    impl_->gpu.reset();
    return false;
  }
  impl_->gexec = std::make_unique<codegen::GpuExecutor>(*impl_->gpu, nvrtc);
  return true;
}

void Session::set_bench(int runs) { impl_->bench = runs < 0 ? 0 : runs; }

void Session::set_cuda_graph(bool on) { impl_->cuda_graph = on; }

namespace {
// An output of a GPU run: a device value, or a constant of the trace.
struct GpuOutput {
  std::string name;
  ir::Arg constant;
  std::optional<rt::cuda::DeviceTensor> value;
};

// One run of the program on the GPU: the forward, then the backward over the forward's saved
// values (left on the device) and a cotangent of ones (filled by a kernel, so that the run can
// be captured as a CUDA graph). Returns the outputs to report, left on the device.
std::vector<GpuOutput> run_program_gpu(codegen::GpuExecutor& g, const interp::Traces& prog,
                                       const std::vector<rt::cuda::DeviceTensor>& inputs, ir::ExecContext& ctx) {
  using DT = rt::cuda::DeviceTensor;
  const ir::Trace& fw = *prog.front();
  std::vector<GpuOutput> results;
  auto fw_out = g.run(fw, inputs, ctx);
  auto out = [&](const ir::Arg& a, const codegen::GpuExecutor::Values& vals, const std::string& fallback) {
    if (a.kind != ir::Arg::Kind::Proxy) return GpuOutput{fallback, a, std::nullopt};
    return GpuOutput{a.proxy->name, ir::Arg(), vals.at(a.proxy.get())};
  };
  if (prog.size() == 1) {
    std::vector<ir::Arg> flat;
    std::function<void(const ir::Arg&)> walk = [&](const ir::Arg& a) {
      if (a.is_seq()) {
        for (const auto& x : a.items) walk(x);
      } else {
        flat.push_back(a);
      }
    };
    walk(fw.output);
    for (size_t i = 0; i < flat.size(); ++i) results.push_back(out(flat[i], fw_out, "out[" + std::to_string(i) + "]"));
    return results;
  }
  const ir::Trace& bw = *prog[1];
  std::vector<DT> bin;
  for (const auto& p : bw.inputs) {
    auto it = fw_out.find(p.get());
    bin.push_back(it != fw_out.end() ? it->second : g.full(p->type, 1.0));
  }
  const ir::Arg& loss = fw.output.items[0];
  results.push_back(out(loss, fw_out, "out"));
  fw_out.clear();  // the saved values move into the backward; the loss is held by results
  auto bw_out = g.run(bw, std::move(bin), ctx);
  for (const auto& a : bw.output.items)
    if (a.kind == ir::Arg::Kind::Proxy) results.push_back(out(a, bw_out, ""));
  return results;
}

std::vector<std::pair<std::string, ir::Arg>> download(codegen::GpuExecutor& g, const std::vector<GpuOutput>& outs, rt::Allocator* al) {
  std::vector<std::pair<std::string, ir::Arg>> r;
  for (const GpuOutput& o : outs) r.emplace_back(o.name, o.value ? ir::Arg::of_tensor(g.download(*o.value, al)) : o.constant);
  return r;
}
}  // namespace

std::optional<RunReport> Session::run(const std::string& entry, const std::string& output_dir) {
  RunReport rep;
  auto t0 = std::chrono::steady_clock::now();
  auto prog = impl_->program(entry);
  if (!prog) return std::nullopt;
  auto t1 = std::chrono::steady_clock::now();
  for (const auto& pt : impl_->timings) rep.passes_ms += pt.ms;
  rep.trace_ms = std::chrono::duration<double, std::milli>(t1 - t0).count() - rep.passes_ms;
  for (const auto& t : *prog) rep.statements += t->stmts.size();
  const ir::Trace& fw = *prog->front();
  bool ok = false;
  std::vector<rt::Tensor> inputs = impl_->make_inputs(fw, entry, rep, &ok);
  if (!ok) return std::nullopt;
  rt::Allocator& al = impl_->in->allocator();
  std::vector<rt::Tensor> held = inputs;  // the caller keeps its inputs (parameters) for the whole run
  al.reset_peak();
  std::vector<std::pair<std::string, ir::Arg>> results;
  double first_run_ms = -1;  // the reported run's time and peak (not the bench runs')
  size_t first_peak = 0;
  if (impl_->gexec) {
    codegen::GpuExecutor& g = *impl_->gexec;
    rt::cuda::Device& dev = g.device();
    rep.device = "cuda:" + std::to_string(dev.ordinal()) + " (" + dev.name() + ")";
    try {
      std::vector<rt::cuda::DeviceTensor> din;
      for (const auto& t : inputs) din.push_back(g.upload(t));
      inputs.clear();
      dev.synchronize();
      dev.reset_peak();
      g.reset_stats();
      g.new_program();  // these traces are new objects; statement caches must not outlive theirs
      g.prepare(raw(*prog));  // every kernel compiled up front, in parallel
      ir::ExecContext& ctx = impl_->in->exec_context();
      uint64_t rng_at_start = ctx.rng_offset;
      results = download(g, run_program_gpu(g, *prog, din, ctx), ctx.allocator);
      dev.synchronize();
      first_run_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
      rep.device_peak_bytes = dev.peak_bytes();
      const codegen::GpuStats& st = g.stats();
      rep.kernels_launched = st.launches;
      rep.kernels_compiled = st.compiled;
      rep.kernel_disk_hits = st.disk_hits;
      rep.gemms = st.gemms;
      rep.cpu_fallbacks = st.fallbacks;
      rep.compile_ms = st.compile_ms;
      rep.compile_wall_ms = st.compile_wall_ms;
      rep.fallback_ops = st.fallback_ops;
      // --cuda-graph: the run above was the warm-up (kernels compiled, allocator filled); the
      // whole program is captured once and the reported outputs come from its first replay,
      // drawing the same random numbers as that run did.
      std::unique_ptr<codegen::GpuGraph> graph;
      std::vector<GpuOutput> graph_outs;
      if (impl_->cuda_graph) {
        uint64_t after = ctx.rng_offset;
        ctx.rng_offset = rng_at_start;
        // A statement's failure arrives as ir::ExecError (which is no std::exception).
        auto not_captured = [&](const std::string& why) {
          graph_outs.clear();
          ctx.rng_offset = after;
          impl_->add(Diagnostic{Severity::warning, {}, "--cuda-graph: the program was not captured (" + why + "); it runs without a graph", {}});
        };
        try {
          graph = g.capture([&] { graph_outs = run_program_gpu(g, *prog, din, ctx); }, ctx);
        } catch (const ir::ExecError& e) {
          not_captured(e.message + (e.stmt.empty() ? "" : " in: " + e.stmt));
        } catch (const std::exception& e) {
          not_captured(e.what());
        }
        if (graph) {
          g.replay(*graph, ctx);
          g.check_index_errors();
          results = download(g, graph_outs, ctx.allocator);
          rep.cuda_graph = true;
          rep.graph_nodes = graph->graph->nodes();
          rep.graph_bytes = graph->graph->bytes();
        }
      }
      if (impl_->bench > 0) {
        if (g.profiling()) g.clear_profile();  // profile the warm runs only
        std::vector<double> ms, host_ms;
        double api0 = dev.launch_api_ms();
        for (int i = 0; i < impl_->bench; ++i) {
          auto b0 = std::chrono::steady_clock::now();
          if (graph)
            g.replay(*graph, ctx);
          else
            run_program_gpu(g, *prog, din, ctx);
          auto b1 = std::chrono::steady_clock::now();  // all work issued: the host's share ends here
          dev.synchronize();
          if (graph) g.check_index_errors();
          ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - b0).count());
          host_ms.push_back(std::chrono::duration<double, std::milli>(b1 - b0).count());
        }
        auto median = [](std::vector<double> v) {
          std::sort(v.begin(), v.end());
          return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
        };
        rep.bench_runs = impl_->bench;
        rep.bench_runs_ms = ms;
        rep.bench_median_ms = median(ms);
        rep.bench_min_ms = *std::min_element(ms.begin(), ms.end());
        rep.bench_max_ms = *std::max_element(ms.begin(), ms.end());
        rep.bench_host_median_ms = median(host_ms);
        rep.bench_launch_api_ms = (dev.launch_api_ms() - api0) / impl_->bench;
      }
      if (g.profiling()) g.print_profile(std::cerr);
    } catch (const ir::ExecError& e) {
      impl_->add(Diagnostic{Severity::error, e.loc, e.message + (e.stmt.empty() ? "" : " (in: " + e.stmt + ")"), {}});
      return std::nullopt;
    } catch (const std::exception& e) {
      impl_->error(std::string("on ") + rep.device + ": " + e.what());
      return std::nullopt;
    }
  }
  if (!impl_->gexec) try {
    ir::Arg out = ir::execute(fw, std::move(inputs), impl_->in->exec_context());
    if (prog->size() == 1) {
      std::vector<std::string> names;
      proxy_names(fw.output, names);
      std::vector<std::pair<std::string, ir::Arg>> flat;
      flatten_outputs(out, "out", flat);
      for (size_t i = 0; i < flat.size(); ++i)
        results.emplace_back(i < names.size() && !names[i].empty() ? names[i] : flat[i].first, flat[i].second);
    } else {
      const ir::Trace& bw = *(*prog)[1];
      ir::Arg grads = run_backward(fw, bw, out, impl_->in->exec_context());
      const ir::Arg& loss_proxy = fw.output.items[0];
      results.emplace_back(loss_proxy.kind == ir::Arg::Kind::Proxy ? loss_proxy.proxy->name : "out", out.items[0]);
      for (size_t i = 0; i < grads.items.size() && i < bw.output.items.size(); ++i)
        if (bw.output.items[i].kind == ir::Arg::Kind::Proxy)
          results.emplace_back(bw.output.items[i].proxy->name, grads.items[i]);
    }
    first_run_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
    first_peak = al.peak_bytes();  // of the one reported run
    if (impl_->bench > 0) {  // N more whole-program runs on the CPU, timed
      auto run_once = [&] {
        ir::Arg o = ir::execute(fw, held, impl_->in->exec_context());
        if (prog->size() > 1) run_backward(fw, *(*prog)[1], o, impl_->in->exec_context());
      };
      std::vector<double> ms;
      for (int i = 0; i < impl_->bench; ++i) {
        auto b0 = std::chrono::steady_clock::now();
        run_once();
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - b0).count());
      }
      rep.bench_runs = impl_->bench;
      rep.bench_runs_ms = ms;
      std::sort(ms.begin(), ms.end());
      rep.bench_median_ms = ms.size() % 2 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
      rep.bench_min_ms = ms.front();
      rep.bench_max_ms = ms.back();
    }
  } catch (const ir::ExecError& e) {
    impl_->add(Diagnostic{Severity::error, e.loc, e.message + (e.stmt.empty() ? "" : " (in: " + e.stmt + ")"), {}});
    return std::nullopt;
  }
  rep.run_ms = first_run_ms >= 0 ? first_run_ms : std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
  rep.peak_bytes = first_peak ? first_peak : al.peak_bytes();
  rep.estimated_peak_bytes = ir::estimate_memory(raw(*prog)).peak_bytes;
  for (const auto& [name, a] : results) {
    OutputInfo o;
    std::string err;
    if (!describe_output(name, a, output_dir, &o, &err)) {
      impl_->error(err);
      return std::nullopt;
    }
    rep.outputs.push_back(std::move(o));
  }
  return rep;
}

const std::vector<DiagnosticInfo>& Session::diagnostics() const { return impl_->diags; }

std::string Session::rendered_diagnostics() const {
  std::string out;
  for (const auto& d : impl_->diags) out += d.rendered;
  return out;
}

void Session::clear_diagnostics() { impl_->diags.clear(); }

}  // namespace tracer
