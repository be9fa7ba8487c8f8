// The evaluator: statements and expressions over resolved ASTs, function calls and closures.
#include "interpreter/interp.h"

#include <cstdio>
#include <cstdlib>

#include <algorithm>
#include <cmath>

#include "interpreter/parser.h"

namespace tracer::interp {

using ast::Expr;
using ast::ExprKind;
using ast::Stmt;
using ast::StmtKind;

Diagnostic to_diagnostic(const ScriptError& e) {
  Diagnostic d{Severity::error, e.loc, e.message, {}};
  std::vector<Diagnostic> notes;
  for (const TracebackEntry& t : e.traceback)
    notes.push_back({Severity::note, t.call_site, t.note.empty() ? "in a call to '" + t.function + "' from here" : t.note, {}});
  // Recursion: a run of calls that repeats (one frame, or a cycle of up to four: f calls g calls
  // f) is shown three times, then counted, as Python does.
  auto same = [&](size_t a, size_t b) {
    return notes[a].message == notes[b].message && notes[a].loc.file == notes[b].loc.file && notes[a].loc.offset == notes[b].loc.offset;
  };
  for (size_t i = 0; i < notes.size();) {
    size_t best_p = 0, best_r = 0;
    for (size_t p = 1; p <= 4 && i + p <= notes.size(); ++p) {
      size_t r = 1;  // how many times notes[i, i + p) occurs back to back
      while (i + (r + 1) * p <= notes.size()) {
        bool eq = true;
        for (size_t j = 0; j < p && eq; ++j) eq = same(i + j, i + r * p + j);
        if (!eq) break;
        ++r;
      }
      if (r > 3 && r * p > best_r * best_p) best_p = p, best_r = r;
    }
    if (!best_p) {
      d.notes.push_back(notes[i++]);
      continue;
    }
    for (size_t j = 0; j < 3 * best_p; ++j) d.notes.push_back(notes[i + j]);
    size_t more = best_r - 3;
    d.notes.push_back({Severity::note, {}, (best_p == 1 ? std::string("the call above repeated ")
                                                         : "the " + std::to_string(best_p) + " calls above repeated ") +
                                               std::to_string(more) + " more time" + (more == 1 ? "" : "s"), {}});
    i += best_r * best_p;
  }
  return d;
}

Diagnostic Interpreter::diagnose(const ScriptError& e) const {
  auto in_stdlib = [&](SourceLoc l) {
    return std::find(stdlib_files_.begin(), stdlib_files_.end(), l.file) != stdlib_files_.end();
  };
  if (!in_stdlib(e.loc)) return to_diagnostic(e);
  ScriptError user = e;
  size_t k = 0;
  while (k < e.traceback.size() && in_stdlib(e.traceback[k].call_site)) ++k;
  if (k == e.traceback.size()) return to_diagnostic(e);
  user.loc = e.traceback[k].call_site;
  user.traceback.erase(user.traceback.begin(), user.traceback.begin() + static_cast<std::ptrdiff_t>(k) + 1);
  Diagnostic d = to_diagnostic(user);
  d.notes.insert(d.notes.begin(), {Severity::note, e.loc, "raised inside '" + e.traceback[k].function + "' here", {}});
  return d;
}

void Interpreter::fail(SourceLoc loc, const std::string& msg) { throw ScriptError{msg, loc, {}}; }

void Interpreter::step_limit_exceeded(SourceLoc loc) {
  fail(loc, "step limit of " + std::to_string(opts_.step_limit) + " exceeded (a runaway loop or recursion?)");
}

void Interpreter::check_size(uint64_t elements, size_t item_bytes, const char* what, SourceLoc loc) {
  const uint64_t limit = allocator_.limit();
  if (item_bytes == 0 || elements <= limit / item_bytes) return;
  const double bytes = static_cast<double>(elements) * static_cast<double>(item_bytes);
  const std::string size = bytes >= 1.8e19 ? "more than 16 EiB" : rt::Allocator::bytes_text(static_cast<uint64_t>(bytes));
  fail(loc, std::string(what) + " of " + std::to_string(elements) + " items (" + size + ") is more than the memory limit (" +
                rt::Allocator::bytes_text(limit) + "; --memory-limit, $TRACER_MEMORY_LIMIT or a host's memory_limit sets it)");
}

// TRACER_MEMORY_LIMIT: bytes, or a number with K, M, G or T (binary units); 0 when unset or bad.
static size_t env_memory_limit() {
  const char* e = std::getenv("TRACER_MEMORY_LIMIT");
  if (!e || !*e) return 0;
  char* end = nullptr;
  double v = std::strtod(e, &end);
  if (end == e || v <= 0) return 0;
  switch (*end) {
    case 'k': case 'K': v *= 1024.0; break;
    case 'm': case 'M': v *= 1024.0 * 1024; break;
    case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
    case 't': case 'T': v *= 1024.0 * 1024 * 1024 * 1024; break;
    default: break;
  }
  return v >= 1.8e19 ? 0 : static_cast<size_t>(v);
}

Interpreter::Interpreter(SourceManager& sm, Options opts) : sm_(sm), opts_(opts) {
  HeapScope scope(heap_);
  if (const char* p = std::getenv("TRACER_PROFILE_SCRIPTS"); p && *p && std::string(p) != "0") profile_ = std::make_unique<ScriptProfile>();
  exec_.allocator = &allocator_;
  // The limit given, else $TRACER_MEMORY_LIMIT (hosts on the C API, the fuzzers), else 90% of RAM.
  const size_t from_env = opts.memory_limit ? 0 : env_memory_limit();
  allocator_.set_limit(opts.memory_limit ? opts.memory_limit : from_env ? from_env : rt::Allocator::default_limit());
  exec_.seed = opts.seed;
  install_builtins();
  load_stdlib();
}

Interpreter::~Interpreter() {
  HeapScope scope(heap_);
  if (profile_) {
    std::vector<std::pair<const FuncInfo*, std::pair<long long, double>>> rows(profile_->begin(), profile_->end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
    std::fprintf(stderr, "# script functions by inclusive time (TRACER_PROFILE_SCRIPTS): ms, calls, name\n");
    for (size_t i = 0; i < rows.size() && i < 40; ++i)
      std::fprintf(stderr, "#   %10.1f ms %10lld  %s (%s:%d)\n", rows[i].second.second, rows[i].second.first,
                   rows[i].first->name.c_str(), sm_.name(rows[i].first->loc.file).c_str(), sm_.line_col(rows[i].first->loc).line);
  }
  // Functions hold their module and modules hold their functions, and closures can hold
  // themselves through their cells: break every cycle, then let reference counts free the rest.
  passes_.clear();
  for (auto& m : modules_) {
    m->globals.clear();
    ++m->globals_version;
  }
  while (!functions_.empty()) {
    std::vector<Value> keep;  // hold them while their closures are cleared
    for (auto& kv : functions_) {
      keep.emplace_back(kv.second);
      kv.second->registry = nullptr;
    }
    functions_.clear();
    for (Value& v : keep) {
      auto* f = v.as<FunctionObj>();
      f->closure.clear();
      f->defaults.clear();
      f->annotations.clear();
    }
  }
  // Lists, tuples and dicts that hold each other (a list that holds itself) and nothing else.
  heap_.collect_cycles();
}

std::shared_ptr<Module> Interpreter::parse(const std::string& name, std::string text, DiagnosticList& diags,
                                           std::shared_ptr<Globals> globals, const void* once_key) {
  HeapScope scope(heap_);
  int32_t file = sm_.add(name, std::move(text));
  auto m = globals ? std::make_shared<Module>(std::move(globals)) : std::make_shared<Module>();
  m->name = name;
  m->file = file;
  size_t before = diags.items().size();
  m->ast = once_key ? parse::parse_module_once(sm_, file, once_key, diags) : parse::parse_module(sm_, file, diags);
  if (!m->ast) return nullptr;
  bool syntax_errors = false;
  for (size_t i = before; i < diags.items().size(); ++i)
    syntax_errors = syntax_errors || diags.items()[i].severity == Severity::error;
  if (syntax_errors) return nullptr;
  resolve(*m, diags);
  for (size_t i = before; i < diags.items().size(); ++i)
    if (diags.items()[i].severity == Severity::error) return nullptr;
  return m;
}

std::shared_ptr<Module> Interpreter::load(const std::string& name, std::string text, DiagnosticList& diags,
                                          const std::map<std::string, Value>& pinned, bool names_values) {
  HeapScope scope(heap_);
  auto m = parse(name, std::move(text), diags);
  if (!m) return nullptr;
  m->names_values = names_values;
  modules_.push_back(m);
  clear_interrupt();
  // As in Python: "__main__" for the program being run (tracer run's file), else the module's
  // name, so that `if __name__ == "__main__":` guards what only running it should do. A module
  // the program loads while it runs (load_module) is never the program.
  std::string stem = name.substr(name.find_last_of('/') == std::string::npos ? 0 : name.find_last_of('/') + 1);
  if (stem.find('.') != std::string::npos) stem.resize(stem.find('.'));
  m->globals["__name__"] = str_value(main_program_ && names_values && loading_ == 0 ? "__main__" : stem);
  for (const auto& [k, v] : pinned) {
    m->globals[k] = v;
    ++m->globals_version;
    m->pinned.insert(k);
  }
  struct Depth {
    int& n;
    explicit Depth(int& d) : n(d) { ++n; }
    ~Depth() { --n; }
  } depth(loading_);
  try {
    run_module(*m);
  } catch (const ScriptError& e) {
    diags.add(diagnose(e));
    return nullptr;
  }
  return m;
}

std::shared_ptr<Module> Interpreter::load_chunk(const std::string& name, std::string text, DiagnosticList& diags,
                                                const Module& into, Value* value) {
  HeapScope scope(heap_);
  auto m = parse(name, std::move(text), diags, into.store);
  if (!m) return nullptr;
  m->names_values = into.names_values;
  m->pinned = into.pinned;
  modules_.push_back(m);
  if (value) *value = Value();
  interrupted_.store(false);  // an interrupt meant for an earlier chunk
  try {
    Frame fr;
    fr.info = &m->top;
    fr.module = m.get();
    fr.slots.assign(m->top.nslots, Value::unbound());
    const ast::Block& body = m->ast->body;
    bool last_expr = value && !body.empty() && body.back()->kind == ast::StmtKind::Expr;
    for (size_t i = 0; i + (last_expr ? 1 : 0) < body.size(); ++i)
      if (exec_stmt(*body[i], fr) != Flow::Normal) break;
    if (last_expr) {
      tick(body.back()->loc);
      *value = eval(*body.back()->value, fr);
    }
  } catch (const ScriptError& e) {
    diags.add(diagnose(e));
    return nullptr;
  }
  return m;
}

void Interpreter::raise_interrupt(SourceLoc loc) {
  interrupted_.store(false);
  fail(loc, "interrupted");
}

void Interpreter::run_module(Module& m) {
  HeapScope scope(heap_);
  Frame fr;
  fr.info = &m.top;
  fr.module = &m;
  fr.slots.assign(m.top.nslots, Value::unbound());
  exec_block(m.ast->body, fr);
}

// ---------------------------------------------------------------- statements

Flow Interpreter::exec_block(const ast::Block& b, Frame& fr) {
  for (const auto& s : b) {
    Flow f;
    try {
      f = exec_stmt(*s, fr);
    } catch (const std::bad_alloc&) {
      fail(s->loc, "out of memory: a value this statement makes does not fit (the memory limit, --memory-limit or "
                   "$TRACER_MEMORY_LIMIT, may be set lower than what is free)");
    } catch (const std::exception& e) {
      // What the language's own code throws below a statement (values nested too deep to print
      // or compare, an allocation that does not fit) is the statement's error, located.
      fail(s->loc, e.what());
    }
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

namespace {

// Whether p is an output of a statement the assignment being run recorded (the last one, or any
// since Recorder::assign_mark: `(t76, t77) = update_aliases(...)` records one statement each).
bool is_output_of_last(const Recorder& r, const ir::ProxyPtr& p) {
  if (!r.trace || r.scopes.empty() || r.scopes.back()->empty()) return false;
  const std::vector<ir::Stmt>& body = *r.scopes.back();
  size_t from = r.assign_mark < body.size() ? r.assign_mark : body.size() - 1;
  for (size_t i = from; i < body.size(); ++i)
    for (const auto& o : body[i].outputs)
      if (o == p) return true;
  return false;
}

Value& global_slot(Frame& fr, const std::string& name) {
  Module& m = *fr.module;
  auto it = m.globals.find(name);
  if (it != m.globals.end()) return it->second;
  ++m.globals_version;  // a new global may shadow a builtin that a load cached
  return m.globals[name];
}

}  // namespace

void Interpreter::assign(const Expr& t, Value v, Frame& fr, bool naming) {
  switch (t.kind) {
    case ExprKind::Name: {
      if (naming && fr.naming && rec_.trace && v.is(VT::Proxy)) {
        const ir::ProxyPtr& p = v.as<ProxyObj>()->p;
        if (is_output_of_last(rec_, p)) rec_.trace->try_rename(p, t.name);
      }
      switch (static_cast<NameScope>(t.depth)) {
        case NameScope::Local: fr.slots[t.slot] = std::move(v); return;
        case NameScope::Cell: fr.slots[t.slot].as<CellObj>()->v = std::move(v); return;
        case NameScope::Free: fr.fn->closure[t.slot].as<CellObj>()->v = std::move(v); return;
        case NameScope::Global:
          if (!fr.module->pinned.count(t.name)) global_slot(fr, t.name) = std::move(v);
          return;
      }
      return;
    }
    case ExprKind::Tuple:
    case ExprKind::List: {
      std::vector<Value> xs = iterate(v, t.loc);
      size_t star = t.items.size();
      for (size_t i = 0; i < t.items.size(); ++i)
        if (t.items[i]->kind == ExprKind::Starred) star = i;
      if (star == t.items.size()) {
        if (xs.size() != t.items.size())
          fail(t.loc, xs.size() < t.items.size()
                          ? "not enough values to unpack (expected " + std::to_string(t.items.size()) + ", got " +
                                std::to_string(xs.size()) + ")"
                          : "too many values to unpack (expected " + std::to_string(t.items.size()) + ")");
        for (size_t i = 0; i < xs.size(); ++i) assign(*t.items[i], std::move(xs[i]), fr, naming);
        return;
      }
      size_t after = t.items.size() - star - 1;
      if (xs.size() < star + after) fail(t.loc, "not enough values to unpack");
      for (size_t i = 0; i < star; ++i) assign(*t.items[i], xs[i], fr, naming);
      std::vector<Value> mid(xs.begin() + star, xs.end() - after);
      assign(*t.items[star]->items[0], make<ListObj>(std::move(mid)), fr, naming);
      for (size_t i = 0; i < after; ++i) assign(*t.items[star + 1 + i], xs[xs.size() - after + i], fr, naming);
      return;
    }
    case ExprKind::Subscript: {
      Value obj = eval(*t.items[0], fr);
      Value idx = eval(*t.items[1], fr);
      if (obj.is(VT::List)) {
        auto& items = obj.as<ListObj>()->items;
        if (!idx.is(VT::Int)) fail(t.loc, "list indices must be integers");
        int64_t i = idx.as_int() < 0 ? idx.as_int() + static_cast<int64_t>(items.size()) : idx.as_int();
        if (i < 0 || i >= static_cast<int64_t>(items.size())) fail(t.loc, "list assignment index out of range");
        items[i] = std::move(v);
      } else if (obj.is(VT::Dict)) {
        obj.as<DictObj>()->set(idx, std::move(v));
      } else {
        fail(t.loc, std::string("'") + type_name(obj.type()) + "' object does not support item assignment");
      }
      return;
    }
    case ExprKind::Attribute:
      fail(t.loc, "cannot assign to attribute '" + t.name + "'");
    default:
      fail(t.loc, "cannot assign to this expression");
  }
}

static std::vector<const Expr*> flat_names(const Expr& e) {
  if (e.kind == ExprKind::Name) return {&e};
  std::vector<const Expr*> out;
  for (const auto& x : e.items)
    for (const Expr* n : flat_names(*x)) out.push_back(n);
  return out;
}

// A DTensor (stdlib/thunder.trace) against a printout's "DTensor cuda:0 f32[16, 16]": its global
// shape and dtype. False when v is no DTensor.
static bool check_dtensor_type(Interpreter& in, SourceLoc loc, const std::string& name, const std::string& ts, const Value& v) {
  if (!v.is(VT::Namespace) || v.as<NamespaceObj>()->name != "DTensor") return false;
  const auto& m = v.as<NamespaceObj>()->members;
  auto shape = m.find("shape");
  auto dtype = m.find("dtype");
  if (shape == m.end() || !shape->second.is(VT::Tuple) || dtype == m.end() || !dtype->second.is(VT::DType)) return false;
  rt::Shape have;
  for (const Value& d : shape->second.as<TupleObj>()->items)
    if (d.is(VT::Int)) have.push_back(d.as_int());
  const std::string it = std::string("DTensor ") + rt::dtype_name(dtype->second.as_dtype()) + rt::shape_str(have);
  if (ts.rfind("DTensor ", 0) != 0) in.fail(loc, "type comment says '" + name + "' is " + ts + " but it is a " + it);
  std::string why;
  auto t = ir::parse_type_string(ts.substr(8), &why);
  if (!t) in.fail(loc, why);
  if (t->dtype != dtype->second.as_dtype() || t->shape != have) in.fail(loc, "type comment says '" + name + "' is " + ts + " but it is a " + it);
  return true;
}

static void check_type_comments(Interpreter& in, const Stmt& s, const Value& v) {
  if (v.is(VT::Namespace)) {
    for (const ast::TypeComment& tc : s.type_comments) check_dtensor_type(in, tc.loc, tc.name, tc.type_string, v);
    return;
  }
  if (!v.is(VT::Proxy)) return;
  const ir::Proxy& p = *v.as<ProxyObj>()->p;
  for (const ast::TypeComment& tc : s.type_comments) {
    // A Python number's comment ("int 4") on a number tracer holds as a 0-d tensor (a seed or
    // offset read from the generator at run time): the kind must agree; the printed value was
    // the one Thunder saw while tracing.
    const std::string& ts = tc.type_string;
    const char kind = ts.rfind("int ", 0) == 0 ? 'i' : ts.rfind("float ", 0) == 0 ? 'f' : ts.rfind("bool ", 0) == 0 ? 'b' : 0;
    if (kind) {
      const bool ok = p.type.shape.empty() && (kind == 'i'   ? rt::is_int(p.type.dtype)
                                               : kind == 'f' ? rt::is_float(p.type.dtype)
                                                             : p.type.dtype == rt::DType::b8);
      if (!ok) in.fail(tc.loc, "type comment says '" + tc.name + "' is " + ts + " but it is " + p.type.str());
      continue;
    }
    std::string why;
    auto t = ir::parse_type_string(tc.type_string, &why);
    if (!t) in.fail(tc.loc, why);
    // A distribution is checked where the comment states one (Thunder's never do).
    if (!t->same_layout(p.type) || (t->dist != ir::Dist::unknown && !t->same_dist(p.type)))
      in.fail(tc.loc, "type comment says '" + tc.name + "' is " + t->str() + " but it is " + p.type.str());
  }
}

// Whether a name of the frame (a local or a cell) still holds the traced value p.
static bool frame_holds(const Frame& fr, const ir::Proxy* p) {
  for (const Value& v : fr.slots) {
    const Value& x = v.is(VT::Cell) ? v.as<CellObj>()->v : v;
    if (x.is(VT::Proxy) && x.as<ProxyObj>()->p.get() == p) return true;
    // A DTensor (stdlib/thunder.trace) holds its local tensor.
    if (x.is(VT::Namespace) && x.as<NamespaceObj>()->name == "DTensor") {
      auto it = x.as<NamespaceObj>()->members.find("_local_tensor");
      if (it != x.as<NamespaceObj>()->members.end() && it->second.is(VT::Proxy) && it->second.as<ProxyObj>()->p.get() == p) return true;
    }
  }
  return false;
}

// Thunder's source comments: "# /path/model.py:12: \tx = self.fc(x)" (a path, a line, a colon).
static bool is_source_comment(const std::string& c) {
  size_t colon = c.find(':');
  if (colon == 0 || colon == std::string::npos || c.find_first_of(" \t") < colon) return false;
  size_t digits = colon + 1;
  while (digits < c.size() && std::isdigit(static_cast<unsigned char>(c[digits]))) ++digits;
  return digits > colon + 1 && digits < c.size() && c[digits] == ':';
}

Flow Interpreter::exec_stmt(const Stmt& s, Frame& fr) {
  tick(s.loc);
  if (rec_.trace)
    for (const std::string& c : s.comments)
      if (is_source_comment(c)) rec_.source = c;
  switch (s.kind) {
    case StmtKind::Expr:
      eval(*s.value, fr);
      return Flow::Normal;
    case StmtKind::FusionDef:
      // A call printed with its decomposition runs the callee where the name is defined.
      if (!s.decomposed || !name_defined(*s.value->items[0], fr)) return exec_fusion(s, fr);
      [[fallthrough]];
    case StmtKind::Assign: {
      size_t mark = rec_.trace && !rec_.scopes.empty() ? rec_.scopes.back()->size() : SIZE_MAX;
      Value v = eval(*s.value, fr);
      rec_.assign_mark = mark;
      for (const auto& t : s.targets) assign(*t, v, fr, true);
      rec_.assign_mark = SIZE_MAX;
      if (rec_.trace && s.targets.size() == 1 && s.targets[0]->kind == ExprKind::Name) check_type_comments(*this, s, v);
      return Flow::Normal;
    }
    case StmtKind::AugAssign: {
      const Expr& t = *s.targets[0];
      Value cur = eval(t, fr);
      Value rhs = eval(*s.value, fr);
      if (cur.is(VT::List) && s.op == ast::Op::Add) {
        std::vector<Value> more = iterate(rhs, s.loc);
        auto& items = cur.as<ListObj>()->items;
        items.insert(items.end(), more.begin(), more.end());
        return Flow::Normal;
      }
      assign(t, binary(s.op, cur, rhs, s.loc), fr, true);
      return Flow::Normal;
    }
    case StmtKind::AnnAssign: {
      if (!s.value) return Flow::Normal;
      Value v = eval(*s.value, fr);
      // A printout's `x: "cuda:0 f32[2, 3]" = args[0]`: a tensor type is checked as a type comment
      // is; other annotations ("Any", "<class 'torch.dtype'>", "int 8") are not.
      if (rec_.trace && s.annotation && s.annotation->kind == ExprKind::Str)
        check_dtensor_type(*this, s.annotation->loc, s.targets[0]->name, s.annotation->str_value, v);
      if (rec_.trace && v.is(VT::Proxy) && s.annotation && s.annotation->kind == ExprKind::Str) {
        std::string why;
        auto t = ir::parse_type_string(s.annotation->str_value, &why);
        const ir::Proxy& p = *v.as<ProxyObj>()->p;
        if (t && !t->same_layout(p.type))
          fail(s.annotation->loc, "the annotation says '" + s.targets[0]->name + "' is " + t->str() + " but it is " + p.type.str());
      }
      assign(*s.targets[0], std::move(v), fr, true);
      return Flow::Normal;
    }
    case StmtKind::Del: {
      std::vector<ir::ProxyPtr> deleted;
      for (const auto& t : s.targets) {
        if (t->kind == ExprKind::Subscript) {
          Value obj = eval(*t->items[0], fr), idx = eval(*t->items[1], fr);
          if (obj.is(VT::Dict)) {
            if (!obj.as<DictObj>()->erase(idx)) fail(t->loc, "key " + repr(idx) + " not found");
          } else if (obj.is(VT::List) && idx.is(VT::Int)) {
            auto& items = obj.as<ListObj>()->items;
            int64_t i = idx.as_int() < 0 ? idx.as_int() + static_cast<int64_t>(items.size()) : idx.as_int();
            if (i < 0 || i >= static_cast<int64_t>(items.size())) fail(t->loc, "list index out of range");
            items.erase(items.begin() + i);
          } else {
            fail(t->loc, "cannot delete this item");
          }
          continue;
        }
        for (const Expr* n : flat_names(*t)) {
          Value v = eval(*n, fr);
          switch (static_cast<NameScope>(n->depth)) {
            case NameScope::Local: fr.slots[n->slot] = Value::unbound(); break;
            case NameScope::Cell: fr.slots[n->slot].as<CellObj>()->v = Value::unbound(); break;
            case NameScope::Free: fr.fn->closure[n->slot].as<CellObj>()->v = Value::unbound(); break;
            case NameScope::Global:
              fr.module->globals.erase(n->name);
              ++fr.module->globals_version;
              break;
          }
          // The value dies in the trace when no other name of this frame still holds it: a
          // reshape to the same shape returns its input, so `t31 = reshape(t0, ...); del t0`
          // leaves t31 alive, and its own del frees it.
          if (rec_.trace && fr.naming && v.is(VT::Proxy) && !frame_holds(fr, v.as<ProxyObj>()->p.get())) {
            const ir::ProxyPtr& p = v.as<ProxyObj>()->p;
            // A written tensor's value now (prims.copy_ through a view): its aliases' updates read
            // it; its del waits for the next write into that tensor (_alias_written).
            const ir::ProxyPtr& root = ir::view_root(p);
            if (p->view && !p->view->op && root->storage && root->storage->current.lock() == p) root->storage->current_deleted = true;
            else if (collection_holds(fr, p.get())) rec_.held.push_back(p);
            else deleted.push_back(p);
          }
        }
      }
      if (rec_.trace && !rec_.held.empty() && fr.naming) {
        // A collection whose last name went may let go of what it held.
        for (auto it = rec_.held.begin(); it != rec_.held.end();) {
          if (collection_holds(fr, it->get())) {
            ++it;
          } else {
            deleted.push_back(*it);
            it = rec_.held.erase(it);
          }
        }
      }
      if (!deleted.empty()) {
        ir::Stmt d;
        d.kind = ir::StmtKind::Del;
        d.deleted = std::move(deleted);
        d.loc = s.loc;
        d.region = rec_.region;
        d.region_id = rec_.region_id;
        push_stmt(std::move(d));
      }
      return Flow::Normal;
    }
    case StmtKind::Pass:
    case StmtKind::Global:
    case StmtKind::Nonlocal:
    case StmtKind::TypeComment:
      return Flow::Normal;
    case StmtKind::Break: return Flow::Break;
    case StmtKind::Continue: return Flow::Continue;
    case StmtKind::Return:
      fr.ret = s.value ? eval(*s.value, fr) : Value();
      return Flow::Return;
    case StmtKind::If:
      if (truth(eval(*s.value, fr), s.value->loc)) return exec_block(s.body, fr);
      return exec_block(s.orelse, fr);
    case StmtKind::While:
      while (truth(eval(*s.value, fr), s.value->loc)) {
        Flow f = exec_block(s.body, fr);
        if (f == Flow::Break) return Flow::Normal;
        if (f == Flow::Return) return f;
      }
      return exec_block(s.orelse, fr);
    case StmtKind::For: {
      Value it = eval(*s.value, fr);
      const Expr& target = *s.targets[0];
      auto body = [&](Value x) -> int {
        assign(target, std::move(x), fr, false);
        Flow f = exec_block(s.body, fr);
        if (f == Flow::Break) return 1;
        if (f == Flow::Return) return 2;
        return 0;
      };
      if (it.is(VT::Range)) {
        auto* r = it.as<RangeObj>();
        int64_t n = r->size();
        for (int64_t i = 0; i < n; ++i) {
          int c = body(Value::integer(r->start + i * r->step));
          if (c == 1) return Flow::Normal;
          if (c == 2) return Flow::Return;
        }
      } else if (it.is(VT::List)) {
        // Over the live list, as Python does (no copy; items appended in the loop are seen).
        const auto& items = it.as<ListObj>()->items;
        for (size_t i = 0; i < items.size(); ++i) {
          int c = body(items[i]);
          if (c == 1) return Flow::Normal;
          if (c == 2) return Flow::Return;
        }
      } else {
        for (Value& x : iterate(it, s.value->loc)) {
          int c = body(std::move(x));
          if (c == 1) return Flow::Normal;
          if (c == 2) return Flow::Return;
        }
      }
      return exec_block(s.orelse, fr);
    }
    case StmtKind::FunctionDef: {
      Value f = make_function(*fr.module->by_node.at(&s), fr, s.loc);
      for (auto it = s.decorators.rbegin(); it != s.decorators.rend(); ++it) {
        Value dec = eval(**it, fr);
        CallArgs a;
        a.pos.push_back(std::move(f));
        f = call(dec, std::move(a), (*it)->loc);
      }
      assign(*fr.module->binds.at(&s).at(0), std::move(f), fr, false);
      return Flow::Normal;
    }
    case StmtKind::With: return exec_with(s, fr);
    case StmtKind::Import:
    case StmtKind::ImportFrom: exec_import(s, fr); return Flow::Normal;
    case StmtKind::Raise: {
      std::string msg = s.value ? to_str(eval(*s.value, fr)) : "exception raised";
      fail(s.loc, msg);
    }
    case StmtKind::Assert:
      if (!truth(eval(*s.value, fr), s.value->loc))
        fail(s.loc, s.annotation ? "assertion failed: " + to_str(eval(*s.annotation, fr)) : "assertion failed");
      return Flow::Normal;
  }
  return Flow::Normal;
}

}  // namespace tracer::interp
