// Aliases of traced tensors: how Thunder's in-place ops through views run here (the builtins
// prims.copy_ and prims.update_aliases of stdlib/thunder.trace are written over, and the
// interpreter's refresh of a name read after a write into its tensor).
#include <algorithm>
#include <tuple>

#include "interpreter/builtins.h"
#include "interpreter/interp.h"

namespace tracer::interp {

namespace {

// _written_over(t, what): marks the traced tensor t as written over by `what` (prims.copy_): any
// later op reading it is refused. A concrete tensor is never changed in place: an error.
Value b_written_over(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "_written_over", 2, 2, loc);
  const std::string what = a.pos[1].is(VT::Str) ? a.pos[1].as<StrObj>()->s : std::string("an in-place op");
  if (a.pos[0].is(VT::Proxy)) {
    a.pos[0].as<ProxyObj>()->p->written_over = what;
    return Value();
  }
  if (a.pos[0].is(VT::Tensor))
    in.fail(loc, what + " writes into a tensor in place, which tracer's tensors never are (they are values): use the tensor it returns, in a traced function");
  in.fail(loc, "_written_over(t, what) takes a tensor");
  return Value();
}

// Aliases of traced tensors (ir::ViewStep, ir::Storage): how Thunder's in-place ops through
// views run here. prims.copy_ (stdlib/thunder.trace) writes into the root of the view chain of
// the tensor written, by the positions the chain selects, and prims.update_aliases remakes a
// tensor made before such a write from the root's new value.

const ir::ProxyPtr& alias_proxy(Interpreter& in, const Value& v, const char* fn, SourceLoc loc) {
  if (v.is(VT::Tensor))
    in.fail(loc, "an in-place op writes into a tensor: in-place ops run in traced functions (jit, value_and_grad, "
                 "a trace), where tracer follows the tensor's views; outside them tensors are values, never written");
  if (!v.is(VT::Proxy)) in.fail(loc, std::string(fn) + " takes a traced tensor, got " + type_name(v.type()));
  return v.as<ProxyObj>()->p;
}

// The view prims from p's root to p, as [(op, args, shape before, op's name)] for op(x, *args).
Value alias_steps(const ir::ProxyPtr& p) {
  std::vector<Value> steps;
  for (const ir::Proxy* q = p.get(); q->view; q = q->view->source.get()) {
    if (!q->view->op) continue;
    if (q->view->op->name == "reshape" && q->view->source->type.shape == q->type.shape) continue;  // the same elements
    std::vector<Value> args, shape;
    for (const ir::Arg& a : q->view->args) args.push_back(from_arg(a));
    for (int64_t d : q->view->source->type.shape) shape.push_back(Value::integer(d));
    steps.push_back(make<TupleObj>(std::vector<Value>{make<OpObj>(q->view->op), make<TupleObj>(std::move(args)),
                                                      make<TupleObj>(std::move(shape)), str_value(q->view->op->name)}));
  }
  std::reverse(steps.begin(), steps.end());
  return make<ListObj>(std::move(steps));
}

// The root's value now: after its last write, else the root itself.
ir::ProxyPtr alias_current(Interpreter& in, const ir::ProxyPtr& root, SourceLoc loc) {
  if (!root->storage || root->storage->writes == 0) return root;
  ir::ProxyPtr cur = root->storage->current.lock();
  if (!cur) in.fail(loc, "internal error: the value written into " + root->name + " is gone");
  return cur;
}

// _alias_path(t): (the value now of the tensor t views, [(op, args, shape, name)] that make t
// from it).
Value b_alias_path(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "_alias_path", 1, 1, loc);
  const ir::ProxyPtr& p = alias_proxy(in, a.pos[0], "_alias_path", loc);
  ir::ProxyPtr cur = alias_current(in, ir::view_root(p), loc);
  return make<TupleObj>(std::vector<Value>{make<ProxyObj>(cur), alias_steps(p)});
}

// _alias_written(t, v): v is the value of t's root after a write into t (a tensor made for it).
Value b_alias_written(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "_alias_written", 2, 2, loc);
  const ir::ProxyPtr& p = alias_proxy(in, a.pos[0], "_alias_written", loc);
  const ir::ProxyPtr& v = alias_proxy(in, a.pos[1], "_alias_written", loc);
  const ir::ProxyPtr& root = ir::view_root(p);
  if (v->storage || v == root || v->type.shape != root->type.shape || v->type.dtype != root->type.dtype)
    in.fail(loc, "internal error: _alias_written(" + p->name + ", " + v->name + ") takes a new tensor of " + root->name + "'s type");
  if (!root->storage) root->storage = std::make_shared<ir::Storage>();
  ir::Storage& s = *root->storage;
  ++s.writes;
  if (s.current_deleted) {  // the printout deleted the old value's name; this write read it last
    if (ir::ProxyPtr old = s.current.lock()) in.record_del(std::move(old));
    s.current_deleted = false;
  }
  s.current = v;
  auto step = std::make_shared<ir::ViewStep>();
  step->source = root;
  step->seen = s.writes;
  v->view = std::move(step);
  return Value();
}

// _alias_update(aliases): for each tensor of the group, None where it holds its root's value
// now, else (the root's value now, [(op, args)] that make it from that). The group is one
// tensor's aliases (Thunder's update_aliases): their chains must meet at one root wherever
// any was written, or the write could not reach them.
Value b_alias_update(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "_alias_update", 1, 1, loc);
  const Value& g = a.pos[0];
  if (!g.is(VT::Tuple) && !g.is(VT::List)) in.fail(loc, std::string("prims.update_aliases takes a tuple of tensors, got ") + type_name(g.type()));
  const auto& items = g.is(VT::Tuple) ? g.as<TupleObj>()->items : g.as<ListObj>()->items;
  std::vector<Value> out;
  const ir::Proxy* first_root = nullptr;
  std::string first_name;
  bool written = false, apart = false;
  std::string other;
  for (const Value& v : items) {
    if (v.is(VT::Tensor)) {
      out.push_back(Value());
      continue;
    }
    const ir::ProxyPtr& p = alias_proxy(in, v, "prims.update_aliases", loc);
    const ir::ProxyPtr& root = ir::view_root(p);
    written = written || (root->storage && root->storage->writes > 0);
    if (!first_root) {
      first_root = root.get();
      first_name = p->name;
    } else if (root.get() != first_root && !apart) {
      apart = true;
      other = p->name;
    }
    if (!ir::stale_alias(p)) {
      out.push_back(Value());
      continue;
    }
    out.push_back(make<TupleObj>(std::vector<Value>{make<ProxyObj>(alias_current(in, root, loc)), alias_steps(p)}));
  }
  if (apart && written)
    in.fail(loc, "prims.update_aliases: " + first_name + " and " + other + " are aliases of one tensor in Thunder's trace, "
                 "but here neither is made from the other by view ops (reshape, transpose, slice, expand), so a write "
                 "into one cannot reach the other; tracer follows writes through those view ops only");
  return make<ListObj>(std::move(out));
}

}  // namespace

ir::ProxyPtr Interpreter::current_alias(const ir::ProxyPtr& p, SourceLoc loc) {
  if (!ir::stale_alias(p)) return p;
  const ir::ProxyPtr& root = ir::view_root(p);
  const int writes = root->storage->writes;
  auto it = rec_.refreshed.find(p.get());
  if (it != rec_.refreshed.end() && std::get<1>(it->second) == writes) return std::get<2>(it->second);
  // a tensor the root's value is (the root, a value written into it) or a same-shape reshape of one
  bool same = true;
  for (const ir::Proxy* q = p.get(); q->view && same; q = q->view->source.get())
    same = !q->view->op || (q->view->op->name == "reshape" && q->view->source->type.shape == q->type.shape);
  ir::ProxyPtr now;
  if (same) {
    now = alias_current(*this, root, loc);
  } else {
    // the view made again from the root's value now: prims.update_aliases((p,)), recorded
    const Value* prims = builtins().lookup("prims");
    const Value* update = prims ? prims->as<NamespaceObj>()->lookup("update_aliases") : nullptr;
    if (!update) fail(loc, "internal error: prims.update_aliases is not installed");
    Value r = call(*update, CallArgs{{make<TupleObj>(std::vector<Value>{make<ProxyObj>(p)})}, {}}, loc);
    if (!r.is(VT::Tuple) || r.as<TupleObj>()->items.size() != 1 || !r.as<TupleObj>()->items[0].is(VT::Proxy))
      fail(loc, "internal error: prims.update_aliases returned no tensor for " + p->name);
    now = r.as<TupleObj>()->items[0].as<ProxyObj>()->p;
  }
  rec_.refreshed[p.get()] = std::make_tuple(p, writes, now);
  return now;
}

Value Interpreter::fresh_value(const Value& v, SourceLoc loc) {
  const ir::ProxyPtr& p = v.as<ProxyObj>()->p;
  ir::ProxyPtr now = current_alias(p, loc);
  return now == p ? v : make<ProxyObj>(std::move(now));
}

const BuiltinDef kAliasBuiltins[] = {
    {"_alias_path", b_alias_path, "_alias_path(t): (the value now of the tensor t is a view of, [(op, args)] that make t from it)."},
    {"_alias_written", b_alias_written, "_alias_written(t, v): v is the value of t's root after a write into t."},
    {"_alias_update", b_alias_update, "_alias_update(aliases): per tensor, None if it is current, else (its root's value now, the view steps to it)."},
    {"_written_over", b_written_over, "_written_over(t, what): marks traced tensor t as written over by what (prims.copy_): later reads are refused."},
};

std::vector<const BuiltinDef*> alias_builtin_defs() {
  std::vector<const BuiltinDef*> out;
  for (const BuiltinDef& d : kAliasBuiltins) out.push_back(&d);
  return out;
}

}  // namespace tracer::interp
