// The standard library's loading: its modules (stdlib/*.trace) run into the builtin namespaces,
// Thunder's and nvFuser's names wired where their printouts look for them, the standard passes
// loaded on first use, and `import a.b.c` resolved to those namespaces.
#include <map>
#include <stdexcept>

#include "interpreter/builtins.h"
#include "interpreter/interp.h"
#include "stdlib/stdlib.h"

namespace tracer::interp {

namespace {

Value ns(const std::string& name) { return new_namespace(name); }
NamespaceObj& nsref(const Value& v) { return namespace_ref(v); }

}  // namespace

const Value* Interpreter::find_pass(const std::string& name) {
  load_stdlib_passes();
  auto it = passes_.find(name);
  return it == passes_.end() ? nullptr : &it->second;
}

std::vector<std::string> Interpreter::pass_names() {
  load_stdlib_passes();
  std::vector<std::string> out;
  for (const auto& kv : passes_) out.push_back(kv.first);
  return out;
}

Value Interpreter::resolve_module_path(const std::string& path, SourceLoc loc) {
  std::string root = path.substr(0, path.find('.'));
  const Value* v = builtins().lookup(root);
  if (root == "thunder") v = builtins().lookup("thunder");
  if (!v || !v->is(VT::Namespace)) fail(loc, "no module named '" + path + "'");
  if (root == "thunder") {
    // thunder.core.devices, thunder.core.dtypes, thunder.core.prims and thunder.torch are our
    // devices, dtypes, prims and ltorch (`import thunder.core.devices as devices`, then
    // `devices.Device("cuda:0")`); every other path is Thunder's executors and helpers, one flat
    // namespace.
    const std::string leaf = path.substr(path.rfind('.') + 1);
    static const std::map<std::string, std::string> same = {
        {"devices", "devices"}, {"dtypes", "dtypes"}, {"prims", "prims"}, {"torch", "ltorch"}};
    if (auto s = same.find(leaf); s != same.end() && path != "thunder")
      if (const Value* m = builtins().lookup(s->second); m && m->is(VT::Namespace)) return *m;
    return *v;
  }
  Value cur = *v;
  size_t pos = root.size();
  while (pos < path.size()) {
    size_t next = path.find('.', pos + 1);
    std::string part = path.substr(pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1);
    auto it = nsref(cur).members.find(part);
    if (it == nsref(cur).members.end() || !it->second.is(VT::Namespace)) fail(loc, "no module named '" + path + "'");
    cur = it->second;
    pos = next == std::string::npos ? path.size() : next;
  }
  return cur;
}

std::shared_ptr<Module> Interpreter::load_stdlib_file(const stdlib::File& file) {
  DiagnosticList diags;
  auto m = parse(file.path, file.text, diags, nullptr, file.text);
  if (!m) throw std::runtime_error("internal error: the embedded stdlib does not parse:\n" + diags.render_all(sm_));
  m->composites = file.module == std::string("ltorch") || file.module == std::string("dist");
  m->name = file.module;
  m->names_values = false;
  stdlib_files_.push_back(m->file);
  modules_.push_back(m);
  try {
    run_module(*m);
  } catch (const ScriptError& e) {
    throw std::runtime_error("internal error: the embedded stdlib fails to load:\n" + render(sm_, to_diagnostic(e)));
  }
  return m;
}

// The ops load with the interpreter; the standard passes when a pass is first looked up, so
// that interpreters that run no pass do not pay for parsing them.
// Thunder's names (stdlib/thunder.trace): bare, as thunder.NAME, its prologues' guards as
// prims.check_*, its primitives the table lacks (prims_X) as prims.X, its cache info as thunder._get_cache_info, Python's operator.X; thunder.core and
// thunder.torch as its printouts spell them.
void Interpreter::define_op_name(const std::string& name, Value fn) { nsref(executors_).members[name] = std::move(fn); }

// Thunder's functions of a module (stdlib/thunder.trace, stdlib/executors.trace): operator_X as
// operator.X, prims_X as prims.X (and torch_X_prim_impl), aten_X as torch.ops.aten.X, the rest
// bare and as thunder.NAME (check_* also as prims.check_*).
void Interpreter::install_thunder_functions(const Module& m) {
  NamespaceObj& thunder = nsref(*builtins().lookup("thunder"));
  NamespaceObj& prims = nsref(*builtins().lookup("prims"));
  NamespaceObj& op = nsref(*builtins().lookup("operator"));
  NamespaceObj& torch = nsref(*builtins().lookup("torch"));
  NamespaceObj& aten = nsref(nsref(torch.members.at("ops")).members.at("aten"));
  NamespaceObj& bare = nsref(executors_);
  for (const auto& [k, v] : m.globals) {
    if (k.empty() || k[0] == '_' || !v.is(VT::Function)) continue;
    if (k == "prims_update_aliases" || k == "update_aliases") alias_readers_.insert(v.obj());
    if (k.rfind("operator_", 0) == 0) {
      op.members[k.substr(9)] = v;
      continue;
    }
    if (k.rfind("aten_", 0) == 0) {
      aten.members[k.substr(5)] = v;
      continue;
    }
    if (k.rfind("prims_", 0) == 0) {  // Thunder's primitives the table lacks, as prims.X
      prims.members[k.substr(6)] = v;
      // and as the torch executor prints them (torch_pad_prim_impl), as the table's are
      bare.members["torch_" + k.substr(6) + "_prim_impl"] = v;
      continue;
    }
    bare.members[k] = v;
    thunder.members[k == "get_cache_info" ? "_get_cache_info" : k] = v;
    if (k.rfind("check_", 0) == 0) prims.members[k] = v;
  }
}

void Interpreter::install_thunder_names(const Module& m) {
  install_thunder_functions(m);
  NamespaceObj& thunder = nsref(*builtins().lookup("thunder"));
  // thunder.core.module.get_thunder_module(fn), as a module's prologue names it; thunder.core.X
  // for prims, devices and dtypes.
  Value core = ns("thunder.core"), module = ns("thunder.core.module");
  for (const char* k : {"ThunderModule", "get_thunder_module"}) nsref(module).members[k] = m.globals.at(k);
  nsref(core).members["module"] = module;
  for (const char* k : {"prims", "devices", "dtypes"}) nsref(core).members[k] = *builtins().lookup(k);
  thunder.members["core"] = core;
  // thunder.torch is ltorch; thunder.torch.experimental.dtensor_prims_and_impl.X the DTensor
  // helpers (construct_dtensor, ...), among Thunder's names.
  // (dtensor_prims_and_impl looks names up in thunder through its fallback, which does not hold
  // it: a member would make a cycle of references that is never freed.)
  Value torch = ns("thunder.torch"), experimental = ns("thunder.torch.experimental");
  Value dtensor = ns("thunder.torch.experimental.dtensor_prims_and_impl");
  nsref(torch).fallback = &nsref(ltorch_);
  nsref(dtensor).fallback = &thunder;
  nsref(experimental).members["dtensor_prims_and_impl"] = dtensor;
  // dtensor_torch_and_aten_ops (dtensor_torch_and_prims before it): the DTensor ops' decompositions
  // call ATen's ops on local tensors as aten_<op> (aten_mul), which are ltorch's <op>; the DTensor
  // ops themselves (dtensor_mul) run their printed decompositions.
  for (const char* name : {"dtensor_torch_and_aten_ops", "dtensor_torch_and_prims"}) {
    Value aten = ns(std::string("thunder.torch.experimental.") + name);
    nsref(aten).fallback = &nsref(ltorch_);
    nsref(aten).fallback_prefix = "aten_";
    for (const auto& [k, v] : m.globals)
      if (k.rfind("dtensor_", 0) == 0 && v.is(VT::Function)) nsref(aten).members[k] = v;  // dtensor_mul_prim, ...
    nsref(experimental).members[name] = aten;
  }
  nsref(torch).members["experimental"] = experimental;
  thunder.members["torch"] = torch;
}

// nvFuser's front end (stdlib/nvfuser.trace): `from nvfuser import FusionDefinition, DataType`;
// a printed definition names FusionDefinition and DataType bare.
void Interpreter::install_nvfuser_names(const Module& m) {
  NamespaceObj& nv = nsref(*builtins().lookup("nvfuser"));
  for (const auto& [k, v] : m.globals) {
    if (k.empty() || k[0] == '_' || !(v.is(VT::Function) || v.is(VT::Namespace))) continue;
    nv.members[k] = v;
    if (k == "FusionDefinition" || k == "DataType") nsref(executors_).members[k] = v;
  }
}

void Interpreter::load_stdlib() {
  for (const auto& file : stdlib::files()) {
    std::string mod = file.module;
    if (mod.rfind("passes.", 0) == 0) continue;
    auto m = load_stdlib_file(file);
    if (mod == "thunder") {
      install_thunder_names(*m);
      continue;
    }
    if (mod == "thunder_executors") {
      install_thunder_functions(*m);
      continue;
    }
    if (mod == "nvfuser") {
      install_nvfuser_names(*m);
      continue;
    }
    NamespaceObj& target = mod == "ltorch" ? nsref(ltorch_) : mod == "dist" ? nsref(dist_) : mod == "optim" ? nsref(optim_) : nsref(builtins_);
    for (const auto& [k, v] : m->globals)
      if (!k.empty() && k[0] != '_' && v.is(VT::Function)) target.members[k] = v;
    // A module's __public__ lists the names PyTorch spells with a leading underscore that are
    // public all the same (torch._grouped_mm): they are exported too.
    if (auto pub = m->globals.find("__public__"); pub != m->globals.end() && pub->second.is(VT::List))
      for (const Value& n : pub->second.as<ListObj>()->items)
        if (n.is(VT::Str))
          if (auto f = m->globals.find(n.as<StrObj>()->s); f != m->globals.end() && f->second.is(VT::Function))
            target.members[f->first] = f->second;
    // A module's __aliases__ exports functions under names its own code cannot take (ltorch's
    // max and min, which would hide Python's inside the module): {"max": "_torch_max"}.
    if (auto al = m->globals.find("__aliases__"); al != m->globals.end() && al->second.is(VT::Dict))
      for (auto& [k, v] : al->second.as<DictObj>()->items())
        if (k.is(VT::Str) && v.is(VT::Str)) {
          if (auto f = m->globals.find(v.as<StrObj>()->s); f != m->globals.end() && f->second.is(VT::Function))
            target.members[k.as<StrObj>()->s] = f->second;
          else if (const Value* g = target.lookup(v.as<StrObj>()->s))  // an op of the namespace (or its fallback's)
            target.members[k.as<StrObj>()->s] = *g;
          else
            throw std::runtime_error("internal error: " + std::string(file.path) + "'s __aliases__ names '" + v.as<StrObj>()->s + "', which it lacks");
        }
    // ltorch's __properties__ names tensor properties and the functions that compute them
    // ({"T": "_prop_T"}: x.T is _prop_T(x)).
    if (auto pr = m->globals.find("__properties__"); mod == "ltorch" && pr != m->globals.end() && pr->second.is(VT::Dict))
      for (auto& [k, v] : pr->second.as<DictObj>()->items())
        if (k.is(VT::Str) && v.is(VT::Str))
          if (auto f = m->globals.find(v.as<StrObj>()->s); f != m->globals.end() && f->second.is(VT::Function))
            tensor_properties_[k.as<StrObj>()->s] = f->second;
    // ltorch's __functional__ maps the names torch.nn.functional spells differently from torch.X and
    // Tensor.X ({"unfold": "im2col"}: F.unfold is im2col, Tensor.unfold takes windows).
    if (auto fn = m->globals.find("__functional__"); mod == "ltorch" && fn != m->globals.end() && fn->second.is(VT::Dict)) {
      NamespaceObj& torch = nsref(*builtins().lookup("torch"));
      NamespaceObj& functional = nsref(nsref(torch.members.at("nn")).members.at("functional"));
      for (auto& [k, v] : fn->second.as<DictObj>()->items())
        if (k.is(VT::Str) && v.is(VT::Str))
          if (auto f = m->globals.find(v.as<StrObj>()->s); f != m->globals.end() && f->second.is(VT::Function))
            functional.members[k.as<StrObj>()->s] = f->second;
    }
    // ltorch's __linalg__: torch.linalg's names that differ from torch.X ({"cross": "_linalg_cross"}).
    if (auto la = m->globals.find("__linalg__"); mod == "ltorch" && la != m->globals.end() && la->second.is(VT::Dict)) {
      NamespaceObj& torch = nsref(*builtins().lookup("torch"));
      NamespaceObj& linalg = nsref(torch.members.at("linalg"));
      for (auto& [k, v] : la->second.as<DictObj>()->items())
        if (k.is(VT::Str) && v.is(VT::Str))
          if (auto f = m->globals.find(v.as<StrObj>()->s); f != m->globals.end() && f->second.is(VT::Function))
            linalg.members[k.as<StrObj>()->s] = f->second;
    }
    // ltorch's __inplace__: for each X, X_ is X written into its first argument (_inplace_of(X),
    // recorded as ltorch.X_), unless the module writes X_ out itself.
    if (auto ip = m->globals.find("__inplace__"); mod == "ltorch" && ip != m->globals.end() && ip->second.is(VT::List)) {
      const Value& make = m->globals.at("_inplace_of");
      NamespaceObj& lt = nsref(ltorch_);
      std::string missing;
      for (const Value& n : ip->second.as<ListObj>()->items) {
        const std::string name = n.as<StrObj>()->s;
        const Value* f = lt.lookup(name);
        if (!f) missing += " " + name;
        if (!f || lt.members.count(name + "_")) continue;
        Value g = call(make, CallArgs{{*f}, {}}, SourceLoc{});
        auto* fo = g.as<FunctionObj>();
        fo->composite = true;
        fo->qualname = "ltorch." + name + "_";
        lt.members[name + "_"] = g;
      }
      if (!missing.empty()) throw std::runtime_error("internal error: stdlib/ltorch.trace's __inplace__ names what ltorch lacks:" + missing);
    }
  }
}

void Interpreter::load_stdlib_passes() {
  if (passes_loaded_) return;
  passes_loaded_ = true;
  for (const auto& file : stdlib::files()) {
    std::string mod = file.module;
    if (mod.rfind("passes.", 0) != 0) continue;
    // stdlib/passes/NAME.trace defines the pass NAME; a user's pass of that name wins.
    std::string pass = mod.substr(7);
    auto m = load_stdlib_file(file);
    auto it = m->globals.find(pass);
    if (it == m->globals.end() || !it->second.is(VT::Function))
      throw std::runtime_error("internal error: stdlib/passes/" + pass + ".trace does not define " + pass + "()");
    passes_.emplace(pass, it->second);
  }
}

}  // namespace tracer::interp
