// Session's state (Session::Impl) and helpers shared by the files of the API: api/session.cpp
// (loading, passes, printing, memory, CPU runs) and api/session_gpu.cpp (GPU runs, compile).
// Internal to the library.
#pragma once
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tracer/session.h"
#include "common/source.h"
#include "codegen/cuda_exec.h"
#include "interpreter/builtins.h"
#include "interpreter/interp.h"
#include "interpreter/parser.h"
#include "interpreter/passes.h"
#include "ir/verify.h"
#include "runtime/cuda.h"
#include "runtime/comm.h"
#include "runtime/nccl.h"
#include "runtime/store.h"

namespace tracer {

using interp::Interpreter;
using interp::Value;
using interp::VT;

// The leaves of a program's output structure, in the order runs report them: tuples, lists and
// dicts walked in order (a dict's keys recorded in *keys, "" elsewhere).
void output_leaves(const ir::Arg& a, std::vector<const ir::Arg*>& out, std::vector<std::string>* keys = nullptr,
                   const std::string& key = "");
// The names runs give their outputs (and --output its files): a dict's key path ("metrics.loss"),
// else the returned value's name, else, for a value the trace named itself (t12), the op that
// made it ("sum", "cross_entropy"); after grad the loss (its name, else "loss"), then each
// gradient. Never two alike: a
// repeated name gets _1, _2, ... ("y", "y_1").
std::vector<std::string> output_names(const interp::Traces& prog);
// The leaf names of a trace as traced (what output_names reports, before passes change it).
std::vector<std::string> traced_output_names(const ir::Trace& fw);

struct Session::Impl {
  SessionOptions opts;
  SourceManager sm;
  // The devices of compiled functions (api/session_device.cpp), before in: the interpreter's
  // tensors on them go first.
  std::map<std::string, std::unique_ptr<interp::DeviceBackend>> device_backends;
  interp::DeviceBackend* open_device_backend(const std::string& device, std::string* why);
  std::unique_ptr<Interpreter> in;
  std::shared_ptr<interp::Module> module;
  std::map<std::string, Value> pinned;
  std::map<std::string, rt::Tensor> inputs;
  std::map<std::string, std::string> input_sources;
  std::map<std::string, ir::TensorType> input_types;  // set_input_type (the REPL's :trace)
  std::vector<std::string> passes;
  interp::PassOptions pass_opts;
  std::vector<PassInfo> timings;
  std::vector<DiagnosticInfo> diags;
  std::unique_ptr<rt::cuda::Device> gpu;
  std::unique_ptr<codegen::GpuExecutor> gexec;
  int bench = 0;
  bool cuda_graph = false;
  // The distributed job (api/session_job.cpp): rank 0's server, this rank's connection.
  std::optional<rt::dist::JobEnv> job;
  std::unique_ptr<rt::dist::StoreServer> job_server;
  std::unique_ptr<rt::dist::StoreClient> job_store;
  std::chrono::milliseconds job_timeout{300000};
  int job_runs = 0;  // programs run in the job so far (the key of each one's check)
  // In a job: the program's collectives, in order, the same on every rank? Each rank publishes
  // its list through the store and compares every other's; a difference (a shape, a dtype, an
  // order, a count) is reported on every rank, naming the first collective that differs, so that
  // no rank runs into a collective the others do not run alike (a wrong number, or a hang).
  // api/session_job.cpp. Returns "" or the error.
  std::string check_collectives(const interp::Traces& prog);
  std::unique_ptr<rt::dist::Communicator> job_comm;  // Gloo, opened at the first collective
  // Gloo among a subgroup's ranks (dist.group((r0, ...))), by its ranks, opened at its first collective.
  std::map<std::vector<int64_t>, std::unique_ptr<rt::dist::Communicator>> group_comms;
  std::unique_ptr<rt::dist::DeviceCommunicator> job_nccl;  // NCCL, at the first collective of CUDA tensors

  // api/session_gpu.cpp
  bool run_gpu(const interp::Traces& prog, std::vector<rt::Tensor>& inputs, RunReport& rep,
               std::vector<std::pair<std::string, ir::Arg>>& results, std::chrono::steady_clock::time_point t1,
               double& first_run_ms);

  explicit Impl(SessionOptions o) : opts(std::move(o)) {
    interp::Options io;
    io.seed = opts.seed;
    io.step_limit = opts.step_limit;
    io.memory_limit = opts.memory_limit;
    in = std::make_unique<Interpreter>(sm, io);
    if (opts.world_size > 0) in->set_world(opts.world_size, opts.world_rank);
    in->set_main_program(opts.main_program);
    in->set_device_opener([this](const std::string& d, std::string* why) { return open_device_backend(d, why); });
    in->on_print = opts.print ? opts.print : [](const std::string& s) { std::cout << s << std::flush; };
    pass_opts.on_print_after = [this](const std::string& pass, const interp::Traces& ts) {
      in->on_print("# after " + pass + "\n" + interp::print_traces(ts));
    };
  }

  // The entry traced, then transformed by the session's passes.
  std::optional<interp::Traces> program(const std::string& entry) {
    in->reset_steps();  // a new count and no stale interrupt for each top-level job
    in->clear_interrupt();
    auto t = trace(entry);
    if (!t) return std::nullopt;
    if (passes.empty()) return interp::Traces{t};
    timings.clear();
    std::vector<interp::PassTiming> ts;
    try {
      std::vector<std::string> names = traced_output_names(*t);
      interp::Traces out = interp::run_passes(*in, {t}, passes, pass_opts, &ts);
      for (const auto& x : ts) timings.push_back({x.name, x.ms});
      // Outputs keep the names they had as traced: a pass that fuses or decomposes the op that
      // made one does not rename it.
      if (!out.empty() && out.front() != t) out.front()->output_names = std::move(names);
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
  // What a public entry point's work throws that nothing below caught (an allocation that does
  // not fit: inputs, files, outputs; anything else) becomes an error diagnostic and `failure`,
  // never an exception through the API or a terminated host.
  template <class R, class F>
  R guarded(R failure, F&& work) {
    try {
      return work();
    } catch (const rt::OutOfMemory& e) {
      error(e.what());
    } catch (const std::bad_alloc&) {
      error("out of memory");
    } catch (const std::exception& e) {
      error(std::string("internal error: ") + e.what());
    } catch (...) {
      error("internal error: an unknown exception");
    }
    return failure;
  }
  std::vector<rt::Tensor> make_inputs(const ir::Trace& t, const std::string& entry, RunReport& rep, bool* ok);
  // Runs a traced program once on the session's device over `inputs` (parallel to the forward's
  // inputs). results: the outputs flattened, or after grad the loss and a gradient per input,
  // named as Session::run reports them. On failure adds diagnostics and returns false.
  bool execute(const interp::Traces& prog, std::vector<rt::Tensor> inputs,
               std::vector<std::pair<std::string, ir::Arg>>& results);
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
    std::map<std::string, ir::TensorType> out = input_types;
    for (const auto& [name, t] : inputs) out[name] = ir::TensorType{t.dtype(), t.shape(), "cpu"};
    return out;
  }

  std::shared_ptr<ir::Trace> trace(const std::string& entry, bool check_types = true) {
    const interp::FunctionObj* fn = function(entry);
    if (!fn) {
      error("no function named '" + entry + "' in the module");
      return nullptr;
    }
    try {
      auto t = in->trace(*fn, given_types());
      if (!verify_trace(*t, "tracing")) return nullptr;
      if (check_types && !types_name_inputs(*t, entry)) return nullptr;
      return t;
    } catch (const interp::ScriptError& e) {
      script_error(e);
      return nullptr;
    }
  }

  // Lets scripts read (load) or write (save) below dir, an existing directory.
  bool grant(const std::string& dir, bool write) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
      error(std::string("--allow-") + (write ? "write " : "read ") + dir + ": no such directory");
      return false;
    }
    if (write) in->allow_write(dir);
    else in->allow_read(dir);
    return true;
  }

  // Every type set for an input (--type NAME=TYPE) names one of the traced function's inputs: a
  // misspelt name would otherwise leave the input drawn with its declared type, silently.
  bool types_name_inputs(const ir::Trace& t, const std::string& entry) {
    std::vector<std::string> params;
    for (const auto& p : t.inputs) params.push_back(p->name);
    bool ok = true;
    for (const auto& kv : input_types) {
      if (std::find(params.begin(), params.end(), kv.first) != params.end()) continue;
      std::string list;
      for (const std::string& p : params) list += (list.empty() ? "" : ", ") + p;
      error("a type is given for '" + kv.first + "', which is not an input of '" + entry + "'" +
            did_you_mean(kv.first, params) + " (its inputs: " + (list.empty() ? "none" : list) + ")");
      ok = false;
    }
    return ok;
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

  // Whether the name at loc is called there: `n(` in the source.
  bool called_at(SourceLoc loc, const std::string& n) const {
    if (loc.file < 0) return false;
    const std::string& text = sm.text(loc.file);
    size_t at = static_cast<size_t>(loc.offset) + n.size();
    return at < text.size() && text.compare(loc.offset, n.size(), n) == 0 && text[at] == '(';
  }

  // Dotted names on tracer's own modules (torch.ops.aten.frobnicate, prims.frobnicate) that the
  // module lacks, gathered as undefined names (the dotted name whole). Only chains of
  // namespaces are followed (not a dtype's or a function's attributes): a root the program binds
  // to something else (a value, a function) is not looked into.
  void undefined_attributes(const interp::Module& m, std::map<std::string, std::pair<SourceLoc, int>>& first,
                            std::vector<std::string>& order) {
    for (const ast::Expr* e : m.global_attr_refs) {
      std::vector<const ast::Expr*> chain;
      const ast::Expr* r = e;
      while (r->kind == ast::ExprKind::Attribute) {
        chain.push_back(r);
        r = r->items[0].get();
      }
      if (r->kind != ast::ExprKind::Name || pinned.count(r->name)) continue;
      // The root as the module holds it once loaded (`import torch` binds tracer's torch), else
      // a builtin.
      const interp::Value* v = nullptr;
      if (m.module_defs.count(r->name)) {
        auto g = m.globals.find(r->name);
        if (g != m.globals.end())
          v = &g->second;
        else if (m.plain_imports.count(r->name))  // checked before the top level runs: `import torch` is ours
          v = in->builtins().lookup(r->name);
        if (!v) continue;
      } else {
        v = in->builtins().lookup(r->name);
      }
      std::string path = r->name;
      for (auto it = chain.rbegin(); v && it != chain.rend(); ++it) {
        if (!v->is(interp::VT::Namespace)) {
          v = nullptr;
          break;
        }
        const interp::Value* next = v->as<interp::NamespaceObj>()->lookup((*it)->name);
        path += "." + (*it)->name;
        if (!next) {
          if (it + 1 != chain.rend()) break;  // reported where the chain ends (once per name)
          if (guarded_by_hasattr(e->loc, path)) break;  // `if hasattr(torch.ops.aten, "x"): torch.ops.aten.x(...)`
          auto f = first.find(path);
          if (f == first.end()) {
            first.emplace(path, std::make_pair(e->loc, 1));
            order.push_back(path);
          } else {
            ++f->second.second;
          }
        }
        v = next;
      }
    }
  }

  // Whether the file asks hasattr(<module>, "<name>") of the dotted name anywhere: a program that
  // guards its use of an attribute is not wrong for lacking it.
  bool guarded_by_hasattr(SourceLoc loc, const std::string& path) const {
    if (loc.file < 0) return false;
    size_t dot = path.rfind('.');
    const std::string& text = sm.text(loc.file);
    for (const char* q : {"\"", "'"})
      if (text.find("hasattr(" + path.substr(0, dot) + ", " + q + path.substr(dot + 1) + q + ")") != std::string::npos) return true;
    return false;
  }

  // One error per undefined name, at its first use (a printout may call an unknown op a hundred
  // times: one error says it, with the count of the other uses).
  void undefined_names(const interp::Module& m) {
    std::map<std::string, std::pair<SourceLoc, int>> first;  // name -> first use, uses
    std::vector<std::string> order;
    for (const ast::Expr* e : m.global_refs) {
      if (m.module_defs.count(e->name) || in->builtins().lookup(e->name) || pinned.count(e->name) ||
          interp::Interpreter::is_thunder_object_name(e->name))
        continue;
      auto it = first.find(e->name);
      if (it == first.end()) {
        first.emplace(e->name, std::make_pair(e->loc, 1));
        order.push_back(e->name);
      } else {
        if (e->loc.offset < it->second.first.offset) it->second.first = e->loc;
        ++it->second.second;
      }
    }
    undefined_attributes(m, first, order);
    for (const std::string& n : order) {
      const auto& [loc, uses] = first.at(n);
      std::string more = uses > 1 ? " (used " + std::to_string(uses) + " times; this is the first)" : "";
      if (size_t dot = n.rfind('.'); dot != std::string::npos) {
        add(Diagnostic{Severity::error, loc, "module '" + n.substr(0, dot) + "' has no attribute '" + n.substr(dot + 1) + "'" + more, {}});
        continue;
      }
      std::string hint = parse::unknown_name_hint(n);
      if (hint.empty() && called_at(loc, n))
        hint = ": a function the program calls but does not define (a printout's custom op); give its definition with --ops FILE.trace";
      add(Diagnostic{Severity::error, loc, "name '" + n + "' is not defined" + hint + more, {}});
    }
  }
};

struct SessionAccess {
  using Impl = Session::Impl;
  static Impl& impl(Session& s) { return *s.impl_; }
};

namespace detail {
std::vector<const ir::Trace*> raw(const interp::Traces& ts);
double median(std::vector<double> v);
// The timed runs (in order) and their median, min and max.
void set_bench_times(RunReport& rep, const std::vector<double>& ms);
// A run's error as a diagnostic: at the outermost composite's call (the user's line) when the
// failing statement ran inside composites, with the library's line as a note; else where it is.
Diagnostic exec_diagnostic(const ir::ExecError& e);
}  // namespace detail

}  // namespace tracer
