// Expressions, calls and argument binding, closures, and the statements that build values
// (with, import, fusion definitions from Thunder printouts).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>

#include "interpreter/builtins.h"
#include "interpreter/compiled.h"
#include "interpreter/interp.h"

namespace tracer::interp {

using ast::Expr;
using ast::ExprKind;
using ast::Stmt;

Value Interpreter::load_name(const Expr& e, Frame& fr) {
  switch (static_cast<NameScope>(e.depth)) {
    case NameScope::Local: {
      Value& v = fr.slots[e.slot];
      if (v.is(VT::Unbound)) fail(e.loc, "local variable '" + e.name + "' referenced before assignment");
      refresh(v, fr, e.loc);
      return v;
    }
    case NameScope::Cell:
    case NameScope::Free: {
      const Value& cell = static_cast<NameScope>(e.depth) == NameScope::Cell ? fr.slots[e.slot] : fr.fn->closure[e.slot];
      Value& v = cell.as<CellObj>()->v;
      if (v.is(VT::Unbound)) fail(e.loc, "free variable '" + e.name + "' referenced before assignment");
      refresh(v, fr, e.loc);
      return v;
    }
    case NameScope::Global: {
      Module& m = *fr.module;
      if (e.global_module == &m && e.global_version == m.globals_version)
        return *static_cast<const Value*>(e.global_value);
      const Value* v = nullptr;
      auto it = m.globals.find(e.name);
      if (it != m.globals.end()) v = &it->second;
      else v = builtins().lookup(e.name);
      if (!v) v = thunder_object(e.name, m);
      if (!v) fail(e.loc, "name '" + e.name + "' is not defined");
      e.global_module = &m;
      e.global_version = m.globals_version;
      e.global_value = v;
      return *v;
    }
  }
  fail(e.loc, "internal error: unresolved name '" + e.name + "'");
}

bool Interpreter::name_defined(const Expr& e, Frame& fr) {
  if (e.kind == ExprKind::Attribute) {  // a.b.c: a defined, and each attribute there
    if (!name_defined(*e.items[0], fr)) return false;
    try {
      get_attr(eval(*e.items[0], fr), e.name, e.loc);
      return true;
    } catch (const ScriptError&) {
      return false;
    }
  }
  if (e.kind != ExprKind::Name) return false;
  switch (static_cast<NameScope>(e.depth)) {
    case NameScope::Local: return !fr.slots[e.slot].is(VT::Unbound);
    case NameScope::Cell:
    case NameScope::Free: {
      const Value& cell = static_cast<NameScope>(e.depth) == NameScope::Cell ? fr.slots[e.slot] : fr.fn->closure[e.slot];
      return !cell.as<CellObj>()->v.is(VT::Unbound);
    }
    case NameScope::Global: {
      Module& m = *fr.module;
      return m.globals.count(e.name) || builtins().lookup(e.name) || thunder_object(e.name, m);
    }
  }
  return false;
}

Value Interpreter::make_function(const FuncInfo& info, Frame& fr, SourceLoc loc) {
  auto* f = new FunctionObj(&functions_);
  Value fv(f);
  f->info = &info;
  f->module = fr.module->shared_from_this();
  for (const ast::Param& p : *info.params) {
    f->defaults.push_back(p.default_value ? eval(*p.default_value, fr) : Value::unbound());
    f->annotations.push_back(p.annotation ? eval(*p.annotation, fr) : Value());
  }
  for (const auto& [is_free, idx] : info.free_sources) f->closure.push_back(is_free ? fr.fn->closure[idx] : fr.slots[idx]);
  if (fr.module->composites && info.body && !info.name.empty() && info.name[0] != '_' && fr.info == &fr.module->top) {
    f->composite = true;
    f->qualname = fr.module->name + "." + info.name;
  }
  (void)loc;
  return fv;
}

void Interpreter::bind_params(const FunctionObj& f, CallArgs& args, Frame& fr, SourceLoc loc) {
  const auto& params = *f.info->params;
  const std::string& fname = f.info->name;
  size_t npos = 0;  // positional-capable parameters before *args
  int varargs = -1, kwargs = -1;
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].kind == ast::Param::Kind::VarArgs) varargs = static_cast<int>(i);
    else if (params[i].kind == ast::Param::Kind::KwArgs) kwargs = static_cast<int>(i);
    else if (varargs < 0) ++npos;
  }
  std::vector<bool> set(params.size(), false);
  size_t i = 0;
  for (; i < args.pos.size() && i < npos; ++i) {
    fr.slots[f.info->param_slots[i]] = std::move(args.pos[i]);
    set[i] = true;
  }
  if (i < args.pos.size()) {
    if (varargs < 0 || params[varargs].name.empty())
      fail(loc, fname + "() takes " + std::to_string(npos) + " positional argument" + (npos == 1 ? "" : "s") + " but " +
                    std::to_string(args.pos.size()) + " were given");
    fr.slots[f.info->param_slots[varargs]] = make<TupleObj>(std::vector<Value>(args.pos.begin() + i, args.pos.end()));
  } else if (varargs >= 0 && !params[varargs].name.empty()) {
    fr.slots[f.info->param_slots[varargs]] = make<TupleObj>();
  }
  if (varargs >= 0) set[varargs] = true;
  Value extra = kwargs >= 0 ? make<DictObj>() : Value();
  for (auto& [k, v] : args.kw) {
    size_t j = 0;
    while (j < params.size() && !(params[j].name == k && params[j].kind == ast::Param::Kind::Normal)) ++j;
    if (j == params.size()) {
      if (kwargs < 0) fail(loc, fname + "() got an unexpected keyword argument '" + k + "'");
      extra.as<DictObj>()->set(str_value(k), std::move(v));
      continue;
    }
    if (set[j]) fail(loc, fname + "() got multiple values for argument '" + k + "'");
    fr.slots[f.info->param_slots[j]] = std::move(v);
    set[j] = true;
  }
  if (kwargs >= 0) {
    fr.slots[f.info->param_slots[kwargs]] = std::move(extra);
    set[kwargs] = true;
  }
  for (size_t j = 0; j < params.size(); ++j) {
    if (set[j]) continue;
    if (f.defaults[j].is(VT::Unbound)) fail(loc, fname + "() missing required argument '" + params[j].name + "'");
    fr.slots[f.info->param_slots[j]] = f.defaults[j];
  }
}

Value Interpreter::call_function(const FunctionObj& f, CallArgs& args, SourceLoc loc) {
  if (depth_ >= opts_.max_depth) fail(loc, "maximum recursion depth (" + std::to_string(opts_.max_depth) + ") exceeded");
  tick(loc);
  Frame fr;
  fr.info = f.info;
  fr.module = f.module.get();
  fr.fn = &f;
  fr.naming = !f.composite && !f.module->composites && f.module->names_values;
  fr.slots.assign(f.info->nslots, Value::unbound());
  bind_params(f, args, fr, loc);
  // The traced function's frame: where its collections' names live (Recorder::frame).
  struct FrameMark {
    Recorder& r;
    bool set;
    ~FrameMark() {
      if (set) r.frame = nullptr;
    }
  } mark{rec_, rec_.trace && !rec_.frame};
  if (mark.set) rec_.frame = &fr;
  for (int32_t s : f.info->cell_slots) {
    auto* c = new CellObj();
    c->v = std::move(fr.slots[s]);
    fr.slots[s] = Value(c);
  }
  struct DepthGuard {
    int& d;
    explicit DepthGuard(int& x) : d(x) { ++d; }
    ~DepthGuard() { --d; }
  } guard(depth_);
  // TRACER_PROFILE_SCRIPTS=1: calls and inclusive time per script function, printed to stderr
  // when the interpreter ends (to find where a pass written in the language spends its time).
  struct ProfileGuard {
    ScriptProfile* p;
    const FuncInfo* f;
    std::chrono::steady_clock::time_point t0;
    ~ProfileGuard() {
      if (!p) return;
      auto& e = (*p)[f];
      e.first += 1;
      e.second += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
  } prof{profile_.get(), f.info, profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{}};
  try {
    if (f.info->lambda_body) return eval(*f.info->lambda_body, fr);
    exec_block(*f.info->body, fr);
  } catch (ScriptError& e) {
    e.traceback.push_back({f.info->name, loc, ""});
    throw;
  }
  return std::move(fr.ret);
}

Value Interpreter::call(const Value& fn, CallArgs args, SourceLoc loc) {
  HeapScope scope(heap_);
  switch (fn.type()) {
    case VT::Function: {
      const auto& f = *fn.as<FunctionObj>();
      if (f.composite && tracing()) return call_composite(f, args, loc);
      return call_function(f, args, loc);
    }
    case VT::Builtin: {
      const BuiltinObj* b = fn.as<BuiltinObj>();
      return b->native ? b->native->fn(*this, args, loc) : b->def->fn(*this, args, loc);
    }
    case VT::BoundMethod: {
      auto* m = fn.as<BoundMethodObj>();
      args.pos.insert(args.pos.begin(), m->self);
      return call(m->fn, std::move(args), loc);
    }
    case VT::Op: return call_op(*fn.as<OpObj>()->op, std::move(args), loc);
    case VT::Compiled: return call_compiled(*this, *fn.as<CompiledObj>(), std::move(args), loc);
    case VT::DType: {
      if (args.pos.size() != 1 || !args.kw.empty() || !args.pos[0].is_tensorish())
        fail(loc, std::string("calling dtype ") + rt::dtype_name(fn.as_dtype()) + " converts one tensor");
      args.pos.push_back(fn);
      return call_op(*ir::find_op("convert_element_type"), std::move(args), loc);
    }
    case VT::Region:  // @torch.no_grad() on a function: the function
      if (args.pos.size() == 1 && args.kw.empty() && (args.pos[0].is(VT::Function) || args.pos[0].is(VT::Builtin))) return args.pos[0];
      fail(loc, "a '" + fn.as<RegionObj>()->name + "' region decorates a function or opens a with block");
    default: fail(loc, std::string("'") + type_name(fn.type()) + "' object is not callable");
  }
}

Value Interpreter::eval_call(const Expr& e, Frame& fr) {
  CallArgs args;
  args.pos.reserve(e.args.size() + 1);
  Value fn;
  const BuiltinDef* method = nullptr;
  const Expr& callee = *e.items[0];
  if (callee.kind == ExprKind::Attribute) {
    // obj.method(...) on a str, list, tuple or dict calls the builtin directly, self first,
    // without making a bound method.
    Value obj = eval(*callee.items[0], fr);
    if (obj.type() == VT::Str || obj.type() == VT::List || obj.type() == VT::Tuple || obj.type() == VT::Dict) {
      if (callee.method_type != static_cast<int32_t>(obj.type())) {
        callee.method = find_method(obj.type(), callee.name);
        callee.method_type = static_cast<int32_t>(obj.type());
      }
      method = static_cast<const BuiltinDef*>(callee.method);
    }
    if (method) args.pos.push_back(std::move(obj));
    else fn = get_attr(obj, callee.name, callee.loc);
  } else {
    fn = eval(callee, fr);
  }
  // prims.update_aliases((a, b)): the aliases as they are (it brings them up to date itself).
  struct ReadingAliases {
    bool& flag;
    bool was;
    ~ReadingAliases() { flag = was; }
  } reading{reading_aliases_, reading_aliases_};
  reading_aliases_ = fn.is_obj() && !alias_readers_.empty() && alias_readers_.count(fn.obj());
  for (const auto& a : e.args) {
    if (a->kind == ExprKind::Starred) {
      for (Value& x : iterate(eval(*a->items[0], fr), a->loc)) args.pos.push_back(std::move(x));
    } else {
      args.pos.push_back(eval(*a, fr));
    }
  }
  for (const auto& k : e.keywords) {
    Value v = eval(*k.value, fr);
    if (!k.name.empty()) {
      args.kw.emplace_back(k.name, std::move(v));
      continue;
    }
    if (!v.is(VT::Dict)) fail(k.loc, "argument after ** must be a dict");
    for (auto& [key, val] : v.as<DictObj>()->items()) {
      if (!key.is(VT::Str)) fail(k.loc, "keywords must be strings");
      args.kw.emplace_back(key.as<StrObj>()->s, val);
    }
  }
  reading_aliases_ = reading.was;
  if (method) {
    tick(e.loc);
    return method->fn(*this, args, e.loc);
  }
  return call(fn, std::move(args), e.loc);
}

Value Interpreter::eval_list_comp(const Expr& e, Frame& fr) {
  auto* out = new ListObj();
  Value result(out);
  std::function<void(size_t)> level = [&](size_t k) {
    if (k == e.comps.size()) {
      check_size(out->items.size() + 1, sizeof(Value), "a list", e.loc);
      out->items.push_back(eval(*e.items[0], fr));
      return;
    }
    const ast::Comprehension& c = e.comps[k];
    for (Value& x : iterate(eval(*c.iter, fr), c.iter->loc)) {
      tick(c.iter->loc);
      assign(*c.target, std::move(x), fr, false);
      bool ok = true;
      for (const auto& cond : c.conds) ok = ok && truth(eval(*cond, fr), cond->loc);
      if (ok) level(k + 1);
    }
  };
  level(0);
  return result;
}

static Value unary(Interpreter& in, ast::Op op, const Value& v, SourceLoc loc) {
  const char* prim = nullptr;
  switch (op) {
    case ast::Op::Not: return Value::boolean(!in.truth(v, loc));
    case ast::Op::Pos:
      if (v.is_number() || v.is_tensorish()) return v.is(VT::Bool) ? Value::integer(v.as_bool()) : v;
      break;
    case ast::Op::Neg:
      if (v.is(VT::Int) || v.is(VT::Bool)) {
        int64_t x = v.is(VT::Int) ? v.as_int() : v.as_bool();
        if (x == INT64_MIN) in.fail(loc, "integer overflow in unary -");
        return Value::integer(-x);
      }
      if (v.is(VT::Float)) return Value::number(-v.as_float());
      prim = "neg";
      break;
    case ast::Op::Invert:
      if (v.is(VT::Int) || v.is(VT::Bool)) return Value::integer(~(v.is(VT::Int) ? v.as_int() : int64_t(v.as_bool())));
      prim = "bitwise_not";
      break;
    default: break;
  }
  if (prim && v.is_tensorish()) {
    CallArgs a;
    a.pos.push_back(v);
    return in.call_op(*ir::find_op(prim), std::move(a), loc);
  }
  in.fail(loc, std::string("bad operand type for unary operator: '") + type_name(v.type()) + "'");
}

// The hot kinds: names, numbers, operators, calls and subscripts. Everything else is in
// eval_other (measured with callgrind on bench/lastuse.trace: eval's prologue and epilogue were
// a fifth of its instructions while it carried the vectors of the list and dict cases).
Value Interpreter::eval(const Expr& e, Frame& fr) {
  switch (e.kind) {
    case ExprKind::Name:
      if (static_cast<NameScope>(e.depth) == NameScope::Local) {
        Value& v = fr.slots[e.slot];
        if (!v.is(VT::Unbound)) {
          refresh(v, fr, e.loc);
          return v;
        }
      }
      return load_name(e, fr);
    case ExprKind::Int: return Value::integer(e.int_value);
    case ExprKind::Float: return Value::number(e.float_value);
    case ExprKind::Binary: {
      Value a = eval(*e.items[0], fr);
      return binary(e.op, a, eval(*e.items[1], fr), e.loc);
    }
    case ExprKind::Compare:
      if (e.compare_ops.size() == 1) {
        Value left = eval(*e.items[0], fr);
        return binary(e.compare_ops[0], left, eval(*e.items[1], fr), e.loc);
      }
      return eval_other(e, fr);
    case ExprKind::Call: return eval_call(e, fr);
    case ExprKind::Subscript: {
      Value obj = eval(*e.items[0], fr);
      return subscript(obj, eval(*e.items[1], fr), e.loc);
    }
    case ExprKind::None: return Value();
    case ExprKind::True: return Value::boolean(true);
    case ExprKind::False: return Value::boolean(false);
    default: return eval_other(e, fr);
  }
}

__attribute__((noinline)) Value Interpreter::eval_other(const Expr& e, Frame& fr) {
  switch (e.kind) {
    case ExprKind::Name: return load_name(e, fr);
    case ExprKind::Int: return Value::integer(e.int_value);
    case ExprKind::Float: return Value::number(e.float_value);
    case ExprKind::Str: return str_value(e.str_value);
    case ExprKind::True: return Value::boolean(true);
    case ExprKind::False: return Value::boolean(false);
    case ExprKind::None: return Value();
    case ExprKind::Ellipsis: return Value::ellipsis();
    case ExprKind::List:
    case ExprKind::Tuple: {
      std::vector<Value> xs;
      xs.reserve(e.items.size());
      for (const auto& x : e.items) {
        if (x->kind == ExprKind::Starred) {
          for (Value& y : iterate(eval(*x->items[0], fr), x->loc)) xs.push_back(std::move(y));
        } else {
          xs.push_back(eval(*x, fr));
        }
      }
      return e.kind == ExprKind::List ? make<ListObj>(std::move(xs)) : make<TupleObj>(std::move(xs));
    }
    case ExprKind::Dict: {
      auto* d = new DictObj();
      Value v(d);
      for (size_t i = 0; i < e.keys.size(); ++i) d->set(eval(*e.keys[i], fr), eval(*e.items[i], fr));
      return v;
    }
    case ExprKind::Unary: return unary(*this, e.op, eval(*e.items[0], fr), e.loc);
    case ExprKind::Binary: {
      Value a = eval(*e.items[0], fr);
      return binary(e.op, a, eval(*e.items[1], fr), e.loc);
    }
    case ExprKind::BoolOp: {
      Value v;
      for (const auto& x : e.items) {
        v = eval(*x, fr);
        bool t = truth(v, x->loc);
        if ((e.op == ast::Op::And && !t) || (e.op == ast::Op::Or && t)) return v;
      }
      return v;
    }
    case ExprKind::Compare: {
      Value left = eval(*e.items[0], fr);
      for (size_t i = 0; i < e.compare_ops.size(); ++i) {
        Value right = eval(*e.items[i + 1], fr);
        Value r = binary(e.compare_ops[i], left, right, e.loc);
        if (e.compare_ops.size() == 1) return r;
        if (!truth(r, e.loc)) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case ExprKind::IfExp:
      return truth(eval(*e.items[1], fr), e.items[1]->loc) ? eval(*e.items[0], fr) : eval(*e.items[2], fr);
    case ExprKind::Call: return eval_call(e, fr);
    case ExprKind::Attribute: return get_attr(eval(*e.items[0], fr), e.name, e.loc);
    case ExprKind::Subscript: {
      Value obj = eval(*e.items[0], fr);
      return subscript(obj, eval(*e.items[1], fr), e.loc);
    }
    case ExprKind::Slice: {
      auto part = [&](size_t i) { return i < e.items.size() && e.items[i] ? eval(*e.items[i], fr) : Value(); };
      return make<SliceObj>(part(0), part(1), part(2));
    }
    case ExprKind::ListComp: return eval_list_comp(e, fr);
    case ExprKind::Lambda: return make_function(*fr.module->by_node.at(&e), fr, e.loc);
    case ExprKind::Starred: fail(e.loc, "starred expression is not allowed here");
  }
  fail(e.loc, "internal error: unknown expression");
}

// ---------------------------------------------------------------- statements that build values

Flow Interpreter::exec_with(const Stmt& s, Frame& fr) {
  Value ctx = eval(*s.value, fr);
  if (!s.targets.empty() && s.targets[0]) assign(*s.targets[0], ctx, fr, false);
  if (ctx.is(VT::Recording)) {
    Recorder saved = rec_;
    auto t = ctx.as<RecordingObj>()->trace;
    int highest = 0;  // new regions continue the trace's numbering
    for (const ir::Stmt& st : t->stmts) highest = std::max(highest, st.region_id);
    rec_ = Recorder{t.get(), {&t->stmts}, "", 0, highest, {}};
    struct Restore {
      Recorder& r;
      Recorder saved;
      ~Restore() { r = saved; }
    } restore{rec_, saved};
    return exec_block(s.body, fr);
  }
  if (!ctx.is(VT::Region) || !tracing()) return exec_block(s.body, fr);
  const RegionObj& region = *ctx.as<RegionObj>();
  std::string outer = rec_.region;
  int outer_id = rec_.region_id;
  if (region.id == 0) {
    if (!rec_.region.empty())
      fail(s.loc, "nested '" + region.name + "' region inside a '" + rec_.region + "' region (regions do not nest)");
    rec_.region = region.name;
    rec_.region_id = ++rec_.region_count;
  } else {
    rec_.region = region.name;  // a pass re-entering a statement's region (or none)
    rec_.region_id = region.name.empty() ? 0 : region.id;
  }
  struct Reset {
    Recorder& r;
    std::string name;
    int id;
    ~Reset() {
      r.region = name;
      r.region_id = id;
    }
  } reset{rec_, outer, outer_id};
  return exec_block(s.body, fr);
}



Flow Interpreter::exec_fusion(const Stmt& s, Frame& fr) {
  if (!tracing()) return exec_block(s.body, fr);
  const Expr& call = *s.value;
  ir::Stmt st;
  st.kind = ir::StmtKind::Fusion;
  // The callee's own name (`frobnicate` of thunder.x.frobnicate): the printed trace calls it so.
  const ExprKind ck = call.items[0]->kind;
  st.callee = ck == ExprKind::Name || ck == ExprKind::Attribute ? call.items[0]->name : "fusion";
  st.loc = s.loc;
  st.region = rec_.region;
  st.region_id = rec_.region_id;
  for (const auto& a : call.args) {
    ir::Arg arg;
    if (!to_arg(eval(*a, fr), &arg)) fail(a->loc, "a fusion argument must be a tensor or a constant");
    st.args.push_back(std::move(arg));
  }
  std::vector<ir::Stmt> body;
  rec_.scopes.push_back(&body);
  try {
    exec_block(s.body, fr);
  } catch (...) {
    rec_.scopes.pop_back();
    throw;
  }
  rec_.scopes.pop_back();
  const Expr& targets = *s.targets[0];
  st.outputs_as_list = targets.kind == ExprKind::List;
  std::vector<const Expr*> names;  // nested targets flattened: (t2, (_, _)) = op(x)
  std::function<void(const Expr&)> flat = [&](const Expr& e) {
    if (e.kind == ExprKind::Name) names.push_back(&e);
    else
      for (const auto& t : e.items) flat(*t);
  };
  flat(targets);
  // A decomposed call whose outputs are not all tensors (a DTensor op's, which returns a DTensor
  // object): its decomposition's statements stand in the trace as they are.
  if (s.decomposed)
    for (const Expr* n : names)
      if (n->name != "_" && !load_name(*n, fr).is(VT::Proxy)) {
        for (ir::Stmt& b : body) push_stmt(std::move(b));
        return Flow::Normal;
      }
  for (const Expr* n : names) {
    if (n->name == "_") continue;  // an output nothing reads (Thunder's dce dropped its computation)
    Value v = load_name(*n, fr);
    if (!v.is(VT::Proxy)) fail(n->loc, "fusion output '" + n->name + "' is not computed by the fusion's body");
    st.outputs.push_back(v.as<ProxyObj>()->p);
  }
  // A write through a view inside (prims.copy_) leaves the written tensor's new value in the
  // body, where a later update_aliases reads it: one more output of the fusion.
  for (const ir::ProxyPtr& p : hidden_alias_values(body, st.outputs)) st.outputs.push_back(p);
  st.subsymbols = std::move(body);
  push_stmt(std::move(st));
  return Flow::Normal;
}

void Interpreter::exec_import(const Stmt& s, Frame& fr) {
  const auto& targets = fr.module->binds.at(&s);
  for (size_t i = 0; i < s.imports.size(); ++i) {
    const ast::ImportName& im = s.imports[i];
    Value v;
    if (s.kind == ast::StmtKind::Import) {
      std::string path = im.asname.empty() ? im.name.substr(0, im.name.find('.')) : im.name;
      resolve_module_path(im.name, im.loc);  // the whole path must exist
      v = resolve_module_path(path, im.loc);
    } else {
      Value mod = resolve_module_path(s.module, s.loc);
      const Value* member = mod.as<NamespaceObj>()->lookup(im.name);
      if (!member) fail(im.loc, "cannot import name '" + im.name + "' from '" + s.module + "'");
      v = *member;
    }
    assign(*targets.at(i), std::move(v), fr, false);
  }
}

}  // namespace tracer::interp
