// Tracing a function from its parameters' types: each parameter (or Thunder collection, module
// read, DTensor or constant a printout states) becomes an input proxy, the body runs on proxies and
// its statements are recorded; also the collections a traced frame holds (clear_collection).
#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "interpreter/collections.h"
#include "interpreter/interp.h"
#include "ir/fusion.h"

namespace tracer::interp {

using K = ir::Arg::Kind;

namespace {
// A concrete tensor anywhere in a traced function's output (one not computed from its inputs).
bool holds_tensor(const ir::Arg& a) {
  if (a.kind == K::Tensor) return true;
  for (const auto& x : a.items)
    if (holds_tensor(x)) return true;
  return false;
}
}  // namespace

namespace {

struct ParamTypes {
  std::string name;
  std::vector<ir::TensorType> types;
  bool is_list = false;
  SourceLoc loc;
  std::optional<Collection> coll;  // a Thunder collection: `types` are its tensors, depth first
  std::vector<std::string> names;  // the collection's tensors' names
  bool spread = false;             // *args: the collection's items are the positional arguments
  std::optional<Value> constant{};  // a number, string or None the printout states: no input
  bool keyword_only = false;       // after `*` or `*args`: passed by name
  std::vector<ModuleRead> module;  // a prologue's module (globals()['__function_obj']): no parameter
  // Per element of `types`: a DTensor input's global type (`types` holds its local tensor's).
  std::vector<std::optional<ir::TensorType>> dtensor;
};

// The type comments a printout puts first in a function's body, one a parameter, in order (an
// unnamed one, `# "sum"`, is the parameter at its place).
std::vector<const ast::Stmt*> leading_type_comments(const ast::Block& b) {
  std::vector<const ast::Stmt*> out;
  for (const auto& s : b) {
    if (s->kind != ast::StmtKind::TypeComment) break;
    out.push_back(s.get());
  }
  return out;
}

const ast::Stmt* find_type_comment(const ast::Block& b, const std::string& name) {
  for (const auto& s : b) {
    if (s->kind == ast::StmtKind::TypeComment && s->name == name) return s.get();
    if (const ast::Stmt* r = find_type_comment(s->body, name)) return r;
    if (const ast::Stmt* r = find_type_comment(s->orelse, name)) return r;
  }
  return nullptr;
}

// The value a collection parameter takes while tracing: tuples of its tensors' proxies (taken
// in order from `proxies`), numbers and Nones.
Value collection_value(const Collection& c, const std::vector<Value>& proxies, size_t* next) {
  switch (c.kind) {
    case Collection::Kind::Tensor: return proxies[(*next)++];
    case Collection::Kind::Number: return c.number;
    case Collection::Kind::None: return Value();
    case Collection::Kind::Tuple: break;
  }
  std::vector<Value> items;
  for (const Collection& x : c.items) items.push_back(collection_value(x, proxies, next));
  return make<TupleObj>(std::move(items));
}

}  // namespace

// nvFuser's definition function as Thunder prints it: `def f(fd : FusionDefinition) -> None :`.
static bool is_fusion_definition(const FunctionObj& fn) {
  const auto& ps = *fn.info->params;
  return ps.size() == 1 && ps[0].annotation && ps[0].annotation->kind == ast::ExprKind::Name &&
         ps[0].annotation->name == "FusionDefinition";
}

// Its inputs: `T0 = fd.define_tensor(shape=[-1, 4], dtype=DataType.Float, ...)` and
// `S1 = fd.define_scalar(None, dtype=DataType.Double)` (a 0-d tensor here), in order. A tensor's
// type is given (--type, --input), else its dtype and sizes as stated; symbolic sizes (-1) without
// a given type are collected so that one error names them all.
static std::vector<ParamTypes> fusion_definition_inputs(Interpreter& in, const FunctionObj& fn,
                                                        const std::map<std::string, ir::TensorType>& given) {
  const std::string& fd = (*fn.info->params)[0].name;
  std::vector<ParamTypes> out;
  std::vector<std::string> symbolic;
  SourceLoc first_symbolic;
  auto dtype_of = [&](const ast::Expr* e, SourceLoc loc) {
    if (!e || e->kind != ast::ExprKind::Attribute) in.fail(loc, "define_tensor: the dtype must be written DataType.X");
    static const std::map<std::string, rt::DType> kTypes = {{"Float", rt::DType::f32}, {"Double", rt::DType::f64},
                                                            {"Half", rt::DType::f16}, {"BFloat16", rt::DType::bf16},
                                                            {"Int", rt::DType::i64}, {"Int32", rt::DType::i32},
                                                            {"Bool", rt::DType::b8}};
    auto it = kTypes.find(e->name);
    if (it == kTypes.end()) in.fail(e->loc, "nvFuser's DataType." + e->name + " has no tracer dtype");
    return it->second;
  };
  for (const auto& st : *fn.info->body) {
    if (!st->is_assign() || st->targets.size() != 1 || st->targets[0]->kind != ast::ExprKind::Name ||
        !st->value || st->value->kind != ast::ExprKind::Call)
      continue;
    const ast::Expr& call = *st->value;
    const ast::Expr& f = *call.items[0];
    if (f.kind != ast::ExprKind::Attribute || f.items.empty() || f.items[0]->kind != ast::ExprKind::Name || f.items[0]->name != fd)
      continue;
    bool scalar = f.name == "define_scalar";
    if (f.name != "define_tensor" && !scalar) continue;
    if (scalar && !call.args.empty() && call.args[0]->kind != ast::ExprKind::None) continue;  // a constant
    const ast::Expr* shape = nullptr;
    const ast::Expr* dtype = nullptr;
    for (const ast::Keyword& k : call.keywords) {
      if (k.name == "shape" || k.name == "symbolic_sizes" || k.name == "sizes") shape = k.value.get();
      if (k.name == "dtype") dtype = k.value.get();
    }
    if (!scalar && !shape && !call.args.empty()) shape = call.args[0].get();
    if (!dtype && call.args.size() > (scalar ? 1u : 2u)) dtype = call.args[scalar ? 1 : 2].get();
    const std::string& name = st->targets[0]->name;
    ParamTypes pt{name, {}, false, st->loc, std::nullopt, {}, false, std::nullopt, false, {}, {}};
    auto g = given.find(name);
    if (g != given.end()) {
      pt.types.push_back(g->second);
      out.push_back(std::move(pt));
      continue;
    }
    ir::TensorType t;
    t.dtype = dtype_of(dtype, call.loc);
    bool known = true;
    if (!scalar) {
      if (!shape || (shape->kind != ast::ExprKind::List && shape->kind != ast::ExprKind::Tuple))
        in.fail(call.loc, "define_tensor: the shape must be a list of sizes");
      for (const auto& d : shape->items) {
        if (d->kind == ast::ExprKind::Int && d->int_value >= 0) {
          t.shape.push_back(d->int_value);
        } else {
          known = false;  // -1 (or an expression): symbolic
          t.shape.push_back(in.symbolic_placeholder);
        }
      }
    }
    if (!known) {
      if (symbolic.empty()) first_symbolic = st->loc;
      symbolic.push_back(name);
    }
    pt.types.push_back(t);
    out.push_back(std::move(pt));
  }
  in.placeholder_inputs.clear();
  if (!symbolic.empty() && in.symbolic_placeholder > 0) {
    in.placeholder_inputs = symbolic;  // tracer check: traced with each symbolic size set to the placeholder
  } else if (!symbolic.empty()) {
    std::string names, types;
    for (const std::string& n : symbolic) {
      names += (names.empty() ? "'" : ", '") + n + "'";
      types += " --type " + n + "=f32[2, 3]";
    }
    in.fail(first_symbolic, "the nvFuser definition '" + fn.info->name + "' defines " + names + " with symbolic sizes (-1): give " +
                                (symbolic.size() == 1 ? "its type" : "their types") + " (" + types.substr(1) +
                                ") or input files (--input NAME=FILE)");
  }
  return out;
}

// `v = globals()['__function_obj']` somewhere in b (a Thunder prologue of a module's call).
static bool reads_function_obj(const ast::Block& b) {
  for (const auto& s : b) {
    const ast::Expr* v = s->value.get();
    if ((s->kind != ast::StmtKind::AnnAssign && !s->is_assign()) || !v || v->kind != ast::ExprKind::Subscript) continue;
    const ast::Expr& f = *v->items[0];
    const ast::Expr& k = *v->items[1];
    if (f.kind == ast::ExprKind::Call && f.items[0]->kind == ast::ExprKind::Name && f.items[0]->name == "globals" &&
        k.kind == ast::ExprKind::Str && k.str_value == "__function_obj")
      return true;
  }
  return false;
}

static std::vector<ParamTypes> param_types(Interpreter& in, const FunctionObj& fn,
                                           const std::map<std::string, ir::TensorType>& given) {
  if (is_fusion_definition(fn)) return fusion_definition_inputs(in, fn, given);
  std::vector<ParamTypes> out;
  std::vector<UntypedElement> untyped;
  const auto& params = *fn.info->params;
  const std::vector<const ast::Stmt*> leading = fn.info->body ? leading_type_comments(*fn.info->body) : std::vector<const ast::Stmt*>{};
  size_t normal = 0;
  for (const ast::Param& q : params) normal += q.kind == ast::Param::Kind::Normal;
  // Parameter i's type comment: by its name, else the unnamed one at its place (when the
  // printout comments every parameter in order).
  auto param_comment = [&](size_t i, const std::string& name) -> const ast::Stmt* {
    if (!fn.info->body) return nullptr;
    if (const ast::Stmt* tc = find_type_comment(*fn.info->body, name)) return tc;
    if (leading.size() == normal && i < leading.size() && leading[i]->name.empty()) return leading[i];
    return nullptr;
  };
  // `# a` alone: Thunder's printout of a parameter whose type it did not state.
  auto named_bare = [&](const std::string& name) {
    for (const auto& s : *fn.info->body) {
      for (const std::string& c : s->comments)
        if (c == name) return true;
      if (s->kind != ast::StmtKind::TypeComment) break;
    }
    return false;
  };
  // A collection parameter's tensors become its inputs, depth first.
  auto take_collection = [](ParamTypes& pt, std::optional<Collection> coll) {
    std::vector<const Collection*> leaves;
    collection_tensors(*coll, &leaves);
    for (const Collection* c : leaves) {
      pt.types.push_back(c->type);
      pt.names.push_back(c->name);
    }
    pt.coll = std::move(coll);
  };
  bool after_star = false;
  for (size_t i = 0; i < params.size(); ++i) {
    const ast::Param& p = params[i];
    ParamTypes pt{p.name, {}, false, p.loc, std::nullopt, {}, false, std::nullopt, false, {}, {}};
    pt.keyword_only = after_star;
    if (p.kind == ast::Param::Kind::VarArgs) after_star = true;
    if (p.kind != ast::Param::Kind::Normal) {
      // A prologue's `*args` (read as `x: "cpu f32[2]" = args[0]`) or an augmented forward's
      // (`t0, t1, = args`): a collection whose elements are spread as the positional arguments;
      // `**kwargs` takes none (a printout checks `prims.check_len(kwargs, 0)`).
      if (p.kind == ast::Param::Kind::KwArgs || p.name.empty()) continue;  // **kwargs; a bare `*`
      auto coll = collection_param(in, fn, i, given, &untyped);
      if (!coll)
        in.fail(p.loc, "'" + fn.info->name + "' takes *" + p.name + " but its body neither unpacks it (`a, b, = " + p.name +
                           "`) nor reads its elements (`a: \"cpu f32[2]\" = " + p.name +
                           "[0]`), which would say what it holds: a traced function needs its inputs' types");
      take_collection(pt, std::move(coll));
      pt.spread = true;
      out.push_back(std::move(pt));
      continue;
    }
    auto g = given.find(p.name);
    const Value& ann = fn.annotations[i];
    if (g != given.end()) {
      if (ann.is(VT::Type) && !ann.as<TypeObj>()->type.same_layout(g->second)) {
        const ir::TensorType& want = ann.as<TypeObj>()->type;
        in.fail(p.loc, "input '" + p.name + "' is " + rt::dtype_name(g->second.dtype) + rt::shape_str(g->second.shape) +
                           " but '" + fn.info->name + "' declares it " + rt::dtype_name(want.dtype) + rt::shape_str(want.shape));
      }
      pt.types.push_back(g->second);
    } else if (ann.is(VT::Type)) {
      pt.types.push_back(ann.as<TypeObj>()->type);
    } else if (ann.is(VT::Str)) {
      std::string why;
      auto t = ir::parse_type_string(ann.as<StrObj>()->s, &why);
      if (!t) in.fail(p.annotation ? p.annotation->loc : p.loc, why);
      pt.types.push_back(*t);
    } else if (ann.is(VT::List)) {
      pt.is_list = true;
      for (const Value& x : ann.as<ListObj>()->items) {
        if (!x.is(VT::Type)) in.fail(p.loc, "a list annotation must hold tensor types, like [f32[4, 4]] * 3");
        auto gi = given.find(p.name + "_" + std::to_string(pt.types.size()));
        pt.types.push_back(gi != given.end() ? gi->second : x.as<TypeObj>()->type);
      }
    } else if (auto coll = collection_param(in, fn, i, given, &untyped)) {
      // A backward printout's saved values and cotangents, typed element by element.
      take_collection(pt, std::move(coll));
    } else if (const ast::Stmt* tc = param_comment(i, p.name)) {
      if (auto lit = literal_of_type_string(tc->type_string)) {
        pt.constant = std::move(*lit);  // a number or string the printout states
        out.push_back(std::move(pt));
        continue;
      }
      if (tc->type_string == "Collection")
        in.fail(tc->loc, "parameter '" + p.name + "' of '" + fn.info->name +
                             "' has no tensor type: its type comment says \"Collection\" but the body never unpacks it "
                             "(`a, b, = " + p.name + "`), which would say what it holds");
      std::string why;
      auto t = ir::parse_type_string(tc->type_string, &why);
      if (!t) in.fail(tc->loc, why);
      pt.types.push_back(*t);
    } else if (!ann.is_none()) {
      in.fail(p.annotation ? p.annotation->loc : p.loc, "the annotation of parameter '" + p.name +
                                                            "' is not a tensor type (like f32[2, 3])");
    } else if (!fn.defaults[i].is(VT::Unbound)) {
      pt.constant = fn.defaults[i];  // a default stands for a value the printout does not state
      out.push_back(std::move(pt));
      continue;
    } else if (!leading.empty() && !named_bare(p.name)) {
      // Thunder prints no comment for a None argument (every other parameter has one).
      pt.constant = Value();
      out.push_back(std::move(pt));
      continue;
    } else {
      in.fail(p.loc, "parameter '" + p.name + "' of '" + fn.info->name + "' has no tensor type: annotate it (" + p.name +
                         ": f32[2, 3]) or give it as an input");
    }
    out.push_back(std::move(pt));
  }
  // A prologue of a module's call reads the module's parameters and buffers (Thunder's
  // `fn = globals()['__function_obj']`, `obj.get_parameter('0.weight')`): they are inputs too, after
  // the arguments, named by the names the prologue gives them.
  if (fn.info->body && reads_function_obj(*fn.info->body)) {
    std::vector<ModuleRead> reads;
    if (auto coll = module_collection(in, fn, given, &untyped, &reads)) {
      ParamTypes pt{"__function_obj", {}, false, fn.info->loc, std::nullopt, {}, false, std::nullopt, false, {}, {}};
      take_collection(pt, std::move(coll));
      pt.module = std::move(reads);
      out.push_back(std::move(pt));
    }
  }
  fail_untyped(in, fn, untyped);
  // DTensor inputs ("DTensor cuda:0 f32[16, 16]"): the input is this rank's local tensor.
  for (ParamTypes& p : out) {
    p.dtensor.assign(p.types.size(), std::nullopt);
    for (size_t i = 0; i < p.types.size(); ++i) {
      const std::string& name = p.coll ? p.names[i] : p.is_list ? std::string() : p.name;
      if (name.empty()) continue;
      auto global = dtensor_declared(fn, name);
      if (!global) continue;
      auto g = given.find(name);
      p.types[i] = g != given.end() ? g->second : dtensor_local_type(in, fn, name, *global, p.loc);
      if (p.types[i].dtype != global->dtype || p.types[i].shape.size() != global->shape.size())
        in.fail(p.loc, "input '" + name + "' is " + p.types[i].str() + " but it is a DTensor of " + rt::dtype_name(global->dtype) +
                           rt::shape_str(global->shape) + ": its local tensor must have that dtype and as many dimensions");
      p.dtensor[i] = *global;
    }
  }
  return out;
}

// A printout's DTensor input (stdlib/thunder.trace's DTensor): its local tensor, global shape and
// dtype, and a spec that stands for the caller's (check_dtensor_spec_repr checks it).
static Value input_dtensor(Value local, const ir::TensorType& local_type, const ir::TensorType& global, const std::string& name) {
  auto tuple_of = [](const rt::Shape& s) {
    std::vector<Value> xs;
    for (int64_t d : s) xs.push_back(Value::integer(d));
    return Value(new TupleObj(std::move(xs)));
  };
  auto* spec = new NamespaceObj("DTensorSpec");
  Value sv(spec);
  spec->members["input"] = str_value(name);
  spec->members["local_shape"] = tuple_of(local_type.shape);
  spec->members["shape"] = tuple_of(global.shape);
  spec->members["dtype"] = Value::dtype(global.dtype);
  auto* d = new NamespaceObj("DTensor");
  Value dv(d);
  d->members["_local_tensor"] = std::move(local);
  d->members["_spec"] = sv;
  d->members["shape"] = tuple_of(global.shape);
  d->members["dtype"] = Value::dtype(global.dtype);
  d->members["ndim"] = Value::integer(static_cast<int64_t>(global.shape.size()));
  d->members["name"] = str_value(name);
  return dv;
}

std::vector<std::pair<std::string, ir::TensorType>> Interpreter::input_types(
    const FunctionObj& fn, const std::map<std::string, ir::TensorType>& given) {
  std::vector<std::pair<std::string, ir::TensorType>> out;
  for (const ParamTypes& p : param_types(*this, fn, given)) {
    if (p.constant) continue;
    for (size_t i = 0; p.coll && i < p.types.size(); ++i) out.emplace_back(p.names[i], p.types[i]);
    if (p.coll) continue;
    if (!p.is_list) out.emplace_back(p.name, p.types[0]);
    for (size_t i = 0; p.is_list && i < p.types.size(); ++i) out.emplace_back(p.name + "_" + std::to_string(i), p.types[i]);
  }
  return out;
}

std::shared_ptr<ir::Trace> Interpreter::trace(const FunctionObj& fn, const std::map<std::string, ir::TensorType>& given) {
  HeapScope scope(heap_);
  if (tracing()) fail(fn.info->loc, "cannot trace '" + fn.info->name + "' while another trace is being recorded");
  auto t = std::make_shared<ir::Trace>();
  t->name = fn.info->name;
  CallArgs args;
  Value module;  // globals()['__function_obj'] of a prologue that reads a module
  for (const ParamTypes& p : param_types(*this, fn, given)) {
    auto pass = [&](Value v) {
      if (p.keyword_only) args.kw.emplace_back(p.name, std::move(v));
      else args.pos.push_back(std::move(v));
    };
    if (p.constant) {
      pass(*p.constant);
      continue;
    }
    std::vector<Value> proxies;
    for (size_t i = 0; i < p.types.size(); ++i) {
      auto proxy = std::make_shared<ir::Proxy>();
      proxy->name = p.coll ? p.names[i] : p.is_list ? p.name + "_" + std::to_string(i) : p.name;
      proxy->type = p.types[i];
      proxy->auto_named = false;
      proxy->moved_in = p.coll && !p.spread;  // a backward's collections: handed over, not held
      if (!t->names.insert(proxy->name).second) fail(p.loc, "input name '" + proxy->name + "' is used twice");
      t->inputs.push_back(proxy);
      proxies.push_back(make<ProxyObj>(proxy));
      if (i < p.dtensor.size() && p.dtensor[i]) proxies.back() = input_dtensor(proxies.back(), p.types[i], *p.dtensor[i], proxy->name);
    }
    // Every tuple of a collection (liveness of what it holds: Recorder::collections).
    std::function<void(const Value&)> mark = [&](const Value& v) {
      if (!v.is(VT::Tuple)) return;
      pending_collections_.insert(v.as<TupleObj>());
      for (const Value& x : v.as<TupleObj>()->items) mark(x);
    };
    if (!p.module.empty()) {
      // The module: stdlib/thunder.trace's ThunderModule(parameters, buffers), keyed as read.
      size_t next = 0;
      Value all = collection_value(*p.coll, proxies, &next);
      Value params(new DictObj()), buffers(new DictObj());
      const auto& items = all.as<TupleObj>()->items;
      for (size_t k = 0; k < p.module.size(); ++k)
        (p.module[k].buffer ? buffers : params).as<DictObj>()->set(str_value(p.module[k].key), items[k]);
      const Value* thunder = builtins().lookup("thunder");
      const Value* make = thunder ? thunder->as<NamespaceObj>()->lookup("ThunderModule") : nullptr;
      if (!make || !make->is(VT::Function)) fail(fn.info->loc, "internal error: stdlib/thunder.trace has no ThunderModule");
      CallArgs margs;
      margs.pos = {params, buffers};
      module = call_function(*make->as<FunctionObj>(), margs, fn.info->loc);
      continue;
    }
    if (p.coll && p.spread) {
      size_t next = 0;
      Value all = collection_value(*p.coll, proxies, &next);
      for (const Value& x : all.as<TupleObj>()->items) args.pos.push_back(x);
    } else if (p.coll) {
      size_t next = 0;
      args.pos.push_back(collection_value(*p.coll, proxies, &next));
      mark(args.pos.back());
    } else {
      pass(p.is_list ? make<ListObj>(std::move(proxies)) : std::move(proxies[0]));
    }
  }
  if (is_fusion_definition(fn)) {
    // nvFuser's definition: stdlib/nvfuser.trace's run_definition(defn, *inputs) calls it on a
    // FusionDefinition fed by the inputs and returns what it adds as outputs.
    const Value* run = builtins().lookup("nvfuser");
    run = run ? run->as<NamespaceObj>()->lookup("run_definition") : nullptr;
    if (!run || !run->is(VT::Function)) fail(fn.info->loc, "internal error: stdlib/nvfuser.trace has no run_definition");
    args.pos.insert(args.pos.begin(), Value(const_cast<FunctionObj*>(&fn)));
    record_call(*run->as<FunctionObj>(), args, *t, fn.info->loc);
    // Its statements are one fusion, as nvFuser runs them: `[T2, T3] = nvFusion0(T0, T1)`.
    std::vector<ir::Stmt> body;
    for (ir::Stmt& st : t->stmts)
      if (st.kind != ir::StmtKind::Del) body.push_back(std::move(st));
    t->stmts.clear();
    if (!body.empty()) {
      ir::Stmt f;
      f.kind = ir::StmtKind::Fusion;
      f.callee = "nvFusion0";
      f.outputs_as_list = true;
      f.loc = fn.info->loc;
      f.args = ir::fusion_inputs(body);
      std::unordered_set<const ir::Proxy*> defined;
      for (const ir::Stmt& st : body)
        for (const auto& p : st.outputs) defined.insert(p.get());
      // Its outputs: what the definition adds as outputs and computes (an input passed through is none).
      ir::for_each_proxy(t->output, [&](const ir::ProxyPtr& p) {
        if (defined.count(p.get()) && std::find(f.outputs.begin(), f.outputs.end(), p) == f.outputs.end()) f.outputs.push_back(p);
      });
      f.subsymbols = std::move(body);
      if (!f.outputs.empty()) t->stmts.push_back(std::move(f));
      else t->stmts = std::move(f.subsymbols);
    }
    return t;
  }
  struct Bind {
    Value& slot;
    ~Bind() { slot = Value(); }
  } bind{function_obj_};
  function_obj_ = module;
  record_call(fn, args, *t, fn.info->loc);
  return t;
}

void Interpreter::record_call(const FunctionObj& fn, CallArgs& args, ir::Trace& t, SourceLoc loc,
                              std::function<ir::ProxyPtr(const rt::Tensor&)> capture) {
  HeapScope scope(heap_);
  if (tracing()) fail(fn.info->loc, "cannot trace '" + fn.info->name + "' while another trace is being recorded");
  rec_ = Recorder{&t, {&t.stmts}, "", 0, 0, std::move(capture)};
  rec_.collections = std::move(pending_collections_);
  pending_collections_.clear();
  struct Reset {
    Recorder& r;
    ~Reset() { r = Recorder{}; }
  } reset{rec_};
  Value result;
  try {
    result = call_function(fn, args, loc);
  } catch (ScriptError& e) {
    if (!e.traceback.empty() && loc.file == fn.info->loc.file && loc.offset == fn.info->loc.offset) e.traceback.back().note = "while tracing '" + fn.info->name + "'";
    throw;
  }
  if (!to_arg(result, &t.output))
    fail(fn.info->loc, "'" + fn.info->name + "' returned a " + type_name(result.type()) +
                           ", which a trace cannot return (return tensors, numbers, or lists, tuples and dicts of them)");
  if (holds_tensor(t.output)) fail(fn.info->loc, "'" + fn.info->name + "' returned a concrete tensor that was not computed from its inputs");
  // A tensor written in place since it was made (kept in a list or a dict the function returns)
  // is returned as it is now, as a name read after the write is (current_alias).
  std::function<void(ir::Arg&)> up_to_date = [&](ir::Arg& a) {
    if (a.kind == ir::Arg::Kind::Proxy) a.proxy = current_alias(a.proxy, fn.info->loc);
    for (ir::Arg& x : a.items) up_to_date(x);
  };
  up_to_date(t.output);
  // Once the trace is whole the marks go: the statements before the write read it rightly (and
  // passes re-infer them).
  ir::for_each_proxy(t.output, [&](const ir::ProxyPtr& p) {
    if (!p->written_over.empty())
      fail(fn.info->loc, "'" + fn.info->name + "' returns " + p->name + ", which " + p->written_over +
                             " wrote over; tracer's traces are functional: return the tensor " + p->written_over + " returned");
    if (ir::stale_alias(p))
      fail(fn.info->loc, "'" + fn.info->name + "' returns " + p->name +
                             (p == ir::view_root(p) ? std::string(", which was written in place through one of its views")
                                                    : ", a view of " + ir::view_root(p)->name + " made before a write into it through another alias") +
                             ", so it holds the old values; tracer's traces are functional: return what the in-place op returned, "
                             "or pass " + p->name + " through prims.update_aliases first (as Thunder's traces do)");
  });
  // So do the aliases of views (ir::ViewStep), which only tracing follows.
  auto forget = [](const ir::ProxyPtr& p) {
    p->written_over.clear();
    p->view.reset();
    p->storage.reset();
  };
  std::function<void(const std::vector<ir::Stmt>&)> unmark = [&](const std::vector<ir::Stmt>& stmts) {
    for (const ir::Stmt& s : stmts) {
      for (const ir::Arg& a : s.args) ir::for_each_proxy(a, forget);
      for (const auto& p : s.outputs) forget(p);
      unmark(s.subsymbols);
    }
  };
  for (const auto& p : t.inputs) forget(p);
  unmark(t.stmts);
  t.provenance.push_back("Constructed by tracing");
}

}  // namespace tracer::interp

namespace tracer::interp {

bool Interpreter::collection_holds(const Frame& fr, const ir::Proxy* p) const {
  if (rec_.collections.empty()) return false;
  std::function<bool(const Value&)> holds = [&](const Value& v) {
    if (!v.is(VT::Tuple) || !rec_.collections.count(v.as<TupleObj>()) || rec_.cleared.count(v.as<TupleObj>())) return false;
    for (const Value& x : v.as<TupleObj>()->items) {
      if (x.is(VT::Proxy) && x.as<ProxyObj>()->p.get() == p) return true;
      if (holds(x)) return true;
    }
    return false;
  };
  for (const Value& v : fr.slots)
    if (holds(v.is(VT::Cell) ? v.as<CellObj>()->v : v)) return true;
  return false;
}

void Interpreter::release_collections(const Frame& fr, SourceLoc loc) {
  std::vector<ir::ProxyPtr> freed;
  for (auto it = rec_.held.begin(); it != rec_.held.end();) {
    if (collection_holds(fr, it->get())) {
      ++it;
      continue;
    }
    freed.push_back(*it);
    it = rec_.held.erase(it);
  }
  if (freed.empty()) return;
  ir::Stmt d;
  d.kind = ir::StmtKind::Del;
  d.deleted = std::move(freed);
  d.loc = loc;
  d.region = rec_.region;
  d.region_id = rec_.region_id;
  push_stmt(std::move(d));
}

void Interpreter::clear_collection(const Value& v, SourceLoc loc) {
  if (!rec_.trace || !rec_.frame || !v.is(VT::Tuple) || !rec_.collections.count(v.as<TupleObj>())) return;
  rec_.cleared.insert(v.as<TupleObj>());
  release_collections(*rec_.frame, loc);
}

}  // namespace tracer::interp
