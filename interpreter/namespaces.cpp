// The namespaces a program starts with: builtins (interpreter/builtins.cpp's functions), and
// those that map Thunder's module prefixes (prims, ltorch, torch, torch.nn.functional,
// torch.special, Tensor, dtypes, thunder, ...) to ops; hosts' native functions and ops.
#include "interpreter/builtins.h"
#include "interpreter/interp.h"
#include "interpreter/trace_api.h"
#include "stdlib/stdlib.h"

namespace tracer::interp {

static Value ns(const std::string& name) { return new_namespace(name); }
static NamespaceObj& nsref(const Value& v) { return namespace_ref(v); }

void Interpreter::register_native(std::shared_ptr<const NativeDef> def) {
  std::string name = def->name;
  nsref(builtins_).members[name] = make<BuiltinObj>(std::move(def));
}

const ir::OpDecl& Interpreter::register_op(ir::OpDecl op) {
  host_ops_.push_back(std::move(op));
  const ir::OpDecl& d = host_ops_.back();
  NamespaceObj& b = nsref(builtins_);
  auto it = b.members.find("native");
  if (it == b.members.end()) it = b.members.emplace("native", ns("native")).first;
  nsref(it->second).members[d.name] = make<OpObj>(&d);
  return d;
}

void Interpreter::set_argv(const std::vector<std::string>& argv) {
  std::vector<Value> xs;
  for (const std::string& a : argv) xs.push_back(str_value(a));
  nsref(builtins_).members["argv"] = make<ListObj>(std::move(xs));
}

void Interpreter::install_builtins() {
  builtins_ = ns("builtins");
  NamespaceObj& b = nsref(builtins_);
  for (const BuiltinDef* d : builtin_defs()) b.members[d->name] = make<BuiltinObj>(d);
  for (const BuiltinDef* d : trace_builtins()) b.members[d->name] = make<BuiltinObj>(d);
  // Each module sets its own (load); this is what a chunk without one sees.
  b.members["__name__"] = str_value("__main__");
  b.members["argv"] = make<ListObj>(std::vector<Value>{});
  b.members["Ellipsis"] = Value::ellipsis();  // as Thunder prints ... in a getitem's key

  Value prims = ns("prims");
  for (const ir::OpDecl& op : ir::all_ops()) {
    Value v = make<OpObj>(&op);
    nsref(prims).members[op.name] = v;
    for (const std::string& a : op.aliases) nsref(prims).members[a] = v;
  }
  ltorch_ = ns("ltorch");
  nsref(ltorch_).fallback = &nsref(prims);

  Value dtypes = ns("dtypes");
  for (int i = 0; i < rt::kDTypeCount; ++i) {
    auto d = static_cast<rt::DType>(i);
    b.members[rt::dtype_name(d)] = Value::dtype(d);
    nsref(dtypes).members[rt::dtype_name(d)] = Value::dtype(d);
  }
  const char* long_names[] = {"float64", "float32", "float16", "bfloat16", "int64", "int32", "int8", "uint8",
                              "bool",    "float",   "double",  "half",     "long",  "int",   "bool8"};
  for (const char* n : long_names) nsref(dtypes).members[n] = Value::dtype(*rt::dtype_from_name(n));
  for (const char* n : {"float64", "float32", "float16", "bfloat16", "int64", "int32", "int8", "uint8"})
    b.members[n] = Value::dtype(*rt::dtype_from_name(n));

  // torch.*, torch.nn.functional.* and Tensor.* resolve to ltorch; dtype names live there too.
  Value torch = ns("torch");
  nsref(torch).fallback = &nsref(dtypes);
  Value functional = ns("torch.nn.functional");
  nsref(functional).fallback = &nsref(ltorch_);
  Value nn = ns("torch.nn");
  nsref(nn).members["functional"] = functional;
  nsref(torch).members["nn"] = nn;
  // torch.special.X: ltorch's X (digamma, zeta, ndtri, erfinv, polygamma, psi, gammaln, ...).
  Value special = ns("torch.special");
  nsref(special).fallback = &nsref(ltorch_);
  nsref(torch).members["special"] = special;
  // torch.linalg.X: ltorch's X (vector_norm, matrix_norm, norm).
  Value linalg = ns("torch.linalg");
  nsref(linalg).fallback = &nsref(ltorch_);
  nsref(torch).members["linalg"] = linalg;
  // torch.ops.aten.X, as Thunder's torch executor prints ATen's operators: ATen's own names
  // (aten_X of stdlib/executors.trace), else ltorch's X.
  Value ops = ns("torch.ops"), aten = ns("torch.ops.aten");
  nsref(aten).fallback = &nsref(ltorch_);
  nsref(aten).overload_packets = true;
  nsref(ops).members["aten"] = aten;
  nsref(torch).members["ops"] = ops;
  // torch._C._set_grad_enabled (a Thunder execution trace's), torch.set_grad_enabled
  Value torch_c = ns("torch._C");
  nsref(torch_c).members["_set_grad_enabled"] = b.members["_set_grad_enabled"];
  nsref(torch).members["_C"] = torch_c;
  nsref(torch).members["set_grad_enabled"] = b.members["_set_grad_enabled"];
  nsref(ltorch_).members["_set_grad_enabled_with_warning"] = b.members["_set_grad_enabled"];
  nsref(torch).members["device"] = b.members["device"];
  nsref(torch).members["no_grad"] = b.members["no_grad"];
  nsref(torch).members["autocast"] = b.members["autocast"];
  nsref(torch).members["Tensor"] = ltorch_;  // from torch import Tensor; Tensor.expand(...)
  nsref(dtypes).fallback = &nsref(ltorch_);
  Value devices = ns("devices");
  nsref(devices).members["Device"] = b.members["device"];
  Value math = math_namespace();
  Value time = ns("time");
  for (const BuiltinDef* d : time_builtin_defs()) nsref(time).members[d->name] = make<BuiltinObj>(d);
  b.members["time"] = time;
  Value thunder = ns("thunder");
  for (const char* n : {"no_autocast", "no_grad"}) nsref(thunder).members[n] = b.members[n];
  // thunder.distributed.prims.all_gather(...) in printouts: the collectives among the prims.
  Value thunder_dist = ns("thunder.distributed");
  nsref(thunder_dist).members["prims"] = prims;
  nsref(thunder).members["distributed"] = thunder_dist;

  b.members["prims"] = prims;
  b.members["ltorch"] = ltorch_;
  b.members["torch"] = torch;
  b.members["Tensor"] = ltorch_;
  b.members["dtypes"] = dtypes;
  b.members["devices"] = devices;
  b.members["math"] = math;
  b.members["thunder"] = thunder;
  dist_ = ns("dist");
  for (const BuiltinDef* d : dist_builtin_defs()) nsref(dist_).members[d->name] = make<BuiltinObj>(d);
  b.members["dist"] = dist_;
  optim_ = ns("optim");  // stdlib/optim.trace
  b.members["optim"] = optim_;
  // Bare names: Python's builtins, Thunder's (executors' operators, prologue guards:
  // stdlib/thunder.trace), then ltorch's ops, then prims (ltorch's fallback).
  executors_ = ns("executors");
  // Thunder's torch executor prints a prim it runs itself as torch_<prim>_prim_impl.
  for (const ir::OpDecl& op : ir::all_ops()) nsref(executors_).members["torch_" + op.name + "_prim_impl"] = make<OpObj>(&op);
  nsref(executors_).fallback = &nsref(ltorch_);
  nsref(thunder).fallback = &nsref(executors_);
  b.members["operator"] = ns("operator");
  b.members["nvfuser"] = ns("nvfuser");
  b.fallback = &nsref(executors_);
}

}  // namespace tracer::interp
