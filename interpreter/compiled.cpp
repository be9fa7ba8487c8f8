// jit and value_and_grad (compiled.h): arguments flattened as pytrees (lists, tuples and dicts
// of tensors and Python values), a program per signature, run on the CPU executor.
#include "interpreter/compiled.h"

#include <charconv>
#include <chrono>
#include <cstdio>
#include <set>

#include "interpreter/interp.h"
#include "interpreter/passes.h"
#include "ir/verify.h"
#include "runtime/dtype.h"

namespace tracer::interp {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// The arguments of one call, flattened: the tensors in order, the signature (structure, each
// tensor's dtype and shape, every other value itself) and a name for each tensor from its path.
struct Flat {
  std::string key;
  std::vector<TensorObj*> objs;      // the arguments' tensors (on the host or a device)
  std::vector<ir::TensorType> types;  // their types, parallel
  std::vector<rt::Tensor> tensors;   // their host values (made by host_values; the CPU's inputs)
  std::vector<std::shared_ptr<rt::cuda::DeviceTensor>> dev;  // their device values (device_values)
  std::vector<std::string> names;
  std::vector<int64_t> arg_of;  // the positional argument a tensor is in (-1: a keyword's)
};

std::string identifier(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "_" + out;
  return out;
}

// Flattens a call's arguments: the signature key and the tensors, and with names (at a call that
// compiles, or one that failed) each tensor's path, type and argument. A call of a signature
// compiled before needs the key and the tensors only, so it builds no paths; a problem found
// without names (failed()) is reported by flattening again with them.
class Flattener {
 public:
  Flattener(Interpreter& in, const std::string& fname, SourceLoc loc, bool names = true)
      : in_(in), fname_(fname), loc_(loc), names_(names) {}
  bool failed() const { return failed_; }

  void add(const Value& v, const std::string& path, int64_t arg, Flat* f, int depth = 0) {
    if (failed_) return;
    if (depth > 64) {
      if (!names_) return void(failed_ = true);
      in_.fail(loc_, fname_ + ": an argument nests deeper than 64 levels");
    }
    switch (v.type()) {
      case VT::Tensor: {
        TensorObj* t = v.as<TensorObj>();
        if (!t->holds_value()) {
          if (!names_) return void(failed_ = true);
          in_.fail(loc_, fname_ + ": argument '" + path + "' is a tensor that was donated to an earlier call and holds no value");
        }
        // (appended in place: a step of an optimizer flattens hundreds of tensors a call)
        f->key += 'T';
        f->key += rt::dtype_name(t->dtype());
        for (int64_t d : t->shape()) {
          char buf[24];
          auto r = std::to_chars(buf, buf + sizeof buf, d);
          f->key += ',';
          f->key.append(buf, r.ptr);
        }
        f->key += ';';
        f->objs.push_back(t);
        if (!names_) return;
        f->types.push_back(ir::TensorType{t->dtype(), t->shape(), "cpu"});
        f->names.push_back(path);
        f->arg_of.push_back(arg);
        return;
      }
      case VT::Proxy:
        if (!names_) return void(failed_ = true);
        in_.fail(loc_, fname_ + ": argument '" + path + "' is a traced value (a proxy) outside a trace");
      case VT::List:
      case VT::Tuple: {
        const auto& xs = v.is(VT::List) ? v.as<ListObj>()->items : v.as<TupleObj>()->items;
        f->key += v.is(VT::List) ? '[' : '(';
        for (size_t i = 0; i < xs.size(); ++i) add(xs[i], names_ ? path + "_" + std::to_string(i) : path, arg, f, depth + 1);
        f->key += v.is(VT::List) ? ']' : ')';
        return;
      }
      case VT::Dict: {
        f->key += '{';
        for (auto& [k, x] : v.as<DictObj>()->items()) {
          if (!k.is(VT::Str) && !k.is(VT::Int)) {
            if (!names_) return void(failed_ = true);
            in_.fail(loc_, fname_ + ": argument '" + path + "' is a dict with a " + type_name(k.type()) +
                               " key; a pytree's keys are strings or integers");
          }
          if (k.is(VT::Str)) {  // length-prefixed (no temporary string, and no key can mimic another)
            const std::string& ks = k.as<StrObj>()->s;
            char buf[24];
            auto r = std::to_chars(buf, buf + sizeof buf, ks.size());
            f->key += 's';
            f->key.append(buf, r.ptr);
            f->key += '\'';
            f->key += ks;
          } else {
            f->key += repr(k);
          }
          f->key += ':';
          add(x, names_ ? path + "_" + (k.is(VT::Str) ? k.as<StrObj>()->s : std::to_string(k.as_int())) : path, arg, f, depth + 1);
        }
        f->key += '}';
        return;
      }
      case VT::None:
      case VT::Bool:
      case VT::Int:
      case VT::Float:
      case VT::Str:
      case VT::DType:
        // A Python value is part of the signature: another value traces and compiles again.
        f->key += std::string(type_name(v.type())) + ":" + repr(v) + ";";
        return;
      default:
        if (!names_) return void(failed_ = true);
        in_.fail(loc_, fname_ + ": argument '" + path + "' is a " + type_name(v.type()) +
                           "; a compiled function takes tensors, Python numbers, strings, and lists, tuples and dicts of them");
    }
  }

 private:
  Interpreter& in_;
  const std::string& fname_;
  SourceLoc loc_;
  bool names_ = true, failed_ = false;
};

// v with its tensors replaced, in order, by leaf(i) for i counting from *next; with others_none
// (a gradient pytree) every other value becomes None.
template <class F>
Value rebuild(const Value& v, size_t* next, const F& leaf, bool others_none = false) {
  switch (v.type()) {
    case VT::Tensor: return leaf((*next)++);
    case VT::List:
    case VT::Tuple: {
      const auto& xs = v.is(VT::List) ? v.as<ListObj>()->items : v.as<TupleObj>()->items;
      std::vector<Value> ys;
      ys.reserve(xs.size());
      for (const Value& x : xs) ys.push_back(rebuild(x, next, leaf, others_none));
      return v.is(VT::List) ? make<ListObj>(std::move(ys)) : make<TupleObj>(std::move(ys));
    }
    case VT::Dict: {
      auto* d = new DictObj();
      Value out(d);
      for (auto& [k, x] : v.as<DictObj>()->items()) d->set(k, rebuild(x, next, leaf, others_none));
      return out;
    }
    default: return others_none ? Value() : v;
  }
}

void donate_tensors(const Value& v) {
  switch (v.type()) {
    case VT::Tensor: v.as<TensorObj>()->clear(); return;
    case VT::List:
    case VT::Tuple:
      for (const Value& x : v.is(VT::List) ? v.as<ListObj>()->items : v.as<TupleObj>()->items) donate_tensors(x);
      return;
    case VT::Dict:
      for (auto& [k, x] : v.as<DictObj>()->items()) donate_tensors(x);
      return;
    default: return;
  }
}

const Value* kwarg(const CallArgs& a, const std::string& name) {
  for (const auto& [k, v] : a.kw)
    if (k == name) return &v;
  return nullptr;
}

std::vector<int64_t> int_list(Interpreter& in, const Value& v, const std::string& what, SourceLoc loc, bool* tuple) {
  if (tuple) *tuple = false;
  if (v.is(VT::Int)) return {v.as_int()};
  if (v.is(VT::Tuple) || v.is(VT::List)) {
    if (tuple) *tuple = true;
    std::vector<int64_t> out;
    for (const Value& x : v.is(VT::Tuple) ? v.as<TupleObj>()->items : v.as<ListObj>()->items) {
      if (!x.is(VT::Int)) in.fail(loc, what + " must be an integer or a tuple of integers, got " + repr(v));
      out.push_back(x.as_int());
    }
    return out;
  }
  in.fail(loc, what + " must be an integer or a tuple of integers, got " + repr(v));
}

// The common part of jit and value_and_grad: the function, passes and device.
Value make_compiled(Interpreter& in, CallArgs& a, SourceLoc loc, bool grad) {
  const char* who = grad ? "value_and_grad" : "jit";
  if (a.pos.size() != 1)
    in.fail(loc, std::string(who) + "(f, ...) takes the function to compile and keyword options, got " +
                     std::to_string(a.pos.size()) + " positional arguments");
  std::set<std::string> known = {"passes", "device", "donate_argnums", "cuda_graph"};
  if (grad) known.insert({"argnums", "has_aux"});
  for (const auto& [k, v] : a.kw)
    if (!known.count(k)) {
      std::string list;
      for (const auto& n : known) list += (list.empty() ? "" : ", ") + n;
      in.fail(loc, std::string(who) + "() got an unexpected keyword argument '" + k + "' (its options: " + list + ")");
    }
  Value fn = a.pos[0];
  if (fn.is(VT::Compiled)) fn = fn.as<CompiledObj>()->fn;  // jit(jit(f)) compiles f
  if (!fn.is(VT::Function))
    in.fail(loc, std::string(who) + "(f): f must be a function defined in the language, got a " + type_name(fn.type()));
  auto* c = new CompiledObj();
  Value out(c);
  c->fn = fn;
  c->name = std::string(who) + "(" + fn.as<FunctionObj>()->info->name + ")";
  c->grad = grad;
  if (const Value* p = kwarg(a, "passes"); p && !p->is_none()) {
    if (p->is(VT::Str)) {
      c->passes = split_pass_list(p->as<StrObj>()->s);
    } else if (p->is(VT::List) || p->is(VT::Tuple)) {
      for (const Value& x : p->is(VT::List) ? p->as<ListObj>()->items : p->as<TupleObj>()->items) {
        if (!x.is(VT::Str)) in.fail(loc, std::string(who) + "(passes=...): each pass is a string, got " + repr(x));
        c->passes.push_back(x.as<StrObj>()->s);
      }
    } else {
      in.fail(loc, std::string(who) + "(passes=...) is a string like \"fuse,del_last_used\" or a list of pass names, got " +
                       repr(*p));
    }
  }
  for (const std::string& e : c->passes) {
    PassSpec spec;
    std::string bad = parse_pass_spec(e, &spec);
    if (!bad.empty()) in.fail(loc, std::string(who) + "(passes=...): " + bad);
    if (!in.find_pass(spec.name)) {
      std::vector<std::string> names = in.pass_names();
      in.fail(loc, std::string(who) + "(passes=...): no pass is named '" + spec.name + "'" + did_you_mean(spec.name, names));
    }
    if (spec.name == "grad" && !grad)
      in.fail(loc, "jit(passes=...) cannot run grad: its forward and backward traces are not one function to call; "
                   "value_and_grad(f) runs grad and returns the gradients");
  }
  if (grad) {
    // grad first, unless the list places it (passes that must follow it, like checkpoint, may
    // then come after); its options are set from argnums and has_aux at the first call.
    bool placed = false;
    for (std::string& e : c->passes) {
      PassSpec spec;
      parse_pass_spec(e, &spec);
      if (spec.name != "grad") continue;
      if (!spec.options.empty())
        in.fail(loc, "value_and_grad(passes=...): grad's options come from argnums and has_aux; give 'grad' without options");
      if (placed) in.fail(loc, "value_and_grad(passes=...) names grad twice");
      placed = true;
    }
    if (!placed) c->passes.insert(c->passes.begin(), "grad");
  }
  std::string order = pass_order_error(c->passes);
  if (!order.empty()) in.fail(loc, std::string(who) + "(passes=...): " + order);
  if (const Value* d = kwarg(a, "device"); d && !d->is_none()) {
    if (!d->is(VT::Str)) in.fail(loc, std::string(who) + "(device=...) is a string like \"cpu\", got " + repr(*d));
    c->device = d->as<StrObj>()->s;
    c->device_given = true;
    if (c->device != "cpu") c->backend = in.device_backend(c->device, loc);  // a missing GPU is an error here
  }
  if (const Value* d = kwarg(a, "donate_argnums"); d && !d->is_none())
    c->donate = int_list(in, *d, std::string(who) + "(donate_argnums=...)", loc, nullptr);
  if (const Value* g = kwarg(a, "cuda_graph"); g && !g->is_none()) {
    if (!g->is(VT::Bool)) in.fail(loc, std::string(who) + "(cuda_graph=...) is True or False, got " + repr(*g));
    c->cuda_graph = g->as_bool();  // (on the CPU it changes nothing)
  }
  if (grad) {
    if (const Value* n = kwarg(a, "argnums"); n && !n->is_none())
      c->argnums = int_list(in, *n, "value_and_grad(argnums=...)", loc, &c->argnums_tuple);
    if (c->argnums.empty()) in.fail(loc, "value_and_grad(argnums=()) asks for no gradient");
    if (const Value* h = kwarg(a, "has_aux"); h && !h->is_none()) {
      if (!h->is(VT::Bool)) in.fail(loc, "value_and_grad(has_aux=...) is True or False, got " + repr(*h));
      c->has_aux = h->as_bool();
    }
  }
  return out;
}

std::string param_name(const FunctionObj& f, size_t i) {
  const auto& ps = *f.info->params;
  if (i < ps.size() && ps[i].kind == ast::Param::Kind::Normal) return ps[i].name;
  return "arg" + std::to_string(i);
}

std::shared_ptr<CompiledProgram> compile(Interpreter& in, CompiledObj& c, DeviceBackend* b, const CallArgs& args,
                                         const Flat& flat, SourceLoc loc) {
  const FunctionObj& fn = *c.fn.as<FunctionObj>();
  auto prog = std::make_shared<CompiledProgram>();
  auto t0 = Clock::now();
  auto t = std::make_shared<ir::Trace>();
  t->name = fn.info->name;
  std::vector<Value> proxies;
  for (size_t i = 0; i < flat.types.size(); ++i) {
    auto p = std::make_shared<ir::Proxy>();
    std::string base = identifier(flat.names[i]), name = base;
    for (int k = 2; !t->names.insert(name).second; ++k) name = base + "_" + std::to_string(k);
    p->name = name;
    p->type = flat.types[i];
    p->type.device = b ? b->device() : "cpu";
    p->auto_named = false;
    t->inputs.push_back(p);
    proxies.push_back(make<ProxyObj>(p));
  }
  CallArgs traced;
  size_t next = 0;
  auto leaf = [&](size_t i) { return proxies[i]; };
  for (const Value& v : args.pos) traced.pos.push_back(rebuild(v, &next, leaf));
  for (const auto& [k, v] : args.kw) traced.kw.emplace_back(k, rebuild(v, &next, leaf));
  std::vector<std::string> passes = c.passes;
  if (c.grad) {
    // Which tensors each differentiated argument holds; grad differentiates those only.
    std::string wrt;
    for (int64_t k : c.argnums) {
      if (k < 0 || k >= static_cast<int64_t>(args.pos.size()))
        in.fail(loc, c.name + ": argnums names argument " + std::to_string(k) + ", but the call passes " +
                         std::to_string(args.pos.size()) + " positional arguments");
      std::vector<size_t> leaves;
      for (size_t i = 0; i < flat.types.size(); ++i) {
        if (flat.arg_of[i] != k) continue;
        if (!rt::is_float(flat.types[i].dtype)) {
          const std::string pn = param_name(fn, static_cast<size_t>(k)), dt = rt::dtype_name(flat.types[i].dtype);
          const std::string a = (dt[0] == 'i' || dt[0] == 'u') ? "an " : "a ";
          in.fail(loc, c.name + ": argument " + std::to_string(k) + " ('" + pn + "') " +
                           (flat.names[i] == pn ? "is " : "holds '" + flat.names[i] + "', ") + a + dt +
                           " tensor, which has no gradient; leave it out of argnums or pass it as another argument");
        }
        leaves.push_back(i);
        wrt += (wrt.empty() ? "" : " ") + t->inputs[i]->name;
      }
      if (leaves.empty())
        in.fail(loc, c.name + ": argument " + std::to_string(k) + " ('" + param_name(fn, static_cast<size_t>(k)) +
                         "') holds no tensor to differentiate");
      prog->grad_leaves.push_back(std::move(leaves));
    }
    for (std::string& e : passes)
      if (e == "grad") e = "grad(wrt='" + wrt + "'" + (c.has_aux ? ", aux=True" : "") + ")";
  }
  // Tensors the function closes over (a global weight) become inputs after the arguments',
  // passed as they were when traced (as JAX captures constants).
  std::map<const void*, ir::ProxyPtr> seen;
  auto capture = [&](const rt::Tensor& x) -> ir::ProxyPtr {
    if (!x.defined()) in.fail(loc, c.name + ": the function uses a tensor that was donated to a compiled call and holds no value");
    auto it = seen.find(x.data());
    if (it != seen.end() && it->second->type.shape == x.shape() && it->second->type.dtype == x.dtype()) return it->second;
    auto p = std::make_shared<ir::Proxy>();
    std::string name = "captured_" + std::to_string(prog->captured.size());
    while (!t->names.insert(name).second) name += "_";
    p->name = name;
    p->type = ir::TensorType{x.dtype(), x.shape(), b ? b->device() : "cpu"};
    p->auto_named = false;
    t->inputs.push_back(p);
    prog->captured.push_back(x);
    seen[x.data()] = p;
    return p;
  };
  in.record_call(fn, traced, *t, loc, capture);
  auto errs = ir::verify(*t);
  if (!errs.empty()) in.fail(loc, c.name + ": internal error: the trace is invalid: " + errs[0].message + "; please report this");
  prog->trace_ms = ms_since(t0);

  auto t1 = Clock::now();
  try {
    PassOptions po;
    po.verify = false;  // the stdlib's passes are verified by the tests; a user's by tracer run --verify
    prog->prog = passes.empty() ? Traces{t} : run_passes(in, {t}, passes, po, nullptr);
  } catch (const PassError& e) {
    in.fail(loc, c.name + ": " + e.diag.message);
  }
  prog->pass_ms = ms_since(t1);
  if (c.grad && prog->prog.size() != 2)
    in.fail(loc, c.name + ": the passes left " + std::to_string(prog->prog.size()) + " traces, not grad's forward and backward");
  if (!c.grad && prog->prog.size() != 1)
    in.fail(loc, c.name + ": the passes left " + std::to_string(prog->prog.size()) + " traces, not one to call");
  if (b) {
    try {
      DeviceBackend::Options opts;
      opts.cuda_graph = c.cuda_graph;
      opts.name = c.name;
      prog->device_prog = b->prepare(prog->prog, opts);  // every kernel compiled here, once
      for (const rt::Tensor& x : prog->captured) prog->captured_dev.push_back(b->upload(x));
    } catch (const std::exception& e) {
      in.fail(loc, c.name + ": on " + b->device() + ": " + e.what());
    }
  }
  return prog;
}

// value_and_grad's result: (value, gradients), the gradients shaped like the arguments argnums
// names (a tuple of them when argnums was one); grad(i) is the gradient of flattened input i,
// every other value of those arguments becomes None.
template <class G>
Value value_and_grads(const CompiledObj& c, const CompiledProgram& prog, const CallArgs& args, Value value, const G& grad) {
  std::vector<Value> per_arg;
  for (size_t k = 0; k < c.argnums.size(); ++k) {
    const std::vector<size_t>& leaves = prog.grad_leaves[k];
    size_t next = 0;
    auto leaf = [&](size_t i) { return grad(leaves[i]); };
    per_arg.push_back(rebuild(args.pos[static_cast<size_t>(c.argnums[k])], &next, leaf, true));
  }
  Value g = c.argnums_tuple ? make<TupleObj>(std::move(per_arg)) : per_arg[0];
  return make<TupleObj>(std::vector<Value>{std::move(value), g});
}

// The values of a device program's outputs: its proxies' tensors stay on the device.
Value device_value(const ir::Arg& a, const DeviceBackend::Program::Values& vals, DeviceBackend* b) {
  switch (a.kind) {
    case ir::Arg::Kind::Proxy: {
      auto it = vals.find(a.proxy.get());
      if (it == vals.end()) throw std::runtime_error("the program returned no value for '" + a.proxy->name + "'");
      return make<TensorObj>(it->second, b);
    }
    case ir::Arg::Kind::Tuple:
    case ir::Arg::Kind::List: {
      std::vector<Value> xs;
      for (const auto& x : a.items) xs.push_back(device_value(x, vals, b));
      return a.kind == ir::Arg::Kind::List ? make<ListObj>(std::move(xs)) : make<TupleObj>(std::move(xs));
    }
    case ir::Arg::Kind::Dict: {
      auto* d = new DictObj();
      Value v(d);
      for (size_t i = 0; i < a.items.size(); ++i) d->set(str_value(a.keys[i]), device_value(a.items[i], vals, b));
      return v;
    }
    default: return from_arg(a);
  }
}

// A call on the device: the program runs there, and its results stay there (the next call takes
// them without a copy; reading one's values copies it to the host).
Value call_on_device(Interpreter& in, CompiledObj& c, DeviceBackend* b, CompiledProgram& prog, Flat& flat, const CallArgs& args,
                     const std::vector<ir::ProxyPtr>& input_types, SourceLoc loc) {
  std::vector<rt::cuda::DeviceTensor> inputs;
  inputs.reserve(flat.dev.size() + prog.captured_dev.size());
  for (auto& d : flat.dev) inputs.push_back(*d);
  flat.dev.clear();  // a donated argument's tensor: the program holds its only reference
  inputs.insert(inputs.end(), prog.captured_dev.begin(), prog.captured_dev.end());
  const ir::Trace& fw = *prog.prog[0];
  DeviceBackend::Program::Values fv, bv;
  auto t0 = Clock::now();
  Value result;
  try {
    prog.device_prog->run(std::move(inputs), in.exec_context(), &fv, c.grad ? &bv : nullptr);
    if (!c.grad) {
      result = device_value(fw.output, fv, b);
    } else {
      const ir::Trace& bw = *prog.prog[1];
      result = value_and_grads(c, prog, args, device_value(fw.output.items[0], fv, b), [&](size_t i) -> Value {
        const ir::Arg& g = bw.output.items[i];
        if (g.kind == ir::Arg::Kind::Proxy) return device_value(g, bv, b);
        // No path from this input to the loss: zeros, as on the CPU.
        const ir::TensorType& x = input_types[i]->type;
        return make<TensorObj>(b->upload(rt::full(x.shape, rt::Scalar{0.0, 0, false}, x.dtype, &in.allocator())), b);
      });
    }
  } catch (const ir::ExecError& e) {
    in.fail(loc, c.name + ": on " + b->device() + ": " + e.message + (e.stmt.empty() ? "" : " (in: " + e.stmt + ")"));
  } catch (const std::exception& e) {
    in.fail(loc, c.name + ": on " + b->device() + ": " + e.what());
  }
  c.run_ms += ms_since(t0);
  return result;
}

}  // namespace

Value builtin_jit(Interpreter& in, CallArgs& a, SourceLoc loc) { return make_compiled(in, a, loc, false); }
Value builtin_value_and_grad(Interpreter& in, CallArgs& a, SourceLoc loc) { return make_compiled(in, a, loc, true); }

Value call_compiled(Interpreter& in, CompiledObj& c, CallArgs args, SourceLoc loc) {
  if (in.tracing()) {
    // Inside a traced function a jit-compiled one is inlined: its statements join the trace.
    if (c.grad)
      in.fail(loc, c.name + " cannot be called inside a traced function (grad of a trace inside a trace); "
                            "call it outside, on concrete tensors");
    return in.call(c.fn, std::move(args), loc);
  }
  const FunctionObj& fn = *c.fn.as<FunctionObj>();
  // First without names (the steps of a loop); with them where the call compiles or fails.
  static const std::string no_path;
  auto flatten = [&](bool names, Flat* flat) {
    Flattener flattener(in, c.name, loc, names);
    for (size_t i = 0; i < args.pos.size(); ++i)
      flattener.add(args.pos[i], names ? param_name(fn, i) : no_path, static_cast<int64_t>(i), flat);
    for (const auto& [k, v] : args.kw) {
      flat->key += "|" + k + "=";
      flattener.add(v, k, -1, flat);
    }
    flat->key += "#" + std::to_string(args.pos.size());
    return !flattener.failed();
  };
  Flat flat;
  flat.key.reserve(c.key_bytes);
  bool named = false;
  if (!flatten(false, &flat)) {
    flat = Flat();
    flatten(true, &flat);  // (reports the problem)
    named = true;
  }
  // Where it runs: the device jit was given; else where its arguments are (as in JAX, the
  // computation follows the data), else the interpreter's default device.
  DeviceBackend* b = c.backend;
  if (!c.device_given) {
    for (TensorObj* t : flat.objs)
      if (t->on_device()) {
        b = t->backend;
        break;
      }
    if (!b && in.default_device != "cpu") b = in.device_backend(in.default_device, loc);
  }
  if (b) flat.key += "@" + b->device();
  c.key_bytes = std::max(c.key_bytes, flat.key.size());
  ++c.calls;
  std::shared_ptr<CompiledProgram> prog;
  if (auto it = c.cache.find(flat.key); it != c.cache.end()) {
    prog = it->second;
  } else {
    if (!named) {
      Flat full;
      flatten(true, &full);
      flat.types = std::move(full.types);
      flat.names = std::move(full.names);
      flat.arg_of = std::move(full.arg_of);
      named = true;
    }
    prog = compile(in, c, b, args, flat, loc);
    c.cache.emplace(flat.key, prog);
    ++c.compiles;
    c.trace_ms += prog->trace_ms;
    c.pass_ms += prog->pass_ms;
  }
  c.last = prog;
  auto name_of = [&](size_t i) {  // (for an error message)
    if (!named) {
      Flat full;
      flatten(true, &full);
      flat.names = std::move(full.names);
      named = true;
    }
    return flat.names[i];
  };
  // The arguments' values where the program runs, taken before donation empties the caller's.
  for (size_t i = 0; i < flat.objs.size(); ++i) {
    TensorObj& t = *flat.objs[i];
    if (!b) {
      try {
        flat.tensors.push_back(t.host(&in.allocator()));
      } catch (const std::exception& e) {
        in.fail(loc, c.name + ": argument '" + name_of(i) + "' could not be copied from " + t.device() + ": " + e.what());
      }
    } else if (t.on_device() && t.backend == b) {
      if (t.dev->buffer && !t.dev->buffer->stale.empty()) in.fail(loc, c.name + ": argument '" + name_of(i) + "': " + t.dev->buffer->stale);
      flat.dev.push_back(t.dev);
    } else if (t.on_device()) {
      in.fail(loc, c.name + ": argument '" + name_of(i) + "' is on " + t.device() + ", but the function runs on " +
                       b->device() + " (t.to(\"" + b->device() + "\") moves it)");
    } else {
      try {
        flat.dev.push_back(std::make_shared<rt::cuda::DeviceTensor>(b->upload(t.t)));
      } catch (const std::exception& e) {
        in.fail(loc, c.name + ": argument '" + name_of(i) + "' could not be copied to " + b->device() + ": " + e.what());
      }
    }
  }
  flat.objs.clear();
  // Donated arguments: their tensors move into the call (the caller's values are left empty),
  // so the executor may write the results over them; a tensor also passed undonated stays.
  for (int64_t k : c.donate) {
    if (k < 0 || k >= static_cast<int64_t>(args.pos.size()))
      in.fail(loc, c.name + ": donate_argnums names argument " + std::to_string(k) + ", but the call passes " +
                       std::to_string(args.pos.size()) + " positional arguments");
    donate_tensors(args.pos[static_cast<size_t>(k)]);
  }
  const std::vector<ir::ProxyPtr>& input_types = prog->prog[0]->inputs;  // (not copied: hundreds a step)
  if (b) return call_on_device(in, c, b, *prog, flat, args, input_types, loc);
  flat.tensors.insert(flat.tensors.end(), prog->captured.begin(), prog->captured.end());
  auto t0 = Clock::now();
  const ir::Trace& fw = *prog->prog[0];
  ir::Arg out, grads;
  try {
    out = ir::execute(fw, std::move(flat.tensors), in.exec_context());
    if (c.grad) grads = ir::execute_backward(fw, *prog->prog[1], out, in.exec_context());
  } catch (const ir::ExecError& e) {
    in.fail(loc, c.name + ": " + e.message + (e.stmt.empty() ? "" : " (in: " + e.stmt + ")"));
  }
  c.run_ms += ms_since(t0);
  if (!c.grad) return from_arg(out);
  return value_and_grads(c, *prog, args, from_arg(out.items[0]), [&](size_t i) -> Value {
    const ir::Arg& g = grads.items[i];
    if (g.kind == ir::Arg::Kind::Tensor) return make<TensorObj>(g.tensor);
    // No path from this input to the loss: its gradient is zeros, as JAX and PyTorch's
    // autograd.grad(materialize_grads=True) give.
    const ir::TensorType& x = input_types[i]->type;
    return make<TensorObj>(rt::full(x.shape, rt::Scalar{0.0, 0, false}, x.dtype, &in.allocator()));
  });
}

bool compiled_attr(const CompiledObj& c, const std::string& name, Value* out) {
  if (name == "compiles") *out = Value::integer(c.compiles);
  else if (name == "calls") *out = Value::integer(c.calls);
  else if (name == "trace_ms") *out = Value::number(c.trace_ms);
  else if (name == "pass_ms") *out = Value::number(c.pass_ms);
  else if (name == "run_ms") *out = Value::number(c.run_ms);
  else if (name == "cache_size") *out = Value::integer(static_cast<int64_t>(c.cache.size()));
  else if (name == "graph_replays") *out = Value::integer(c.last && c.last->device_prog ? static_cast<int64_t>(c.last->device_prog->graph_replays()) : 0);
  else if (name == "graph_status")
    *out = str_value(!c.cuda_graph ? "off" : c.last && c.last->device_prog ? c.last->device_prog->graph_status() : "not on a GPU");
  else if (name == "__name__") *out = str_value(c.name);
  else if (name == "traces") {
    std::vector<Value> ts;
    if (c.last)
      for (const auto& t : c.last->prog) ts.push_back(make<TraceObj>(t));
    *out = make<ListObj>(std::move(ts));
  } else {
    return false;
  }
  return true;
}

DeviceBackend* Interpreter::device_backend(const std::string& name, SourceLoc loc) {
  if (name != "cuda" && name.rfind("cuda:", 0) != 0)
    fail(loc, "device '" + name + "' is not known: 'cpu', 'cuda' or 'cuda:N'");
  auto it = backends_.find(name);
  if (it != backends_.end()) return it->second;
  if (!device_opener_)
    fail(loc, "device '" + name + "': this host has no GPU backend (tracer's CLI and the Session API install one; an "
              "interpreter embedded alone runs on the CPU)");
  std::string why;
  DeviceBackend* b = device_opener_(name, &why);
  if (!b) fail(loc, "device '" + name + "' cannot be opened: " + why);
  backends_[name] = b;
  return b;
}

}  // namespace tracer::interp
