// Where scripts meet the Trace IR: primitive calls run eagerly on tensors or are recorded on
// proxies; composite calls record their decomposition (tracing a function: interpreter/tracing.cpp).
#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "interpreter/collections.h"
#include "interpreter/interp.h"
#include "ir/fusion.h"

namespace tracer::interp {

using K = ir::Arg::Kind;

bool to_arg(const Value& v, ir::Arg* out) {
  switch (v.type()) {
    case VT::None: *out = ir::Arg::none(); return true;
    case VT::Bool: *out = ir::Arg::of_bool(v.as_bool()); return true;
    case VT::Int: *out = ir::Arg::of_int(v.as_int()); return true;
    case VT::Float: *out = ir::Arg::of_float(v.as_float()); return true;
    case VT::Str: *out = ir::Arg::of_str(v.as<StrObj>()->s); return true;
    case VT::DType: *out = ir::Arg::of_dtype(v.as_dtype()); return true;
    case VT::Tensor: *out = ir::Arg::of_tensor(v.as<TensorObj>()->host()); return true;
    case VT::Proxy: *out = ir::Arg::of_proxy(v.as<ProxyObj>()->p); return true;
    case VT::List:
    case VT::Tuple: {
      const auto& items = v.is(VT::List) ? v.as<ListObj>()->items : v.as<TupleObj>()->items;
      std::vector<ir::Arg> xs(items.size());
      for (size_t i = 0; i < items.size(); ++i)
        if (!to_arg(items[i], &xs[i])) return false;
      *out = ir::Arg::of_seq(v.is(VT::List) ? K::List : K::Tuple, std::move(xs));
      return true;
    }
    case VT::Dict: {
      ir::Arg d;
      d.kind = K::Dict;
      for (auto& [k, x] : v.as<DictObj>()->items()) {
        if (!k.is(VT::Str)) return false;
        ir::Arg item;
        if (!to_arg(x, &item)) return false;
        d.keys.push_back(k.as<StrObj>()->s);
        d.items.push_back(std::move(item));
      }
      *out = std::move(d);
      return true;
    }
    case VT::Namespace: {
      // A DTensor (stdlib/thunder.trace) is its local tensor.
      const auto* n = v.as<NamespaceObj>();
      auto local = n->members.find("_local_tensor");
      if (n->name != "DTensor" || local == n->members.end()) return false;
      return to_arg(local->second, out);
    }
    default: return false;
  }
}

Value from_arg(const ir::Arg& a) {
  switch (a.kind) {
    case K::None: return Value();
    case K::Bool: return Value::boolean(a.b);
    case K::Int: return Value::integer(a.i);
    case K::Float: return Value::number(a.f);
    case K::Str: return str_value(a.s);
    case K::DType: return Value::dtype(a.dtype);
    case K::Proxy: return make<ProxyObj>(a.proxy);
    case K::Tensor: return make<TensorObj>(a.tensor);
    case K::Tuple:
    case K::List: {
      std::vector<Value> xs;
      for (const auto& x : a.items) xs.push_back(from_arg(x));
      return a.kind == K::List ? make<ListObj>(std::move(xs)) : make<TupleObj>(std::move(xs));
    }
    case K::Dict: {
      auto* d = new DictObj();
      Value v(d);
      for (size_t i = 0; i < a.items.size(); ++i) d->set(str_value(a.keys[i]), from_arg(a.items[i]));
      return v;
    }
  }
  return Value();
}

static void scan(const ir::Arg& a, bool* proxy, bool* tensor, bool* donated = nullptr) {
  if (a.kind == K::Proxy) *proxy = true;
  if (a.kind == K::Tensor) *tensor = true;
  if (a.kind == K::Tensor && !a.tensor.defined() && donated) *donated = true;
  for (const auto& x : a.items) scan(x, proxy, tensor, donated);
}

static Value outputs_value(std::vector<Value> outs) {
  if (outs.size() == 1) return std::move(outs[0]);
  return make<TupleObj>(std::move(outs));
}

Value Interpreter::call_op(const ir::OpDecl& op, CallArgs args, SourceLoc loc) {
  tick(loc);
  const std::string callee = op.ns + "." + op.name;
  std::vector<ir::Arg> pos(args.pos.size());
  for (size_t i = 0; i < args.pos.size(); ++i)
    if (!to_arg(args.pos[i], &pos[i]))
      fail(loc, "bad argument #" + std::to_string(i + 1) + " to '" + callee + "' (" + type_name(args.pos[i].type()) +
                    " is not a tensor, number, string, dtype or sequence of them)");
  std::vector<std::pair<std::string, ir::Arg>> kw(args.kw.size());
  for (size_t i = 0; i < args.kw.size(); ++i) {
    kw[i].first = args.kw[i].first;
    if (!to_arg(args.kw[i].second, &kw[i].second))
      fail(loc, "bad argument '" + args.kw[i].first + "' to '" + callee + "' (" + type_name(args.kw[i].second.type()) + ")");
  }
  std::vector<ir::Arg> bound;
  std::vector<ir::TensorType> types;
  try {
    bound = ir::bind_args(op, std::move(pos), std::move(kw));
    types = ir::infer(op, bound);
  } catch (const ir::OpError& e) {
    fail(loc, std::string(e.what()).rfind(op.name, 0) == 0 ? op.ns + "." + e.what() : callee + ": " + e.what());
  }
  bool has_proxy = false, has_tensor = false, donated = false;
  for (const auto& a : bound) scan(a, &has_proxy, &has_tensor, &donated);
  if (donated)
    fail(loc, "'" + callee + "' got a tensor that was donated to a compiled call (donate_argnums) and holds no value "
                             "any more; use what that call returned");
  if (tracing()) {
    if (has_tensor && rec_.capture) {
      // A compiled function's closure over a concrete tensor: an input of its trace.
      std::function<void(ir::Arg&)> lift = [&](ir::Arg& a) {
        if (a.kind == K::Tensor) a = ir::Arg::of_proxy(rec_.capture(a.tensor));
        for (auto& x : a.items) lift(x);
      };
      for (auto& a : bound) lift(a);
      has_tensor = false;
      has_proxy = true;
    }
    if (has_tensor)
      fail(loc, "'" + callee + "' got a concrete tensor inside a traced function; pass it as an input instead");
    ir::Stmt st;
    st.kind = ir::StmtKind::Prim;
    st.op = &op;
    st.callee = callee;
    st.args = std::move(bound);
    st.loc = loc;
    st.region = rec_.region;
    st.region_id = rec_.region_id;
    std::vector<Value> outs;
    for (auto& t : types) {
      st.outputs.push_back(rec_.trace->new_proxy(std::move(t)));
      outs.push_back(make<ProxyObj>(st.outputs.back()));
    }
    note_view(st);
    push_stmt(std::move(st));
    return outputs_value(std::move(outs));
  }
  if (has_proxy) fail(loc, "'" + callee + "' got a traced value (proxy) outside of tracing");
  std::vector<rt::Tensor> res;
  try {
    res = op.cpu(bound, exec_);
  } catch (const std::exception& e) {
    // A kernel's message that names its op already ("take: index 7 ...") is not prefixed twice.
    std::string m = e.what();
    fail(loc, m.rfind(op.name + ":", 0) == 0 ? op.ns + "." + m : callee + ": " + m);
  }
  std::vector<Value> outs;
  for (auto& t : res) outs.push_back(make<TensorObj>(std::move(t)));
  return outputs_value(std::move(outs));
}

// A view prim's output remembers the tensor it views and how (ir::ViewStep): Thunder's in-place
// ops write through views, and prims.copy_ and prims.update_aliases (stdlib/thunder.trace) carry
// a write to every alias of the tensor written (builtins _alias_path, _alias_written,
// _alias_update).
void Interpreter::note_view(const ir::Stmt& st) {
  const std::string& n = st.op->name;
  if (st.outputs.size() != 1 || st.args.empty() || st.args[0].kind != K::Proxy) return;
  if (n != "reshape" && n != "transpose" && n != "slice" && n != "broadcast_in_dim") return;
  auto step = std::make_shared<ir::ViewStep>();
  step->source = st.args[0].proxy;
  step->op = st.op;
  step->args.assign(st.args.begin() + 1, st.args.end());
  const ir::ProxyPtr& root = ir::view_root(step->source);
  step->seen = root->storage ? root->storage->writes : 0;
  st.outputs[0]->view = std::move(step);
}

Value Interpreter::call_ltorch(const std::string& name, CallArgs args, SourceLoc loc) {
  const Value* f = ltorch_.as<NamespaceObj>()->lookup(name);
  if (!f) fail(loc, "no op named '" + name + "'");
  return call(*f, std::move(args), loc);
}

// Proxies produced inside the composite (its outputs must be among them to record it).
static void collect_defined(const std::vector<ir::Stmt>& stmts, std::vector<const ir::Proxy*>& out) {
  for (const auto& s : stmts) {
    for (const auto& p : s.outputs) out.push_back(p.get());
    collect_defined(s.subsymbols, out);
  }
}

std::vector<ir::ProxyPtr> hidden_alias_values(const std::vector<ir::Stmt>& body, const std::vector<ir::ProxyPtr>& outputs) {
  std::vector<ir::ProxyPtr> out;
  std::function<void(const std::vector<ir::Stmt>&)> walk = [&](const std::vector<ir::Stmt>& stmts) {
    for (const ir::Stmt& s : stmts) {
      for (const ir::ProxyPtr& p : s.outputs) {
        if (!p->view || p->view->op) continue;  // a written tensor's value is the same elements as its root
        const ir::ProxyPtr& root = ir::view_root(p);
        if (!root->storage || root->storage->current.lock() != p) continue;
        if (std::find(outputs.begin(), outputs.end(), p) == outputs.end() && std::find(out.begin(), out.end(), p) == out.end())
          out.push_back(p);
      }
      walk(s.subsymbols);
    }
  };
  walk(body);
  return out;
}

Value Interpreter::call_composite(const FunctionObj& f, CallArgs& args, SourceLoc loc) {
  ir::Stmt st;
  st.kind = ir::StmtKind::Composite;
  st.callee = f.qualname;
  st.loc = loc;
  st.region = rec_.region;
  st.region_id = rec_.region_id;
  bool printable = true;
  for (const Value& v : args.pos) {
    ir::Arg a;
    printable = printable && to_arg(v, &a);
    st.args.push_back(std::move(a));
  }
  for (const auto& [k, v] : args.kw) {
    ir::Arg a;
    printable = printable && to_arg(v, &a);
    st.kwargs.emplace_back(k, std::move(a));
  }
  std::vector<ir::Stmt> body;
  rec_.scopes.push_back(&body);
  Value result;
  try {
    result = call_function(f, args, loc);
  } catch (...) {
    rec_.scopes.pop_back();
    throw;
  }
  rec_.scopes.pop_back();
  // Every statement recorded inside knows this call (passes that flatten composites keep it).
  std::vector<ir::Stmt*> todo;
  for (auto& s : body) todo.push_back(&s);
  while (!todo.empty()) {
    ir::Stmt* s = todo.back();
    todo.pop_back();
    s->inlined_at.emplace_back(loc, f.qualname);
    for (auto& sub : s->subsymbols) todo.push_back(&sub);
  }
  std::vector<const ir::Proxy*> defined;
  collect_defined(body, defined);
  auto produced = [&](const Value& v) {
    return v.is(VT::Proxy) && std::find(defined.begin(), defined.end(), v.as<ProxyObj>()->p.get()) != defined.end();
  };
  if (produced(result)) {
    st.outputs.push_back(result.as<ProxyObj>()->p);
  } else if (result.is(VT::Tuple) && !result.as<TupleObj>()->items.empty()) {
    for (const Value& x : result.as<TupleObj>()->items) {
      if (!produced(x)) {
        printable = false;
        break;
      }
      st.outputs.push_back(x.as<ProxyObj>()->p);
    }
  } else {
    printable = false;
  }
  // Outputs must be distinct, or the statement could not be printed as one assignment.
  for (size_t i = 0; printable && i < st.outputs.size(); ++i)
    for (size_t j = 0; j < i; ++j) printable = printable && st.outputs[i] != st.outputs[j];
  // A write through a view inside leaves its tensor's new value in there, where a later
  // prims.update_aliases reads it: the statements stand in the trace as they are.
  if (printable && !hidden_alias_values(body, st.outputs).empty()) printable = false;
  if (!printable || body.empty()) {
    for (auto& s : body) push_stmt(std::move(s));
    return result;
  }
  st.subsymbols = std::move(body);
  push_stmt(std::move(st));
  return result;
}

Value Interpreter::make_region(const std::string& name) { return make<RegionObj>(name); }

void Interpreter::set_grad_enabled(bool enabled, SourceLoc loc) {
  if (!tracing()) return;
  if (enabled) {
    if (rec_.grad_off) {
      rec_.region.clear();
      rec_.region_id = 0;
      rec_.grad_off = false;
    }
    return;
  }
  if (rec_.region == "no_grad") return;
  if (!rec_.region.empty()) fail(loc, "set_grad_enabled(False) inside a '" + rec_.region + "' region (regions do not nest)");
  rec_.region = "no_grad";
  rec_.region_id = ++rec_.region_count;
  rec_.grad_off = true;
}

void Interpreter::record(ir::Stmt s) {
  if (s.region.empty()) {
    s.region = rec_.region;
    s.region_id = rec_.region_id;
  }
  push_stmt(std::move(s));
}

void Interpreter::push_stmt(ir::Stmt st) {
  if (!rec_.source.empty() && rec_.scopes.size() == 1 && st.kind != ir::StmtKind::Del) {
    st.source = std::move(rec_.source);
    rec_.source.clear();
  }
  rec_.scopes.back()->push_back(std::move(st));
  if (rec_.scopes.size() == 1 && !rec_.pending_dels.empty()) {
    ir::Stmt d;
    d.kind = ir::StmtKind::Del;
    d.deleted = std::move(rec_.pending_dels);
    rec_.pending_dels.clear();
    d.region = rec_.region;
    d.region_id = rec_.region_id;
    rec_.scopes.back()->push_back(std::move(d));
  }
}

// ---------------------------------------------------------------- tensor indexing

static int64_t rank_of(const Value& t) {
  return t.is(VT::Tensor) ? static_cast<int64_t>(t.as<TensorObj>()->shape().size()) : static_cast<int64_t>(t.as<ProxyObj>()->p->type.shape.size());
}

static rt::Shape shape_of(const Value& t) {
  return t.is(VT::Tensor) ? t.as<TensorObj>()->shape() : t.as<ProxyObj>()->p->type.shape;
}

static Value int_tuple(const std::vector<int64_t>& xs) {
  std::vector<Value> v;
  for (int64_t x : xs) v.push_back(Value::integer(x));
  return make<TupleObj>(std::move(v));
}

Value tensor_subscript(Interpreter& in, const Value& t, const Value& index, SourceLoc loc) {
  std::vector<Value> idx = index.is(VT::Tuple) ? index.as<TupleObj>()->items : std::vector<Value>{index};
  rt::Shape shape = shape_of(t);
  int64_t used = 0;
  for (const Value& v : idx)
    if (!v.is_none() && !v.is(VT::Ellipsis)) ++used;
  if (used > rank_of(t)) in.fail(loc, "too many indices for a tensor of rank " + std::to_string(rank_of(t)));
  std::vector<int64_t> start, stop, step, out_shape;
  size_t dim = 0;
  bool sliced = false;
  for (const Value& v : idx) {
    if (v.is(VT::Ellipsis)) {
      int64_t fill = rank_of(t) - used - static_cast<int64_t>(dim);
      for (int64_t k = 0; k < fill; ++k, ++dim) {
        start.push_back(0);
        stop.push_back(shape[dim]);
        step.push_back(1);
        out_shape.push_back(shape[dim]);
      }
      used = rank_of(t) - static_cast<int64_t>(dim);
      continue;
    }
    if (v.is_none()) {
      out_shape.push_back(1);
      continue;
    }
    --used;
    int64_t n = shape[dim];
    if (v.is(VT::Int)) {
      int64_t i = v.as_int() < 0 ? v.as_int() + n : v.as_int();
      if (i < 0 || i >= n) in.fail(loc, "index " + std::to_string(v.as_int()) + " is out of bounds for dimension " +
                                            std::to_string(dim) + " with size " + std::to_string(n));
      start.push_back(i);
      stop.push_back(i + 1);
      step.push_back(1);
      sliced = true;
    } else if (v.is(VT::Slice)) {
      auto* s = v.as<SliceObj>();
      auto get = [&](const Value& x, int64_t d) {
        if (x.is_none()) return d;
        if (!x.is(VT::Int)) in.fail(loc, "tensor slice bounds must be integers");
        int64_t i = x.as_int() < 0 ? x.as_int() + n : x.as_int();
        return std::max<int64_t>(0, std::min<int64_t>(i, n));
      };
      int64_t st = s->step.is_none() ? 1 : s->step.is(VT::Int) ? s->step.as_int() : 0;
      if (st <= 0) in.fail(loc, "tensor slices need a positive step");
      int64_t a = get(s->lower, 0), b = std::max(a, get(s->upper, n));
      start.push_back(a);
      stop.push_back(b);
      step.push_back(st);
      out_shape.push_back(b > a ? (b - a - 1) / st + 1 : 0);  // no overflow for steps near 2^63
      sliced = sliced || a != 0 || b != n || st != 1;
    } else {
      in.fail(loc, std::string("tensors are indexed by ints, slices, None and ..., not ") + type_name(v.type()) +
                       " (use take() to gather rows)");
    }
    ++dim;
  }
  for (; dim < shape.size(); ++dim) {
    start.push_back(0);
    stop.push_back(shape[dim]);
    step.push_back(1);
    out_shape.push_back(shape[dim]);
  }
  Value r = t;
  if (sliced) {
    CallArgs a;
    a.pos = {t, int_tuple(start), int_tuple(stop), int_tuple(step)};
    r = in.call_op(*ir::find_op("slice"), std::move(a), loc);
  }
  if (out_shape != shape_of(r)) {
    CallArgs a;
    a.pos = {r, int_tuple(out_shape)};
    r = in.call_op(*ir::find_op("reshape"), std::move(a), loc);
  }
  return r;
}

}  // namespace tracer::interp
