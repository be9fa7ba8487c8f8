// The public Session API over the interpreter, the Trace IR and the CPU runtime: loading,
// passes, printing, memory estimates and runs on the CPU. GPU runs and tracer compile are in
// api/session_gpu.cpp, the REPL's evaluation, help and completion in api/session_repl.cpp;
// Session's state is api/session_impl.h.
#include "tracer/session.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <unordered_set>

#include "api/inputs.h"
#include "api/session_impl.h"
#include "interpreter/unparse.h"
#include "runtime/cuda.h"
#include "interpreter/builtins.h"
#include "interpreter/interp.h"
#include "interpreter/passes.h"
#include "ir/memory.h"
#include "ir/verify.h"
#include "runtime/io.h"
#include "runtime/kernels.h"
#include "runtime/summary.h"

namespace tracer {

Session::Session(SessionOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {}
Session::~Session() = default;  // a rank that did not leave_job() (it failed) just goes: the others' leave_job() reports it

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
  return impl_->guarded<bool>(false, [&]() -> bool {
    std::string t = text;
    Impl::comment_separators(t);
    DiagnosticList dl;
    // A value set from outside (--set) for a name the module never mentions is a typo, not a
    // setting: refused, with the nearest module-level name.
    auto mentions = [&](const std::string& n) {
      for (size_t at = text.find(n); at != std::string::npos; at = text.find(n, at + 1)) {
        auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
        if ((at == 0 || !word(text[at - 1])) && (at + n.size() >= text.size() || !word(text[at + n.size()]))) return true;
      }
      return false;
    };
    std::vector<std::string> unknown;
    for (const auto& [k, v] : impl_->pinned)
      if (!mentions(k)) unknown.push_back(k);
    auto m = impl_->in->load(name, std::move(t), dl, impl_->pinned);
    impl_->add_all(dl);
    if (!m) return false;  // the module loaded before stays
    if (!unknown.empty() && impl_->opts.strict_settings) {
      std::vector<std::string> names;
      for (const auto& [k, v] : m->globals)
        if (!impl_->pinned.count(k)) names.push_back(k);
      std::sort(names.begin(), names.end());
      for (const std::string& k : unknown)
        impl_->error("'" + k + "' is set from outside (--set) but " + name + " never names it" + did_you_mean(k, names));
      return false;
    }
    impl_->module = std::move(m);
    return true;
  });
}

bool Session::load_file(const std::string& path) {
  return impl_->guarded<bool>(false, [&]() -> bool {
    std::string text, why;
    if (!Impl::read_file(path, &text, &why)) {
      impl_->error("cannot read '" + path + "': " + why);
      return false;
    }
    return load_string(path, text);
  });
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
  // The entry, or without --entry every function whose parameters all have tensor types (the
  // default entry among them): each is traced symbolically and every one's errors reported.
  std::vector<std::string> targets{*e};
  if (entry.empty())
    for (const std::string& f : functions())
      if (f != *e) targets.push_back(f);
  bool ok = true;
  std::set<std::string> typed;  // the inputs that the traced functions have
  for (size_t k = 0; k < targets.size(); ++k) {
    const interp::FunctionObj* fn = impl_->function(targets[k]);
    if (!fn) continue;
    if (k > 0 && fn->info->params->empty()) continue;  // a script's function, not a traced one
    // An nvFuser definition's symbolic sizes (-1) are checked as kPlaceholder each, and a note says so.
    constexpr int64_t kPlaceholder = 2;
    struct Placeholder {
      interp::Interpreter& in;
      ~Placeholder() { in.symbolic_placeholder = 0; }
    } placeholder{*impl_->in};
    impl_->in->symbolic_placeholder = kPlaceholder;
    try {
      impl_->in->input_types(*fn, impl_->given_types());
    } catch (const interp::ScriptError& err) {
      // A function without input types is not an error for check: there is nothing to trace.
      if (entry.empty() && err.message.find("no tensor type") != std::string::npos) continue;
      impl_->script_error(err);
      ok = false;
      continue;
    }
    const std::vector<std::string> placeholders = impl_->in->placeholder_inputs;
    auto t = impl_->trace(targets[k], false);
    if (!placeholders.empty()) {
      std::string names;
      for (const std::string& n : placeholders) names += (names.empty() ? "'" : ", '") + n + "'";
      impl_->add(Diagnostic{Severity::note, fn->info->loc,
                            "'" + targets[k] + "' was checked with the symbolic sizes (-1) of " + names + " set to " +
                                std::to_string(kPlaceholder) + (t ? "" : ", which may be why it failed") +
                                "; give their types (--type NAME=f32[...]) to check it at its real sizes",
                            {}});
    }
    ok = t != nullptr && ok;
    for (size_t i = 0; t && i < t->inputs.size(); ++i) typed.insert(t->inputs[i]->name);
  }
  // A type or an input file given for a name must be for an input of the entry (of some function
  // without --entry): a misspelt name would leave the input's declared type in place, silently.
  std::map<std::string, std::string> given;
  for (const auto& kv : impl_->input_types) given[kv.first] = "a type";
  for (const auto& kv : impl_->inputs) given[kv.first] = "an input (" + impl_->input_sources[kv.first] + ")";
  const std::string of = targets.size() == 1 ? "'" + targets[0] + "'" : "any function";
  if (ok)
    for (const auto& [name, what] : given)
      if (!typed.count(name)) {
        impl_->error(what + " is given for '" + name + "', which is not an input of " + of +
                     did_you_mean(name, std::vector<std::string>(typed.begin(), typed.end())));
        ok = false;
      }
  return ok;
}

std::vector<std::string> Session::functions() const {
  std::vector<std::string> out;
  if (!impl_->module) return out;
  for (const auto& s : impl_->module->ast->body)
    if (s->kind == ast::StmtKind::FunctionDef) out.push_back(s->name);
  return out;
}

void Session::set_argv(const std::vector<std::string>& argv) { impl_->in->set_argv(argv); }

bool Session::allow_read(const std::string& dir) { return impl_->grant(dir, false); }
bool Session::allow_write(const std::string& dir) { return impl_->grant(dir, true); }

bool Session::is_script() const {
  if (!impl_->module) return false;
  for (const auto& s : impl_->module->ast->body) {
    switch (s->kind) {
      case ast::StmtKind::Expr:
        if (s->value && s->value->kind == ast::ExprKind::Str) break;  // a docstring
        return true;
      case ast::StmtKind::If:
      case ast::StmtKind::For:
      case ast::StmtKind::While:
      case ast::StmtKind::With: return true;
      default: break;
    }
  }
  return false;
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
  return impl_->guarded<bool>(false, [&]() -> bool {
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
      // FILE.npy without a name: the file's stem names the parameter it is for.
      std::string key = name;
      if (key.empty()) {
        key = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
        if (key.size() > 4 && key.compare(key.size() - 4, 4, ".npy") == 0) key.resize(key.size() - 4);
      }
      impl_->inputs[key] = rt::read_npy(path, &impl_->in->allocator());
      impl_->input_sources[key] = path;
      return true;
    } catch (const std::exception& e) {
      impl_->error(std::string("input '") + name + "': " + e.what());
      return false;
    }
  });
}

std::vector<std::string> Session::known_passes() const { return impl_->in->pass_names(); }

namespace {
// Loads a .trace file and hands each public function to `take` (name, function); false, with an
// error that names the file, when it cannot be read, does not load, or defines none.
template <class Take>
bool load_public_functions(SessionAccess::Impl& impl, const std::string& what, const std::string& path, Take take) {
  std::string text, why;
  if (!SessionAccess::Impl::read_file(path, &text, &why)) {
    impl.error("cannot read " + what + " '" + path + "': " + why);
    return false;
  }
  DiagnosticList dl;
  auto m = impl.in->load(path, text, dl, {}, /*names_values=*/false);
  impl.add_all(dl);
  if (!m) return false;
  size_t n = 0;
  for (const auto& st : m->ast->body) {
    if (st->kind != ast::StmtKind::FunctionDef || st->name.empty() || st->name[0] == '_') continue;
    take(st->name, m->globals.at(st->name));
    ++n;
  }
  if (n == 0) impl.error(what + " '" + path + "' defines no public function");
  return n > 0;
}
}  // namespace

bool Session::add_pass_file(const std::string& path) {
  return load_public_functions(*impl_, "pass file", path,
                               [&](const std::string& name, const interp::Value& fn) { impl_->in->register_pass(name, fn); });
}

bool Session::add_ops_file(const std::string& path) {
  return load_public_functions(*impl_, "ops file", path,
                               [&](const std::string& name, const interp::Value& fn) { impl_->in->define_op_name(name, fn); });
}

bool Session::set_pass_options(bool verify, const std::vector<std::string>& print_after) {
  std::vector<std::string> known = known_passes();
  for (const std::string& p : print_after)
    if (p != "all" && std::find(known.begin(), known.end(), p) == known.end()) {
      impl_->error("--print-after: no pass is named '" + p + "'" + did_you_mean(p, known));
      return false;
    }
  impl_->pass_opts.verify = verify;
  impl_->pass_opts.print_after = print_after;
  return true;
}

const std::vector<PassInfo>& Session::pass_timings() const { return impl_->timings; }

std::vector<std::string> split_passes(const std::string& list) { return interp::split_pass_list(list); }

bool Session::set_passes(const std::vector<std::string>& passes) {
  std::vector<std::string> known = known_passes();
  for (const std::string& entry : passes) {
    interp::PassSpec spec;
    std::string bad = interp::parse_pass_spec(entry, &spec);
    if (!bad.empty()) {
      impl_->error("--passes: " + bad);
      return false;
    }
    const std::string& p = spec.name;
    if (std::find(known.begin(), known.end(), p) != known.end()) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    impl_->error("unknown pass '" + p + "'; known passes: " + list);
    return false;
  }
  std::string order = interp::pass_order_error(passes);
  if (!order.empty()) {
    impl_->error(order);
    return false;
  }
  impl_->passes = passes;
  return true;
}

std::optional<std::string> Session::print(const std::string& entry) {
  return impl_->guarded<std::optional<std::string>>(std::nullopt, [&]() -> std::optional<std::string> {
    auto p = impl_->program(entry);
    if (!p) return std::nullopt;
    return interp::print_traces(*p);
  });
}

bool Session::inputs_typed(const std::string& entry, std::string* why) {
  const interp::FunctionObj* fn = impl_->function(entry);
  if (!fn) return true;  // print() reports it
  try {
    impl_->in->input_types(*fn, impl_->given_types());
  } catch (const interp::ScriptError& e) {
    bool untyped = e.message.find("no tensor type") != std::string::npos || e.message.find("symbolic sizes") != std::string::npos;
    if (!untyped) return true;  // another error: print() reports it
    if (why) *why = e.message;
    return false;
  }
  return true;
}

std::optional<std::string> Session::print_source() const {
  if (!impl_->module || !impl_->module->ast) return std::nullopt;
  return ast::unparse(*impl_->module->ast);
}

namespace detail {
std::vector<const ir::Trace*> raw(const interp::Traces& ts) {
  std::vector<const ir::Trace*> out;
  for (const auto& t : ts) out.push_back(t.get());
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// The timed runs (in order) and their median, min and max.
void set_bench_times(RunReport& rep, const std::vector<double>& ms) {
  rep.bench_runs = static_cast<int>(ms.size());
  rep.bench_runs_ms = ms;
  rep.bench_median_ms = median(ms);
  rep.bench_min_ms = ms.empty() ? 0 : *std::min_element(ms.begin(), ms.end());
  rep.bench_max_ms = ms.empty() ? 0 : *std::max_element(ms.begin(), ms.end());
}
}  // namespace detail
using detail::raw;
using detail::set_bench_times;

std::optional<MemoryReport> Session::memory(const std::string& entry, const std::string& device) {
  return impl_->guarded<std::optional<MemoryReport>>(std::nullopt, [&]() -> std::optional<MemoryReport> {
    if (device != "cpu" && device.rfind("cuda", 0) != 0) {
      impl_->error("unknown device '" + device + "' (expected cpu, cuda or cuda:N)");
      return std::nullopt;
    }
    auto p = impl_->program(entry);
    if (!p) return std::nullopt;
    ir::MemReport m = ir::estimate_memory(raw(*p), true, device == "cpu" ? nullptr : &rt::cuda::allocation_size);
    MemoryReport r;
    r.peak_bytes = m.peak_bytes;
    r.peak_trace = m.phases.empty() ? "" : m.phases[static_cast<size_t>(m.peak_phase)];
    r.peak_index = m.peak_index;
    r.peak_statement = m.peak_stmt;
    r.saved_for_backward_bytes = m.saved_bytes;
    r.saved_replicated_bytes = m.saved_replicated_bytes;
    r.saved_sharded_bytes = m.saved_sharded_bytes;
    r.saved_per_rank_bytes = m.saved_per_rank_bytes;
    r.peak_comm_bytes = m.peak_comm_bytes;
    r.comm_peak_bytes = m.comm_peak_bytes;
    r.world_size = static_cast<int>(std::max<int64_t>(1, impl_->in->world_size()));
    r.rank = static_cast<int>(impl_->in->world_rank());
    r.input_bytes = m.input_bytes;
    r.traces = m.phases;
    r.peak_live = m.peak_live;
    for (const auto& pt : m.timeline) r.timeline.push_back({pt.phase, pt.index, pt.live_bytes});
    return r;
  });
}


void output_leaves(const ir::Arg& a, std::vector<const ir::Arg*>& out, std::vector<std::string>* keys, const std::string& key) {
  if (a.is_seq() || a.kind == ir::Arg::Kind::Dict) {
    for (size_t i = 0; i < a.items.size(); ++i) {
      // A dict's values by key; a sequence inside a dict by index ("a.c.0").
      std::string k = key;
      if (a.kind == ir::Arg::Kind::Dict) k = key.empty() ? a.keys[i] : key + "." + a.keys[i];
      else if (!key.empty()) k = key + "." + std::to_string(i);
      output_leaves(a.items[i], out, keys, k);
    }
    return;
  }
  out.push_back(&a);
  if (keys) keys->push_back(key);
}

namespace {
bool generated_name(const std::string& n) {  // t12, bw_t3
  size_t j = n.rfind('t');
  if (j == std::string::npos || j + 1 >= n.size() || (j > 0 && n.compare(0, j, "bw_") != 0)) return false;
  return n.find_first_not_of("0123456789", j + 1) == std::string::npos;
}
}  // namespace

std::vector<std::string> traced_output_names(const ir::Trace& fw) {
  // Which statement made each value (a value the trace named itself is called after it).
  std::unordered_map<const ir::Proxy*, std::string> made_by;
  for (const ir::Stmt& st : fw.stmts) {
    std::string what = st.kind == ir::StmtKind::Prim && st.op ? st.op->name : st.callee;
    size_t dot = what.rfind('.');
    if (dot != std::string::npos) what = what.substr(dot + 1);
    for (const auto& o : st.outputs) made_by[o.get()] = what;
  }
  std::vector<const ir::Arg*> leaves;
  std::vector<std::string> keys, names;
  output_leaves(fw.output, leaves, &keys);
  for (size_t i = 0; i < leaves.size(); ++i) {
    const ir::Arg& a = *leaves[i];
    std::string n = "out" + std::to_string(i);
    if (!keys[i].empty()) {
      n = keys[i];
    } else if (a.kind == ir::Arg::Kind::Proxy) {
      n = a.proxy->name;
      if (a.proxy->auto_named && !a.proxy->user_name.empty()) {  // the user's, where it was taken
        n = a.proxy->user_name;
      } else if (a.proxy->auto_named && generated_name(n)) {  // else a name of the user's (t1 in a printout too)
        auto m = made_by.find(a.proxy.get());
        if (m != made_by.end() && !m->second.empty() && !generated_name(m->second)) n = m->second;
      }
    }
    names.push_back(n);
  }
  return names;
}

std::vector<std::string> output_names(const interp::Traces& prog) {
  const ir::Trace& fw = *prog.front();
  std::vector<std::string> names;
  if (prog.size() == 1) {
    // The names as traced, where the session kept them and the passes left the leaves as they were.
    std::vector<const ir::Arg*> leaves;
    output_leaves(fw.output, leaves);
    names = fw.output_names.size() == leaves.size() ? fw.output_names : traced_output_names(fw);
  } else {
    // The value grad differentiates: the user's name for it, else "loss".
    const ir::Arg& loss = fw.output.items[0];
    bool named = loss.kind == ir::Arg::Kind::Proxy && (!loss.proxy->auto_named || !generated_name(loss.proxy->name));
    names.push_back(named ? loss.proxy->name : "loss");
    for (const auto& g : prog[1]->output.items)
      if (g.kind == ir::Arg::Kind::Proxy) names.push_back(g.proxy->name);
  }
  // Unique: a repeated name gets the first free _1, _2, ...
  std::set<std::string> used(names.begin(), names.end());
  std::set<std::string> taken;
  for (auto& n : names) {
    if (taken.insert(n).second) continue;
    for (int k = 1;; ++k) {
      std::string c = n + "_" + std::to_string(k);
      if (!used.count(c) && !taken.count(c)) {
        n = c;
        taken.insert(c);
        break;
      }
    }
  }
  return names;
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
  o->sum = rt::sum_f64(a.tensor);
  o->summary = rt::summarize(a.tensor, o->sum);
  for (int64_t k = 0; k < std::min<int64_t>(a.tensor.numel(), 6); ++k) o->head.push_back(a.tensor.get(k));
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
  // Integer inputs used as class targets or indices are drawn below what they index.
  const auto bounds = api::index_bounds(t);
  for (size_t i = 0; i < t.inputs.size(); ++i) {
    const ir::Proxy& p = *t.inputs[i];
    auto it = inputs.find(p.name);
    if (it != inputs.end()) {
      xs.push_back(it->second);
      inputs.erase(it);
    } else {
      try {
        auto b = bounds.find(&p);
        // An input that differs between ranks is this rank's piece of one value that the job
        // draws: a per-rank one, the rank's part of the input's stream (a data-parallel batch
        // is its rows of the global batch); a sharded one, its slice of the whole. So a run on
        // N ranks sees the values a single process sees for the whole tensors (docs/distributed.md).
        int64_t bound = b != bounds.end() ? b->second : 16;
        uint64_t rank = static_cast<uint64_t>(in->world_rank());
        uint64_t n = static_cast<uint64_t>(rt::numel(p.type.shape));
        if (p.type.dist == ir::Dist::per_rank || (p.type.dist == ir::Dist::sharded && p.type.shard_dim == 0)) {
          xs.push_back(api::random_input(p.type.dtype, p.type.shape, opts.seed, i, &al, bound, rank * n));
        } else if (p.type.dist == ir::Dist::sharded) {
          rt::Shape whole = p.type.shape;
          const size_t d = static_cast<size_t>(p.type.shard_dim);
          whole[d] *= std::max<int64_t>(1, in->world_size());
          rt::Tensor all = api::random_input(p.type.dtype, whole, opts.seed, i, &al, bound);
          std::vector<int64_t> lo(whole.size(), 0), hi(whole.begin(), whole.end());
          lo[d] = p.type.shape[d] * static_cast<int64_t>(rank);
          hi[d] = lo[d] + p.type.shape[d];
          xs.push_back(rt::slice(all, lo, hi, std::vector<int64_t>(lo.size(), 1), &al));
        } else {
          xs.push_back(api::random_input(p.type.dtype, p.type.shape, opts.seed, i, &al, bound));
        }
      } catch (const rt::OutOfMemory& e) {
        error("input '" + p.name + "' (" + rt::dtype_name(p.type.dtype) + rt::shape_str(p.type.shape) +
              ") does not fit in memory: " + e.what());
        *ok = false;
        return {};
      }
    }
    rep.inputs.push_back({p.name, rt::dtype_name(p.type.dtype),
                          input_sources.count(p.name) ? input_sources[p.name] : "random", p.type.shape});
  }
  std::vector<std::string> params;
  for (const auto& p : t.inputs) params.push_back(p->name);
  for (const auto& kv : inputs) {
    std::string from = input_sources.count(kv.first) ? input_sources[kv.first] + "; " : "";
    std::string list;
    for (const std::string& p : params) list += (list.empty() ? "" : ", ") + p;
    error("input '" + kv.first + "' is not a parameter of '" + entry + "'" + did_you_mean(kv.first, params) + " (" + from +
          "its parameters: " + (list.empty() ? "none" : list) + "; --input NAME=FILE names one)");
  }
  // Inputs from files for some parameters but not all: the others are drawn at random, which a
  // partial or misnamed checkpoint would make a silent surprise; say so, by name.
  if (!input_sources.empty()) {
    std::string files, missing;
    std::unordered_set<std::string> seen_files;
    for (const auto& [name, path] : input_sources)
      if (seen_files.insert(path).second) files += (files.empty() ? "" : ", ") + path;
    size_t n = 0;
    for (const auto& r : rep.inputs)
      if (r.source == "random") missing += (n++ ? ", " : "") + std::string("'") + r.name + "'";
    if (n)
      add(Diagnostic{Severity::warning, {}, std::to_string(n) + (n == 1 ? " parameter" : " parameters") + " of '" + entry +
                                                 "' not in the given inputs (" + files + ") drawn at random: " + missing, {}});
  }
  *ok = inputs.empty();
  return xs;
}




// One run of a program on the CPU: the outputs flattened and named by their proxies, or after
// grad the loss, then each input's gradient. Throws ir::ExecError.
static void run_cpu(const interp::Traces& prog, std::vector<rt::Tensor> inputs, ir::ExecContext& ctx,
                    std::vector<std::pair<std::string, ir::Arg>>& results) {
  const ir::Trace& fw = *prog.front();
  ir::Arg out = ir::execute(fw, std::move(inputs), ctx);
  std::vector<std::string> names = output_names(prog);
  if (prog.size() == 1) {
    std::vector<const ir::Arg*> flat;
    output_leaves(out, flat);
    for (size_t i = 0; i < flat.size(); ++i) results.emplace_back(i < names.size() ? names[i] : "out" + std::to_string(i), *flat[i]);
    return;
  }
  const ir::Trace& bw = *prog[1];
  ir::Arg grads = ir::execute_backward(fw, bw, out, ctx);
  results.emplace_back(names[0], out.items[0]);
  size_t k = 1;
  for (size_t i = 0; i < grads.items.size() && i < bw.output.items.size(); ++i)
    if (bw.output.items[i].kind == ir::Arg::Kind::Proxy) results.emplace_back(k < names.size() ? names[k++] : bw.output.items[i].proxy->name, grads.items[i]);
}

Diagnostic detail::exec_diagnostic(const ir::ExecError& e) {
  const std::string text = e.message + (e.stmt.empty() ? "" : " (in: " + e.stmt + ")");
  if (e.within.empty() || !e.within.back().first.valid()) return Diagnostic{Severity::error, e.loc, text, {}};
  Diagnostic d{Severity::error, e.within.back().first, text, {}};
  std::string name = e.within.front().second;
  d.notes.push_back(Diagnostic{Severity::note, e.loc, "raised inside '" + name + "' here", {}});
  return d;
}

bool Session::Impl::execute(const interp::Traces& prog, std::vector<rt::Tensor> inputs,
                            std::vector<std::pair<std::string, ir::Arg>>& results) {
  if (gexec) {
    RunReport rep;
    double ms = 0;
    return run_gpu(prog, inputs, rep, results, std::chrono::steady_clock::now(), ms);
  }
  try {
    run_cpu(prog, std::move(inputs), in->exec_context(), results);
    return true;
  } catch (const ir::ExecError& e) {
    add(detail::exec_diagnostic(e));
    return false;
  }
}

std::optional<RunReport> Session::run(const std::string& entry, const std::string& output_dir) {
  return impl_->guarded<std::optional<RunReport>>(std::nullopt, [&]() -> std::optional<RunReport> {
    RunReport rep;
    auto t0 = std::chrono::steady_clock::now();
    auto prog = impl_->program(entry);
    if (!prog) return std::nullopt;
    auto t1 = std::chrono::steady_clock::now();
    for (const auto& pt : impl_->timings) rep.passes_ms += pt.ms;
    rep.trace_ms = std::chrono::duration<double, std::milli>(t1 - t0).count() - rep.passes_ms;
    for (const auto& t : *prog) rep.statements += t->stmts.size();
    const ir::Trace& fw = *prog->front();
    try {
      std::string differ = impl_->check_collectives(*prog);
      if (!differ.empty()) {
        impl_->error("rank " + std::to_string(impl_->job->rank) + ": " + differ);
        return std::nullopt;
      }
    } catch (const std::exception& e) {
      impl_->error("rank " + std::to_string(impl_->job->rank) + ": comparing the ranks' programs: " + e.what());
      return std::nullopt;
    }
    bool ok = false;
    std::vector<rt::Tensor> inputs = impl_->make_inputs(fw, entry, rep, &ok);
    if (!ok) return std::nullopt;
    rt::Allocator& al = impl_->in->allocator();
    // The caller keeps its inputs (parameters) for the whole run, but those the trace takes over
    // (a Thunder backward's collections: Proxy::moved_in), which its dels free. --bench's later
    // runs need them again: those keep a copy, live through the reported run too.
    std::vector<rt::Tensor> held = inputs;
    for (size_t i = 0; i < held.size() && i < fw.inputs.size(); ++i)
      if (fw.inputs[i]->moved_in) {
        if (impl_->bench > 0 && held[i].data()) {
          rt::Tensor c = rt::Tensor::empty(held[i].dtype(), held[i].shape());
          std::memcpy(c.data(), held[i].data(), held[i].nbytes());
          held[i] = c;
        } else {
          held[i] = rt::Tensor();
        }
      }
    al.reset_peak();
    std::vector<std::pair<std::string, ir::Arg>> results;
    double first_run_ms = -1;  // the reported run's time and peak (not the bench runs')
    size_t first_peak = 0;
    if (impl_->gexec && !impl_->run_gpu(*prog, inputs, rep, results, t1, first_run_ms)) return std::nullopt;
    if (!impl_->gexec) try {
      run_cpu(*prog, std::move(inputs), impl_->in->exec_context(), results);
      first_run_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
      first_peak = al.peak_bytes();  // of the one reported run
      if (impl_->bench > 0) {  // N more whole-program runs on the CPU, timed
        auto run_once = [&] {
          ir::Arg o = ir::execute(fw, held, impl_->in->exec_context());
          if (prog->size() > 1) ir::execute_backward(fw, *(*prog)[1], o, impl_->in->exec_context());
        };
        std::vector<double> ms;
        for (int i = 0; i < impl_->bench; ++i) {
          auto b0 = std::chrono::steady_clock::now();
          run_once();
          ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - b0).count());
        }
        set_bench_times(rep, ms);
      }
    } catch (const ir::ExecError& e) {
      impl_->add(detail::exec_diagnostic(e));
      return std::nullopt;
    }
    rep.run_ms = first_run_ms >= 0 ? first_run_ms : std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
    rep.peak_bytes = first_peak ? first_peak : al.peak_bytes();
    // On a GPU, allocations are counted in the device allocator's granules, as it counts them.
    rep.estimated_peak_bytes = ir::estimate_memory(raw(*prog), false, impl_->gexec ? &rt::cuda::allocation_size : nullptr).peak_bytes;
    // In a job of several ranks, each rank writes below a directory of its own (DIR/rank1/...),
    // so that no rank's outputs overwrite another's.
    std::string dir = output_dir;
    if (!dir.empty() && impl_->in->world_size() > 1) dir += "/rank" + std::to_string(impl_->in->world_rank());
    for (const auto& [name, a] : results) {
      OutputInfo o;
      std::string err;
      if (!describe_output(name, a, dir, &o, &err)) {
        impl_->error(err);
        return std::nullopt;
      }
      rep.outputs.push_back(std::move(o));
    }
    return rep;
  });
}

bool Session::set_input_type(const std::string& name, const std::string& type) {
  std::string why;
  auto t = ir::parse_type_string(type, &why);
  if (!t) {
    impl_->error(why);
    return false;
  }
  impl_->input_types[name] = *t;
  return true;
}

void Session::clear_input_types() { impl_->input_types.clear(); }

const std::vector<DiagnosticInfo>& Session::diagnostics() const { return impl_->diags; }

std::string Session::rendered_diagnostics() const {
  std::string out;
  for (const auto& d : impl_->diags) out += d.rendered;
  return out;
}

void Session::clear_diagnostics() { impl_->diags.clear(); }

}  // namespace tracer
