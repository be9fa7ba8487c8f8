// The IR verifier: names defined once, used in their live range, types agree with op rules.
#include "ir/verify.h"

#include <unordered_map>

namespace tracer::ir {
namespace {

enum class State { Live, Deleted };

class Verifier {
 public:
  std::vector<VerifyError> errors;

  void run(const Trace& t) {
    for (const ProxyPtr& p : t.inputs) define(p, nullptr);
    for (const Stmt& s : t.stmts) stmt(s);
    for_each_proxy(t.output, [&](const ProxyPtr& p) { use(p, nullptr, "the return value"); });
  }

 private:
  std::unordered_map<std::string, std::pair<const Proxy*, State>> names_;

  void fail(const Stmt* s, std::string msg) {
    errors.push_back({std::move(msg), s ? s->loc : SourceLoc{}, s ? print_stmt_line(*s) : ""});
  }

  void define(const ProxyPtr& p, const Stmt* s) {
    auto [it, fresh] = names_.emplace(p->name, std::make_pair(p.get(), State::Live));
    if (!fresh) fail(s, "'" + p->name + "' is defined more than once");
  }

  void use(const ProxyPtr& p, const Stmt* s, const std::string& where) {
    auto it = names_.find(p->name);
    if (it == names_.end()) fail(s, "'" + p->name + "' is used in " + where + " before it is defined");
    else if (it->second.second == State::Deleted) fail(s, "'" + p->name + "' is used in " + where + " after it is deleted");
    else if (it->second.first != p.get()) fail(s, "'" + p->name + "' refers to two different values");
  }

  void check_types(const Stmt& s) {
    if (s.kind != StmtKind::Prim || !s.op) return;
    try {
      std::vector<TensorType> ts = infer(*s.op, s.args);
      if (ts.size() != s.outputs.size()) {
        fail(&s, s.op->name + " produces " + std::to_string(ts.size()) + " outputs but the statement has " +
                     std::to_string(s.outputs.size()));
        return;
      }
      for (size_t i = 0; i < ts.size(); ++i)
        if (!ts[i].same_layout(s.outputs[i]->type))
          fail(&s, "'" + s.outputs[i]->name + "' is recorded as " + s.outputs[i]->type.str() + " but " + s.op->name +
                       " gives " + ts[i].str());
    } catch (const OpError& e) {
      fail(&s, e.what());
    }
  }

  void stmt(const Stmt& s) {
    if (s.kind == StmtKind::Del) {
      for (const ProxyPtr& p : s.deleted) {
        use(p, &s, "del");
        auto it = names_.find(p->name);
        if (it != names_.end()) it->second.second = State::Deleted;
      }
      return;
    }
    for (const Arg& a : s.args) for_each_proxy(a, [&](const ProxyPtr& p) { use(p, &s, "'" + s.callee + "'"); });
    for (const auto& kv : s.kwargs) for_each_proxy(kv.second, [&](const ProxyPtr& p) { use(p, &s, "'" + s.callee + "'"); });
    for (const Stmt& sub : s.subsymbols) stmt(sub);
    for (const ProxyPtr& p : s.outputs) {
      auto it = names_.find(p->name);
      bool by_sub = it != names_.end() && it->second.first == p.get() && !s.subsymbols.empty();
      if (!by_sub) define(p, &s);
    }
    check_types(s);
  }
};

}  // namespace

std::vector<VerifyError> verify(const Trace& t) {
  Verifier v;
  v.run(t);
  return v.errors;
}

}  // namespace tracer::ir
