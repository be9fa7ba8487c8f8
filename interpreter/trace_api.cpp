// The trace API for passes written in the language: traces and statements as values, recording
// new statements, and native helpers where speed matters (flatten, liveness, producers).
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "interpreter/builtins.h"
#include "interpreter/interp.h"
#include "interpreter/mincut.h"
#include "interpreter/trace_api.h"
#include "ir/fusion.h"
#include "ir/group.h"
#include "ir/memory.h"

namespace tracer::interp {

namespace {

using K = ir::Arg::Kind;

std::shared_ptr<ir::Trace> want_trace(Interpreter& in, const Value& v, const char* fn, SourceLoc loc) {
  if (!v.is(VT::Trace)) in.fail(loc, std::string(fn) + "() expects a trace, got " + type_name(v.type()));
  return v.as<TraceObj>()->trace;
}

const Value* kwarg(const CallArgs& a, const char* name) {
  for (const auto& [k, v] : a.kw)
    if (k == name) return &v;
  return nullptr;
}

Value proxy_list(const std::vector<ir::ProxyPtr>& ps) {
  std::vector<Value> out;
  out.reserve(ps.size());
  for (const auto& p : ps) out.push_back(make<ProxyObj>(p));
  return make<ListObj>(std::move(out));
}

void collect_defined(const std::vector<ir::Stmt>& stmts, std::unordered_set<const ir::Proxy*>& out) {
  for (const ir::Stmt& s : stmts) {
    for (const auto& p : s.outputs) out.insert(p.get());
    collect_defined(s.subsymbols, out);
  }
}

void register_names(ir::Trace& t, const ir::Stmt& s) {
  for (const auto& p : s.outputs) t.names.insert(p->name);
  for (const ir::Stmt& sub : s.subsymbols) register_names(t, sub);
}

// ---- statements ----

// Whether every primitive in s (recursively) satisfies pred; a del or an empty composite does not.
template <class Pred>
bool all_prims(const ir::Stmt& s, Pred pred) {
  if (s.kind == ir::StmtKind::Del) return false;
  if (s.kind == ir::StmtKind::Prim) return pred(s);
  if (s.subsymbols.empty()) return false;
  for (const ir::Stmt& sub : s.subsymbols)
    if (!all_prims(sub, pred)) return false;
  return true;
}

// Every primitive elementwise: such a statement is cheap to recompute (remat).
bool all_elementwise(const ir::Stmt& s) {
  return all_prims(s, [](const ir::Stmt& p) { return p.op && p.op->kind == ir::OpKind::Elementwise; });
}

// Every primitive elementwise or a stateless random draw: it can join a fused group (fuse).
bool all_fusible(const ir::Stmt& s) { return all_prims(s, ir::fusible_prim); }

// Every primitive one a fused kernel can hold (ir/group.h): elementwise, draws, reductions over
// rows or columns, views and creations.
bool all_groupable(const ir::Stmt& s) { return all_prims(s, ir::group_prim); }

// Every primitive a view op or a creation: no arithmetic of its own.
bool all_layout(const ir::Stmt& s) { return all_prims(s, ir::layout_prim); }

Value stmt_args(const ir::Stmt& s) {
  std::vector<Value> out;
  for (const ir::Arg& a : s.args) out.push_back(from_arg(a));
  return make<ListObj>(std::move(out));
}

const char* kind_name(ir::StmtKind k) {
  switch (k) {
    case ir::StmtKind::Prim: return "prim";
    case ir::StmtKind::Composite: return "composite";
    case ir::StmtKind::Fusion: return "fusion";
    case ir::StmtKind::Del: return "del";
  }
  return "prim";
}

const char* op_kind_name(ir::OpKind k) {
  switch (k) {
    case ir::OpKind::Elementwise: return "elementwise";
    case ir::OpKind::Shape: return "shape";
    case ir::OpKind::Reduction: return "reduction";
    case ir::OpKind::Matmul: return "matmul";
    case ir::OpKind::Random: return "random";
    case ir::OpKind::Creation: return "creation";
    case ir::OpKind::Gather: return "gather";
    case ir::OpKind::Other: return "other";
  }
  return "other";
}

// ---- copying statements into the recording trace ----

// A substitution of proxies: the script's dict (looked up per argument, never copied whole, so
// that emitting is O(arguments) however large the dict grows), plus the proxies renamed by this
// emit, which are also written back into the dict.
struct Subst {
  DictObj* dict = nullptr;
  std::unordered_map<const ir::Proxy*, ir::Arg> local;

  const ir::Arg* find(const ir::ProxyPtr& p) {
    auto it = local.find(p.get());
    if (it != local.end()) return &it->second;
    if (!dict) return nullptr;
    Value* v = dict->find(make<ProxyObj>(p));
    if (!v) return nullptr;
    ir::Arg a;
    if (!to_arg(*v, &a)) return nullptr;
    return &local.emplace(p.get(), std::move(a)).first->second;
  }
};

ir::Arg substitute(const ir::Arg& a, Subst& m) {
  if (a.kind == K::Proxy) {
    const ir::Arg* r = m.find(a.proxy);
    return r ? *r : a;
  }
  if (a.items.empty()) return a;
  ir::Arg out = a;
  for (ir::Arg& x : out.items) x = substitute(x, m);
  return out;
}

// Copies s with arguments substituted; with a prefix, every output (subsymbols included) becomes
// a new proxy named prefix + old name (or a generated name when that is taken), recorded in m.
ir::Stmt copy_stmt(const ir::Stmt& s, Subst& m, ir::Trace& t, const std::string* prefix) {
  ir::Stmt c = s;
  for (ir::Arg& a : c.args) a = substitute(a, m);
  for (auto& kv : c.kwargs) kv.second = substitute(kv.second, m);
  for (auto& p : c.deleted) {
    const ir::Arg* r = m.find(p);
    if (r && r->kind == K::Proxy) p = r->proxy;
  }
  c.subsymbols.clear();
  for (const ir::Stmt& sub : s.subsymbols) c.subsymbols.push_back(copy_stmt(sub, m, t, prefix));
  for (auto& p : c.outputs) {
    auto done = m.local.find(p.get());
    if (done != m.local.end() && done->second.kind == K::Proxy) {  // defined by a subsymbol copy
      p = done->second.proxy;
      continue;
    }
    if (!prefix) continue;
    auto np = t.new_proxy(p->type);
    t.try_rename(np, *prefix + p->name);
    np->auto_named = false;
    m.local[p.get()] = ir::Arg::of_proxy(np);
    p = np;
  }
  return c;
}

}  // namespace

// ---- attributes ----

bool trace_attr(Interpreter& in, const Value& obj, const std::string& name, Value* out) {
  if (obj.is(VT::Trace)) {
    const ir::Trace& t = *obj.as<TraceObj>()->trace;
    if (name == "name") *out = str_value(t.name);
    else if (name == "inputs") *out = proxy_list(t.inputs);
    else if (name == "output") *out = from_arg(t.output);
    else if (name == "statements") {
      auto sp = obj.as<TraceObj>()->trace;
      std::vector<Value> xs;
      xs.reserve(t.stmts.size());
      // Statements share the trace's storage: aliasing shared_ptrs keep it alive.
      for (const ir::Stmt& s : t.stmts) xs.push_back(make<StmtObj>(std::shared_ptr<const ir::Stmt>(sp, &s)));
      *out = make<ListObj>(std::move(xs));
    } else if (name == "provenance") {
      std::vector<Value> xs;
      for (const auto& p : t.provenance) xs.push_back(str_value(p));
      *out = make<ListObj>(std::move(xs));
    } else {
      return false;
    }
    return true;
  }
  if (obj.is(VT::Stmt)) {
    const auto& sp = obj.as<StmtObj>()->stmt;
    const ir::Stmt& s = *sp;
    if (name == "kind") *out = str_value(kind_name(s.kind));
    // A host's op is named with its namespace ("native.clip"): no pass mistakes it for a prim.
    else if (name == "op") *out = str_value(s.op ? (s.op->ns == "prims" ? s.op->name : s.op->ns + "." + s.op->name) : s.callee);
    else if (name == "callee") *out = str_value(s.callee);
    else if (name == "op_kind") *out = s.op ? str_value(op_kind_name(s.op->kind)) : Value();
    else if (name == "args") *out = stmt_args(s);
    else if (name == "outputs") *out = proxy_list(s.outputs);
    else if (name == "deleted") *out = proxy_list(s.deleted);
    else if (name == "reads") {  // (passlib's reads(s): every pass asks it, so it is native)
      std::vector<ir::ProxyPtr> ps;
      auto use = [&](const ir::ProxyPtr& p) { ps.push_back(p); };
      for (const ir::Arg& x : s.args) ir::for_each_proxy(x, use);
      for (const auto& kv : s.kwargs) ir::for_each_proxy(kv.second, use);
      *out = proxy_list(ps);
    }
    else if (name == "region") *out = s.region.empty() ? Value() : str_value(s.region);
    else if (name == "region_id") *out = Value::integer(s.region_id);
    else if (name == "elementwise") *out = Value::boolean(all_elementwise(s));
    else if (name == "fusible") *out = Value::boolean(all_fusible(s));
    else if (name == "groupable") *out = Value::boolean(all_groupable(s));
    else if (name == "layout") *out = Value::boolean(all_layout(s));
    else if (name == "column_reduction") *out = Value::boolean(ir::column_reduction(s));
    else if (name == "row_reduction") {
      ir::Shape sh;
      if (ir::row_reduction(s, &sh)) {
        std::vector<Value> dims;
        for (int64_t d : sh) dims.push_back(Value::integer(d));
        *out = make<TupleObj>(std::move(dims));
      } else {
        *out = Value();
      }
    }
    else if (name == "kwargs") {
      auto* d = new DictObj();
      *out = Value(d);
      for (const auto& [k, v] : s.kwargs) d->set(str_value(k), from_arg(v));
    } else if (name == "subsymbols") {
      std::vector<Value> xs;
      for (const ir::Stmt& sub : s.subsymbols) xs.push_back(make<StmtObj>(std::shared_ptr<const ir::Stmt>(sp, &sub)));
      *out = make<ListObj>(std::move(xs));
    } else {
      return false;
    }
    return true;
  }
  if (obj.is(VT::Proxy) && name == "nbytes") {
    *out = Value::integer(static_cast<int64_t>(obj.as<ProxyObj>()->p->type.nbytes()));
    return true;
  }
  // The distribution over the job's ranks (docs/distributed.md): "replicated", "sharded",
  // "per-rank", or None when not known; shard_dim for a sharded one; future for a collective's
  // pending result.
  if (obj.is(VT::Proxy) && (name == "dist" || name == "shard_dim" || name == "future")) {
    const ir::TensorType& t = obj.as<ProxyObj>()->p->type;
    if (name == "future") *out = Value::boolean(t.future);
    else if (name == "shard_dim") *out = t.dist == ir::Dist::sharded ? Value::integer(t.shard_dim) : Value();
    else if (t.dist == ir::Dist::replicated) *out = str_value("replicated");
    else if (t.dist == ir::Dist::sharded) *out = str_value("sharded");
    else if (t.dist == ir::Dist::per_rank) *out = str_value("per-rank");
    else *out = Value();
    return true;
  }
  (void)in;
  return false;
}

// ---- trace methods ----

namespace {

Value t_add_input(Interpreter& in, CallArgs& a, SourceLoc loc) {
  auto t = want_trace(in, a.pos[0], "add_input", loc);
  if (a.pos.size() != 3 || !a.pos[1].is(VT::Str) || !(a.pos[2].is(VT::Proxy) || a.pos[2].is(VT::Type)))
    in.fail(loc, "add_input(name, like) takes a name and a proxy or tensor type");
  ir::TensorType ty = a.pos[2].is(VT::Proxy) ? a.pos[2].as<ProxyObj>()->p->type : a.pos[2].as<TypeObj>()->type;
  auto p = t->new_proxy(ty);
  t->try_rename(p, a.pos[1].as<StrObj>()->s);
  p->auto_named = false;
  t->inputs.push_back(p);
  return make<ProxyObj>(p);
}

Value t_set_inputs(Interpreter& in, CallArgs& a, SourceLoc loc) {
  auto t = want_trace(in, a.pos[0], "set_inputs", loc);
  if (a.pos.size() != 2) in.fail(loc, "set_inputs(proxies) takes one list");
  std::vector<ir::ProxyPtr> ps;
  for (const Value& v : in.iterate(a.pos[1], loc)) {
    if (!v.is(VT::Proxy)) in.fail(loc, "set_inputs(): inputs must be proxies");
    ps.push_back(v.as<ProxyObj>()->p);
    t->names.insert(ps.back()->name);
  }
  t->inputs = std::move(ps);
  return Value();
}

Value t_set_output(Interpreter& in, CallArgs& a, SourceLoc loc) {
  auto t = want_trace(in, a.pos[0], "set_output", loc);
  if (a.pos.size() != 2) in.fail(loc, "set_output(value) takes one value");
  ir::Arg out;
  if (!to_arg(a.pos[1], &out)) in.fail(loc, "set_output(): a trace returns tensors, numbers or sequences of them");
  t->output = std::move(out);
  return Value();
}

Value t_copy(Interpreter& in, CallArgs& a, SourceLoc loc) {
  return make<TraceObj>(std::make_shared<ir::Trace>(*want_trace(in, a.pos[0], "copy", loc)));
}

const BuiltinDef kTraceMethods[] = {
    {"add_input", t_add_input, "t.add_input(name, like): a new input proxy of like's type (a proxy or f32[...])."},
    {"set_inputs", t_set_inputs, "t.set_inputs(proxies): replaces the trace's inputs."},
    {"set_output", t_set_output, "t.set_output(value): what the trace returns."},
    {"copy", t_copy, "t.copy(): a copy of the trace (statements copied, proxies shared)."},
};

// ---- global helpers ----

Value b_new_trace(Interpreter& in, CallArgs& a, SourceLoc loc) {
  if (a.pos.empty() || !a.pos[0].is(VT::Str)) in.fail(loc, "new_trace(name, like=None) takes a name");
  auto t = std::make_shared<ir::Trace>();
  t->name = a.pos[0].as<StrObj>()->s;
  const Value* like = a.pos.size() > 1 ? &a.pos[1] : kwarg(a, "like");
  if (like && !like->is_none()) {
    // New names never collide with those of the given trace(s): a program's traces share names.
    std::vector<Value> ls = like->is(VT::List) || like->is(VT::Tuple) ? in.iterate(*like, loc) : std::vector<Value>{*like};
    for (const Value& v : ls) {
      auto l = want_trace(in, v, "new_trace", loc);
      t->names.insert(l->names.begin(), l->names.end());
      t->next_name = std::max(t->next_name, l->next_name);
    }
  }
  return make<TraceObj>(t);
}

Value b_recording(Interpreter& in, CallArgs& a, SourceLoc loc) {
  if (a.pos.size() != 1) in.fail(loc, "recording(t) takes one trace");
  return make<RecordingObj>(want_trace(in, a.pos[0], "recording", loc));
}

// The copy emit and copy_stmt make of (stmt, subst=None, prefix=None): arguments substituted
// through subst; with a prefix, outputs renamed in the trace being recorded and written into
// subst (old -> new).
ir::Stmt copy_for_recording(Interpreter& in, CallArgs& a, SourceLoc loc, const char* fn) {
  std::string name(fn);
  if (a.pos.empty() || !a.pos[0].is(VT::Stmt)) in.fail(loc, name + "(stmt, subst=None, prefix=None) takes a statement");
  ir::Trace* t = in.recording_trace();
  if (!t) in.fail(loc, name + "() outside of 'with recording(t):'");
  const Value* sv = a.pos.size() > 1 ? &a.pos[1] : kwarg(a, "subst");
  const Value* pv = a.pos.size() > 2 ? &a.pos[2] : kwarg(a, "prefix");
  if (sv && !sv->is_none() && !sv->is(VT::Dict)) in.fail(loc, name + "(): subst must be a dict from proxies to values");
  Subst m;
  m.dict = sv && sv->is(VT::Dict) ? sv->as<DictObj>() : nullptr;
  std::string prefix = pv && pv->is(VT::Str) ? pv->as<StrObj>()->s : "";
  const ir::Stmt& s = *a.pos[0].as<StmtObj>()->stmt;
  ir::Stmt c = copy_stmt(s, m, *t, pv && pv->is(VT::Str) ? &prefix : nullptr);
  if (m.dict && !prefix.empty())
    for (size_t i = 0; i < s.outputs.size(); ++i) m.dict->set(make<ProxyObj>(s.outputs[i]), make<ProxyObj>(c.outputs[i]));
  return c;
}

Value b_emit(Interpreter& in, CallArgs& a, SourceLoc loc) {
  ir::Stmt c = copy_for_recording(in, a, loc, "emit");
  register_names(*in.recording_trace(), c);
  in.record(std::move(c));
  return proxy_list(in.last_recorded().outputs);
}

// copy_stmt: like emit, but returns the copy instead of recording it (to build a fusion from).
Value b_copy_stmt(Interpreter& in, CallArgs& a, SourceLoc loc) {
  auto c = std::make_shared<ir::Stmt>(copy_for_recording(in, a, loc, "copy_stmt"));
  return make<StmtObj>(std::shared_ptr<const ir::Stmt>(c));
}

Value b_emit_del(Interpreter& in, CallArgs& a, SourceLoc loc) {
  if (a.pos.empty() || a.pos.size() > 2) in.fail(loc, "emit_del(proxies, like=None) takes a list and a statement");
  ir::Stmt d;
  d.kind = ir::StmtKind::Del;
  d.loc = loc;
  const Value* like = a.pos.size() > 1 ? &a.pos[1] : kwarg(a, "like");
  if (like && like->is(VT::Stmt)) {  // stays inside the region of the statement it follows
    d.region = like->as<StmtObj>()->stmt->region;
    d.region_id = like->as<StmtObj>()->stmt->region_id;
  }
  for (const Value& v : in.iterate(a.pos[0], loc)) {
    if (!v.is(VT::Proxy)) in.fail(loc, "emit_del(): only proxies can be deleted");
    d.deleted.push_back(v.as<ProxyObj>()->p);
  }
  if (!in.recording_trace()) in.fail(loc, "emit_del() outside of 'with recording(t):'");
  if (!d.deleted.empty()) in.record(std::move(d));
  return Value();
}

void flatten_into(const std::vector<ir::Stmt>& stmts, std::vector<ir::Stmt>& out,
                  const std::unordered_set<std::string>& keep) {
  for (const ir::Stmt& s : stmts) {
    if ((s.kind == ir::StmtKind::Composite || s.kind == ir::StmtKind::Fusion) && !keep.count(s.callee)) {
      size_t first = out.size();
      flatten_into(s.subsymbols, out, keep);
      if (first < out.size() && out[first].source.empty()) out[first].source = s.source;
      for (size_t i = first; i < out.size(); ++i) {
        out[i].region = s.region;
        out[i].region_id = s.region_id;
        if (!out[i].loc.valid()) out[i].loc = s.loc;
      }
    } else {
      out.push_back(s);
    }
  }
}

Value b_flatten(Interpreter& in, CallArgs& a, SourceLoc loc) {
  if (a.pos.empty() || a.pos.size() > 2) in.fail(loc, "flatten(t, keep=[]) takes a trace and a list of callees");
  auto t = want_trace(in, a.pos[0], "flatten", loc);
  std::unordered_set<std::string> keep;
  const Value* kv = a.pos.size() > 1 ? &a.pos[1] : kwarg(a, "keep");
  if (kv && !kv->is_none())
    for (const Value& v : in.iterate(*kv, loc)) {
      if (!v.is(VT::Str)) in.fail(loc, "flatten(): keep lists callee names such as 'ltorch.silu'");
      keep.insert(v.as<StrObj>()->s);
    }
  auto f = std::make_shared<ir::Trace>(*t);
  f->stmts.clear();
  flatten_into(t->stmts, f->stmts, keep);
  return make<TraceObj>(f);
}

// Proxies a trace uses but neither defines nor takes as inputs, in order of first use.
Value b_free_proxies(Interpreter& in, CallArgs& a, SourceLoc loc) {
  auto t = want_trace(in, a.pos.at(0), "free_proxies", loc);
  std::unordered_set<const ir::Proxy*> defined, seen;
  for (const auto& p : t->inputs) defined.insert(p.get());
  std::vector<ir::ProxyPtr> out;
  auto use = [&](const ir::ProxyPtr& p) {
    if (!defined.count(p.get()) && seen.insert(p.get()).second) out.push_back(p);
  };
  std::function<void(const std::vector<ir::Stmt>&)> walk = [&](const std::vector<ir::Stmt>& stmts) {
    for (const ir::Stmt& s : stmts) {
      for (const ir::Arg& x : s.args) ir::for_each_proxy(x, use);
      for (const auto& kv : s.kwargs) ir::for_each_proxy(kv.second, use);
      walk(s.subsymbols);
      for (const auto& p : s.outputs) defined.insert(p.get());
    }
  };
  walk(t->stmts);
  ir::for_each_proxy(t->output, use);
  return proxy_list(out);
}

// name -> index of the last top-level statement that reads it (len(statements) for the output).
Value b_last_uses(Interpreter& in, CallArgs& a, SourceLoc loc) {
  auto t = want_trace(in, a.pos.at(0), "last_uses", loc);
  std::unordered_map<std::string, int64_t> last;
  for (size_t i = 0; i < t->stmts.size(); ++i) {
    const ir::Stmt& s = t->stmts[i];
    if (s.kind == ir::StmtKind::Del) continue;
    auto use = [&](const ir::ProxyPtr& p) { last[p->name] = static_cast<int64_t>(i); };
    for (const ir::Arg& x : s.args) ir::for_each_proxy(x, use);
    for (const auto& kv : s.kwargs) ir::for_each_proxy(kv.second, use);
  }
  ir::for_each_proxy(t->output, [&](const ir::ProxyPtr& p) { last[p->name] = static_cast<int64_t>(t->stmts.size()); });
  auto* d = new DictObj();
  Value out(d);
  for (const auto& [k, v] : last) d->set(str_value(k), Value::integer(v));
  return out;
}

// memory_estimate(traces, starts=False): the memory estimator (tracer mem) over a program, as the
// executor will run it: (peak bytes, for each trace a list of the live bytes after each
// statement), and with starts=True a third element, the live bytes as each trace starts.
Value b_memory_estimate(Interpreter& in, CallArgs& a, SourceLoc loc) {
  if (a.pos.size() != 1) in.fail(loc, "memory_estimate(traces, starts=False) takes a list of traces");
  const Value* sv = kwarg(a, "starts");
  if (sv && !sv->is(VT::Bool)) in.fail(loc, "memory_estimate(starts=...) is True or False");
  const bool want_starts = sv && sv->as_bool();
  std::vector<std::shared_ptr<ir::Trace>> held;
  std::vector<const ir::Trace*> traces;
  for (const Value& v : in.iterate(a.pos[0], loc)) {
    held.push_back(want_trace(in, v, "memory_estimate", loc));
    traces.push_back(held.back().get());
  }
  ir::MemReport r = ir::estimate_memory(traces, false);
  std::vector<std::vector<Value>> live(traces.size());
  for (size_t t = 0; t < traces.size(); ++t) live[t].assign(traces[t]->stmts.size(), Value::integer(0));
  for (const ir::MemPoint& p : r.timeline)
    if (p.phase >= 0 && static_cast<size_t>(p.phase) < live.size() && p.index < live[p.phase].size())
      live[p.phase][p.index] = Value::integer(static_cast<int64_t>(p.live_bytes));
  std::vector<Value> lists;
  for (auto& l : live) lists.push_back(make<ListObj>(std::move(l)));
  if (!want_starts)
    return make<TupleObj>(std::vector<Value>{Value::integer(static_cast<int64_t>(r.peak_bytes)), make<ListObj>(std::move(lists))});
  std::vector<Value> starts(traces.size(), Value());  // None: a trace the estimator did not run
  for (size_t t = 0; t < traces.size() && t < r.start_bytes.size(); ++t) starts[t] = Value::integer(static_cast<int64_t>(r.start_bytes[t]));
  return make<TupleObj>(std::vector<Value>{Value::integer(static_cast<int64_t>(r.peak_bytes)), make<ListObj>(std::move(lists)),
                                           make<ListObj>(std::move(starts))});
}

// The fusion of a builtin's (stmts, outputs) arguments, for runs_fused and group_kind.
ir::Stmt fusion_arg(Interpreter& in, CallArgs& a, SourceLoc loc, const char* name) {
  if (a.pos.size() != 2) in.fail(loc, std::string(name) + "(stmts, outputs) takes a list of statements and a list of proxies");
  ir::Stmt f;
  f.kind = ir::StmtKind::Fusion;
  for (const Value& v : in.iterate(a.pos[0], loc)) {
    if (!v.is(VT::Stmt)) in.fail(loc, std::string(name) + "(): expected statements, got " + type_name(v.type()));
    f.subsymbols.push_back(*v.as<StmtObj>()->stmt);
  }
  for (const Value& v : in.iterate(a.pos[1], loc)) {
    if (!v.is(VT::Proxy)) in.fail(loc, std::string(name) + "(): expected proxies as outputs, got " + type_name(v.type()));
    f.outputs.push_back(v.as<ProxyObj>()->p);
  }
  return f;
}

// runs_fused(stmts, outputs): whether a fusion of these statements with these outputs would run
// block by block on the CPU (ir::runs_fused), holding only its inputs and outputs.
Value b_runs_fused(Interpreter& in, CallArgs& a, SourceLoc loc) {
  return Value::boolean(ir::runs_fused(fusion_arg(in, a, loc, "runs_fused")));
}

// A group kind as the language names it: "elementwise", "rows", "columns", "rows_columns", or None.
Value group_kind_value(ir::GroupKind k) {
  switch (k) {
    case ir::GroupKind::Elementwise: return str_value("elementwise");
    case ir::GroupKind::Rows: return str_value("rows");
    case ir::GroupKind::Columns: return str_value("columns");
    case ir::GroupKind::RowsColumns: return str_value("rows_columns");
    default: return Value();
  }
}

// group_kind(stmts, outputs): how their fusion runs as one kernel (ir::plan_group): "elementwise",
// "rows", "columns", "rows_columns", or None.
Value b_group_kind(Interpreter& in, CallArgs& a, SourceLoc loc) {
  ir::Stmt f = fusion_arg(in, a, loc, "group_kind");
  return group_kind_value(ir::plan_group(f).kind);
}

// block_kind(stmts, outputs): group_kind's answer where the fusion also runs block by block on
// the CPU (runs_fused), else None: what fuse asks of every candidate cut, the fusion built once.
Value b_block_kind(Interpreter& in, CallArgs& a, SourceLoc loc) {
  ir::Stmt f = fusion_arg(in, a, loc, "block_kind");
  if (f.outputs.empty() || !ir::runs_fused(f)) return Value();
  return group_kind_value(ir::plan_group(f).kind);
}

// name -> index of the top-level statement that defines it.
Value b_producers(Interpreter& in, CallArgs& a, SourceLoc loc) {
  auto t = want_trace(in, a.pos.at(0), "producers", loc);
  auto* d = new DictObj();
  Value out(d);
  for (size_t i = 0; i < t->stmts.size(); ++i)
    for (const auto& p : t->stmts[i].outputs) d->set(str_value(p->name), Value::integer(static_cast<int64_t>(i)));
  return out;
}

// name -> list of indices of the top-level statements that read it.
Value b_consumers(Interpreter& in, CallArgs& a, SourceLoc loc) {
  auto t = want_trace(in, a.pos.at(0), "consumers", loc);
  std::unordered_map<std::string, std::vector<int64_t>> uses;
  for (size_t i = 0; i < t->stmts.size(); ++i) {
    std::unordered_set<std::string> seen;
    auto use = [&](const ir::ProxyPtr& p) {
      if (seen.insert(p->name).second) uses[p->name].push_back(static_cast<int64_t>(i));
    };
    for (const ir::Arg& x : t->stmts[i].args) ir::for_each_proxy(x, use);
    for (const auto& kv : t->stmts[i].kwargs) ir::for_each_proxy(kv.second, use);
  }
  auto* d = new DictObj();
  Value out(d);
  for (auto& [k, v] : uses) {
    std::vector<Value> xs;
    for (int64_t i : v) xs.push_back(Value::integer(i));
    d->set(str_value(k), make<ListObj>(std::move(xs)));
  }
  return out;
}

// liveness(t): (inputs never read, per statement the values whose last use it is, in the order
// the statement reads them, followed by its outputs that are never read).
Value b_liveness(Interpreter& in, CallArgs& a, SourceLoc loc) {
  auto t = want_trace(in, a.pos.at(0), "liveness", loc);
  std::unordered_map<const ir::Proxy*, size_t> last;
  size_t n = t->stmts.size();
  auto reads = [](const ir::Stmt& s, const std::function<void(const ir::ProxyPtr&)>& f) {
    for (const ir::Arg& x : s.args) ir::for_each_proxy(x, f);
    for (const auto& kv : s.kwargs) ir::for_each_proxy(kv.second, f);
  };
  for (size_t i = 0; i < n; ++i)
    if (t->stmts[i].kind != ir::StmtKind::Del) reads(t->stmts[i], [&](const ir::ProxyPtr& p) { last[p.get()] = i; });
  ir::for_each_proxy(t->output, [&](const ir::ProxyPtr& p) { last[p.get()] = n; });
  std::vector<Value> unused, per_stmt;
  for (const auto& p : t->inputs)
    if (!last.count(p.get())) unused.push_back(make<ProxyObj>(p));
  for (size_t i = 0; i < n; ++i) {
    std::vector<Value> dying;
    std::unordered_set<const ir::Proxy*> seen;
    const ir::Stmt& s = t->stmts[i];
    if (s.kind != ir::StmtKind::Del) {
      reads(s, [&](const ir::ProxyPtr& p) {
        if (last[p.get()] == i && seen.insert(p.get()).second) dying.push_back(make<ProxyObj>(p));
      });
      for (const auto& p : s.outputs)
        if (!last.count(p.get()) && seen.insert(p.get()).second) dying.push_back(make<ProxyObj>(p));
    }
    per_stmt.push_back(make<ListObj>(std::move(dying)));
  }
  return make<TupleObj>(std::vector<Value>{make<ListObj>(std::move(unused)), make<ListObj>(std::move(per_stmt))});
}

Value b_rename(Interpreter& in, CallArgs& a, SourceLoc loc) {
  if (a.pos.size() != 3 || !a.pos[1].is(VT::Proxy) || !a.pos[2].is(VT::Str))
    in.fail(loc, "rename(t, proxy, name) takes a trace, a proxy and a name");
  auto t = want_trace(in, a.pos[0], "rename", loc);
  const ir::ProxyPtr& p = a.pos[1].as<ProxyObj>()->p;
  const std::string& n = a.pos[2].as<StrObj>()->s;
  if (t->names.count(n)) return Value::boolean(false);
  t->names.erase(p->name);  // its old name is free again (ddp names a gradient's average so)
  t->names.insert(n);
  p->name = n;
  p->auto_named = false;
  return Value::boolean(true);
}

Value b_region_of(Interpreter& in, CallArgs& a, SourceLoc loc) {
  if (a.pos.size() != 1 || !a.pos[0].is(VT::Stmt)) in.fail(loc, "region_of(stmt) takes a statement");
  const ir::Stmt& s = *a.pos[0].as<StmtObj>()->stmt;
  return make<RegionObj>(s.region, s.region.empty() ? -1 : s.region_id);
}

Value b_run_pass(Interpreter& in, CallArgs& a, SourceLoc loc) {
  if (a.pos.size() != 2 || !a.pos[0].is(VT::Str)) in.fail(loc, "run_pass(name, traces) takes a pass name and a list of traces");
  const Value* fn = in.find_pass(a.pos[0].as<StrObj>()->s);
  if (!fn) in.fail(loc, "run_pass(): no pass named '" + a.pos[0].as<StrObj>()->s + "'");
  CallArgs c;
  c.pos.push_back(a.pos[1]);
  return in.call(*fn, std::move(c), loc);
}

// min_cut(n, edges, source, sink): edges are (from, to, capacity) triples; returns a list of
// bools, True for the nodes on the source side of a minimum cut.
Value b_min_cut(Interpreter& in, CallArgs& a, SourceLoc loc) {
  if (a.pos.size() != 4 || !a.pos[0].is(VT::Int) || !a.pos[2].is(VT::Int) || !a.pos[3].is(VT::Int))
    in.fail(loc, "min_cut(n, edges, source, sink) takes a node count, a list of (from, to, capacity), and two nodes");
  int64_t n = a.pos[0].as_int();
  auto node = [&](const Value& v) {
    if (!v.is(VT::Int) || v.as_int() < 0 || v.as_int() >= n) in.fail(loc, "min_cut(): node " + repr(v) + " out of range");
    return static_cast<int>(v.as_int());
  };
  std::vector<std::tuple<int, int, int64_t>> edges;
  for (const Value& e : in.iterate(a.pos[1], loc)) {
    std::vector<Value> t = in.iterate(e, loc);
    if (t.size() != 3 || !t[2].is(VT::Int) || t[2].as_int() < 0) in.fail(loc, "min_cut(): an edge is (from, to, capacity >= 0)");
    edges.emplace_back(node(t[0]), node(t[1]), t[2].as_int());
  }
  std::vector<bool> side = min_cut_source_side(static_cast<int>(n), edges, node(a.pos[2]), node(a.pos[3]), nullptr);
  std::vector<Value> out;
  for (bool b : side) out.push_back(Value::boolean(b));
  return make<ListObj>(std::move(out));
}

// emit_fusion(name, stmts, outputs): records one fusion statement NAME whose subsymbols are
// copies of stmts; its arguments are the proxies the statements read but do not define.
Value b_emit_fusion(Interpreter& in, CallArgs& a, SourceLoc loc) {
  if (a.pos.size() != 3 || !a.pos[0].is(VT::Str))
    in.fail(loc, "emit_fusion(name, stmts, outputs) takes a name, a list of statements and a list of proxies");
  if (!in.recording_trace()) in.fail(loc, "emit_fusion() outside of 'with recording(t):'");
  ir::Stmt f;
  f.kind = ir::StmtKind::Fusion;
  f.callee = a.pos[0].as<StrObj>()->s;
  f.outputs_as_list = true;
  std::unordered_set<const ir::Proxy*> defined;
  for (const Value& v : in.iterate(a.pos[1], loc)) {
    if (!v.is(VT::Stmt)) in.fail(loc, "emit_fusion(): stmts must be statements");
    const ir::Stmt& s = *v.as<StmtObj>()->stmt;
    for (const auto& p : s.outputs) defined.insert(p.get());
    // The fusion stands where its last statement stood (earlier ones may be recomputed copies).
    f.loc = s.loc;
    f.region = s.region;
    f.region_id = s.region_id;
    ir::Stmt c = s;
    c.region.clear();
    c.region_id = 0;
    if (f.source.empty()) f.source = c.source;  // the first member's source comment heads the fusion
    c.source.clear();
    f.subsymbols.push_back(std::move(c));
  }
  f.args = ir::fusion_inputs(f.subsymbols);
  for (const Value& v : in.iterate(a.pos[2], loc)) {
    if (!v.is(VT::Proxy) || !defined.count(v.as<ProxyObj>()->p.get()))
      in.fail(loc, "emit_fusion(): outputs must be proxies the statements define");
    f.outputs.push_back(v.as<ProxyObj>()->p);
  }
  if (f.subsymbols.empty() || f.outputs.empty()) in.fail(loc, "emit_fusion(): nothing to fuse");
  register_names(*in.recording_trace(), f);
  std::string region = f.region;
  int region_id = f.region_id;
  in.record(std::move(f));
  (void)region;
  (void)region_id;
  return Value();
}

const BuiltinDef kTraceBuiltins[] = {
    {"emit_fusion", b_emit_fusion,
     "emit_fusion(name, stmts, outputs): records one fusion statement (printed [outputs] = NAME(inputs)) whose "
     "subsymbols are the statements."},
    {"min_cut", b_min_cut,
     "min_cut(n, edges, source, sink): for edges (from, to, capacity), which nodes lie on the source side of a "
     "minimum cut (Boost.Graph push-relabel)."},
    {"run_pass", b_run_pass, "run_pass(name, traces): runs another pass from inside a pass."},
    {"region_of", b_region_of,
     "region_of(stmt): with region_of(s): records the block's ops in s's region (or in none, as s)."},
    {"new_trace", b_new_trace, "new_trace(name, like=None): an empty trace; new names avoid those of like (a trace or a list)."},
    {"recording", b_recording, "recording(t): with recording(t): records the ops called in the block into t."},
    {"emit", b_emit,
     "emit(stmt, subst=None, prefix=None): records a copy of stmt, arguments replaced by subst (a dict "
     "proxy -> value); with prefix, outputs are new proxies named prefix + name, added to subst."},
    {"copy_stmt", b_copy_stmt,
     "copy_stmt(stmt, subst=None, prefix=None): a copy of stmt as emit would record it, returned instead (for "
     "emit_fusion)."},
    {"emit_del", b_emit_del, "emit_del(proxies, like=None): records 'del' of the proxies (in like's region)."},
    {"flatten", b_flatten,
     "flatten(t, keep=[]): t with every composite and fusion replaced by its primitives, except the callees in keep."},
    {"free_proxies", b_free_proxies, "free_proxies(t): proxies t uses but does not define, in order of first use."},
    {"liveness", b_liveness,
     "liveness(t): (inputs never read, for each statement the values whose last use it is, then its unread "
     "outputs)."},
    {"last_uses", b_last_uses, "last_uses(t): dict name -> index of the last statement reading it."},
    {"runs_fused", b_runs_fused,
     "runs_fused(stmts, outputs): whether their fusion would run block by block on the CPU (only inputs and "
     "outputs at full size)."},
    {"group_kind", b_group_kind,
     "group_kind(stmts, outputs): how their fusion runs as one kernel: 'elementwise', 'rows', 'columns', 'rows_columns' or None "
     "(docs/codegen.md, Groups)."},
    {"block_kind", b_block_kind,
     "block_kind(stmts, outputs): group_kind(stmts, outputs) where runs_fused(stmts, outputs) too, else None (the "
     "fusion runs whole on the CPU and the GPU)."},
    {"memory_estimate", b_memory_estimate,
     "memory_estimate(traces, starts=False): (peak bytes, per trace the live bytes after each statement), as tracer mem "
     "estimates them (dels included); starts=True adds the live bytes as each trace starts."},
    {"producers", b_producers, "producers(t): dict name -> index of the statement defining it."},
    {"consumers", b_consumers, "consumers(t): dict name -> indices of the statements reading it."},
    {"rename", b_rename, "rename(t, proxy, name): gives proxy a free name (its old one becomes free); returns whether it did."},
};

}  // namespace

const BuiltinDef* trace_method(const std::string& name) {
  for (const BuiltinDef& d : kTraceMethods)
    if (name == d.name) return &d;
  return nullptr;
}

std::vector<const BuiltinDef*> trace_builtins() {
  std::vector<const BuiltinDef*> out;
  for (const BuiltinDef& d : kTraceBuiltins) out.push_back(&d);
  return out;
}

}  // namespace tracer::interp
