// The REPL's side of Session: evaluating a chunk in the loaded module, interrupting it, :help
// (docstrings and signatures of functions, ops and builtins), name completion and an entry's
// parameters.
#include "tracer/session.h"

#include <algorithm>
#include <set>

#include "api/session_impl.h"
#include "interpreter/builtins.h"
#include "interpreter/interp.h"
#include "runtime/summary.h"

namespace tracer {

bool Session::eval(const std::string& name, const std::string& text, std::string* shown) {
  return impl_->guarded<bool>(false, [&]() -> bool {
    if (shown) shown->clear();
    if (!impl_->module) {  // an empty module to grow
      DiagnosticList dl;
      impl_->module = impl_->in->load("<repl>", "", dl, impl_->pinned);
      impl_->add_all(dl);
      if (!impl_->module) return false;
    }
    std::string t = text;
    Impl::comment_separators(t);
    DiagnosticList dl;
    Value v;
    impl_->in->reset_steps();
    auto m = impl_->in->load_chunk(name, std::move(t), dl, *impl_->module, &v);
    impl_->add_all(dl);
    if (!m) return false;
    if (!shown || v.is_none()) return true;
    if (v.is(VT::Tensor)) *shown = rt::summarize(v.as<interp::TensorObj>()->host());
    else if (v.is(VT::Trace)) *shown = ir::print_trace(*v.as<interp::TraceObj>()->trace);
    else *shown = interp::repr(v);
    return true;
  });
}

void Session::interrupt() { impl_->in->interrupt(); }

namespace {

// A function's docstring: its body's first statement, when that is a string.
std::string docstring(const interp::FunctionObj& f) {
  if (!f.info || !f.info->body || f.info->body->empty()) return "";
  const ast::Stmt& s = *f.info->body->front();
  if (s.kind != ast::StmtKind::Expr || !s.value || s.value->kind != ast::ExprKind::Str) return "";
  return s.value->str_value;
}

std::string signature_of(const std::string& qualname, const interp::FunctionObj& f) {
  std::string sig = qualname + "(";
  if (f.info && f.info->params)
    for (size_t i = 0; i < f.info->params->size(); ++i) {
      const auto& p = (*f.info->params)[i];
      sig += (i ? ", " : "") + p.name;
      if (i < f.defaults.size() && !f.defaults[i].is(VT::Unbound)) sig += "=" + interp::repr(f.defaults[i]);
    }
  return sig + ")";
}

}  // namespace

std::optional<std::string> Session::help(const std::string& name) {
  auto op_doc = [](const ir::OpDecl& op) -> std::string {
    if (op.ns == "prims") {
      // prims.sum(a, dims, keepdim=False, dtype=None): its parameters, defaults included.
      std::string sig = "prims." + op.name + "(";
      for (size_t i = 0; i < op.params.size(); ++i) {
        const ir::ParamSpec& p = op.params[i];
        sig += (i ? ", " : "") + p.name + (p.required ? "" : "=" + ir::print_arg(p.default_value));
      }
      return sig + ")\n" + op.doc;
    }
    return (op.signature.empty() ? op.ns + "." + op.name + "(...)" : op.signature) + " [native op]" +
           (op.doc.empty() ? "" : "\n" + op.doc);
  };
  auto function_doc = [&](const std::string& shown, const Value& v) -> std::optional<std::string> {
    if (v.is(VT::Function)) {
      const auto& f = *v.as<interp::FunctionObj>();
      std::string d = docstring(f);
      return signature_of(shown, f) + (d.empty() ? "" : "\n" + d);
    }
    if (v.is(VT::Builtin)) {
      const auto& b = *v.as<interp::BuiltinObj>();
      if (b.native) return (b.native->signature.empty() ? b.native->name + "(...)" : b.native->signature) + " [native]" +
                           (b.native->doc.empty() ? "" : "\n" + b.native->doc);
      return std::string(b.def->name) + ": " + (b.def->doc ? b.def->doc : "");
    }
    if (v.is(VT::Op)) return op_doc(*v.as<interp::OpObj>()->op);
    return std::nullopt;
  };
  // A member of a namespace among the builtins (ltorch, native).
  auto member = [&](const std::string& ns, const std::string& n) -> const Value* {
    const Value* v = impl_->in->builtins().lookup(ns);
    return v && v->is(VT::Namespace) ? v->as<interp::NamespaceObj>()->lookup(n) : nullptr;
  };
  std::string n = name;
  if (n.rfind("native.", 0) == 0) {  // a host's op
    const Value* op = member("native", n.substr(7));
    return op ? function_doc(n, *op) : std::nullopt;
  }
  for (const char* prefix : {"prims.", "ltorch.", "torch."})
    if (n.rfind(prefix, 0) == 0 && n.size() > std::strlen(prefix)) {
      std::string rest = n.substr(std::strlen(prefix));
      if (std::string(prefix) == "prims.") {
        const ir::OpDecl* op = ir::find_op(rest);
        return op ? std::optional<std::string>(op_doc(*op)) : std::nullopt;
      }
      n = rest;
    }
  if (impl_->module) {
    auto it = impl_->module->globals.find(n);
    if (it != impl_->module->globals.end())
      if (auto d = function_doc(n, it->second)) return d;
  }
  if (const Value* b = impl_->in->builtins().lookup(n))
    if (auto d = function_doc(n, *b)) {
      // A builtin and a pass of one name (checkpoint): both.
      if (const Value* p = impl_->in->find_pass(n))
        if (auto pd = function_doc(n, *p)) return *d + "\npass " + *pd;
      return d;
    }
  if (const Value* f = member("ltorch", n))
    if (auto d = function_doc("ltorch." + n, *f)) return d;
  // NS.name in a builtin namespace: optim.adamw, dist.all_gather, math.sqrt, time.perf_counter.
  if (size_t dot = n.find('.'); dot != std::string::npos && dot > 0)
    if (const Value* f = member(n.substr(0, dot), n.substr(dot + 1)))
      if (auto d = function_doc(n, *f)) return d;
  if (const Value* p = impl_->in->find_pass(n))
    if (auto d = function_doc(n, *p)) return "pass " + *d;
  if (const ir::OpDecl* op = ir::find_op(n)) return op_doc(*op);
  return std::nullopt;
}

std::vector<std::string> Session::completions(const std::string& prefix) const {
  std::set<std::string> out;
  auto add = [&](const std::string& qual, const std::string& name) {
    if ((qual + name).rfind(prefix, 0) == 0 && !name.empty() && name[0] != '_') out.insert(qual + name);
  };
  size_t dot = prefix.find('.');
  if (dot != std::string::npos) {  // a namespace's members
    std::string ns = prefix.substr(0, dot);
    if (ns == "prims") {
      for (const ir::OpDecl& op : ir::all_ops()) add("prims.", op.name);
    } else if (const Value* v = impl_->in->builtins().lookup(ns)) {
      if (v->is(VT::Namespace)) {
        const auto* n = v->as<interp::NamespaceObj>();
        for (const auto& [name, member] : n->members) add(ns + ".", name);
        if (n->fallback)
          for (const auto& [name, member] : n->fallback->members) add(ns + ".", name);
      }
    }
    return {out.begin(), out.end()};
  }
  if (impl_->module)
    for (const auto& [name, v] : impl_->module->globals) add("", name);
  for (const auto& [name, v] : impl_->in->builtins().members) add("", name);
  return {out.begin(), out.end()};
}

std::optional<std::vector<std::string>> Session::parameters(const std::string& entry) {
  const interp::FunctionObj* f = impl_->function(entry);
  if (!f) {
    impl_->error("no function named '" + entry + "' in the module");
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (const auto& p : *f->info->params) out.push_back(p.name);
  return out;
}

}  // namespace tracer
