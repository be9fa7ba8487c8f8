// Scope resolution with Python's rules: a name assigned in a function is local to it; inner
// functions capture enclosing locals as cells; comprehension variables do not leak.
#include "interpreter/resolve.h"

#include <vector>

namespace tracer::interp {
namespace {

using ast::Expr;
using ast::ExprKind;
using ast::Stmt;
using ast::StmtKind;

struct Scope {
  Scope* parent = nullptr;
  bool is_module = false;
  FuncInfo* info = nullptr;
  std::unordered_map<std::string, int32_t> slots;
  std::unordered_set<std::string> cells, globals;
  std::unordered_map<std::string, int32_t> frees;
  std::vector<std::pair<Expr*, std::string>> local_refs;
  std::vector<std::unordered_map<std::string, std::string>> comp_renames;

  int32_t add_local(const std::string& n) {
    auto it = slots.find(n);
    if (it != slots.end()) return it->second;
    int32_t s = info->nslots++;
    slots.emplace(n, s);
    return s;
  }
};

class Resolver {
 public:
  Resolver(Module& m, DiagnosticList& d) : m_(m), diags_(d) {}

  void run() {
    Scope top;
    top.is_module = true;
    top.info = &m_.top;
    m_.top.name = "<module>";
    m_.top.body = &m_.ast->body;
    FuncInfo scratch;
    Scope defs;
    defs.info = &scratch;
    collect_block(m_.ast->body, defs);
    for (const auto& kv : defs.slots) m_.module_defs.insert(kv.first);
    block(m_.ast->body, top);
    finish(top);
  }

 private:
  Module& m_;
  DiagnosticList& diags_;
  int comp_counter_ = 0;

  // ---- pre-scan: which names does this function assign? ----
  void collect_target(const Expr& e, Scope& s) {
    switch (e.kind) {
      case ExprKind::Name:
        if (!s.globals.count(e.name) && !s.frees.count(e.name)) s.add_local(e.name);
        break;
      case ExprKind::Tuple:
      case ExprKind::List:
        for (const auto& x : e.items) collect_target(*x, s);
        break;
      case ExprKind::Starred:
        collect_target(*e.items[0], s);
        break;
      default:
        break;
    }
  }

  void collect_block(const ast::Block& b, Scope& s) {
    for (const auto& st : b) {
      switch (st->kind) {
        case StmtKind::Global:
          for (const auto& n : st->names) s.globals.insert(n);
          break;
        case StmtKind::Nonlocal:
          for (const auto& n : st->names) s.frees.emplace(n, -1);
          break;
        default:
          break;
      }
    }
    for (const auto& st : b) collect_stmt(*st, s);
  }

  void collect_stmt(const Stmt& st, Scope& s) {
    switch (st.kind) {
      case StmtKind::Assign:
      case StmtKind::AugAssign:
      case StmtKind::AnnAssign:
      case StmtKind::For:
      case StmtKind::Del:
      case StmtKind::FusionDef:
        for (const auto& t : st.targets) collect_target(*t, s);
        break;
      case StmtKind::With:
        if (!st.targets.empty() && st.targets[0]) collect_target(*st.targets[0], s);
        break;
      case StmtKind::FunctionDef:
        if (!s.globals.count(st.name)) s.add_local(st.name);
        return;
      case StmtKind::Import:
        for (const auto& im : st.imports) {
          std::string n = im.asname.empty() ? im.name.substr(0, im.name.find('.')) : im.asname;
          if (!s.globals.count(n)) s.add_local(n);
        }
        return;
      case StmtKind::ImportFrom:
        for (const auto& im : st.imports) {
          std::string n = im.asname.empty() ? im.name : im.asname;
          if (!s.globals.count(n)) s.add_local(n);
        }
        return;
      default:
        break;
    }
    collect_block(st.body, s);
    collect_block(st.orelse, s);
  }

  // ---- resolution ----
  int32_t capture(Scope& s, const std::string& n) {
    auto f = s.frees.find(n);
    if (f != s.frees.end() && f->second >= 0) return f->second;
    Scope* p = s.parent;
    if (!p || p->is_module) return -1;
    std::pair<bool, int32_t> source;
    auto local = p->slots.find(n);
    if (local != p->slots.end() && !p->globals.count(n) && !(p->frees.count(n))) {
      p->cells.insert(n);
      source = {false, local->second};
    } else {
      int32_t idx = capture(*p, n);
      if (idx < 0) return -1;
      source = {true, idx};
    }
    int32_t idx = static_cast<int32_t>(s.info->free_sources.size());
    s.info->free_sources.push_back(source);
    s.frees[n] = idx;
    return idx;
  }

  std::string effective_name(const std::string& n, const Scope& s) {
    for (auto it = s.comp_renames.rbegin(); it != s.comp_renames.rend(); ++it) {
      auto r = it->find(n);
      if (r != it->end()) return r->second;
    }
    return n;
  }

  void name(Expr& e, Scope& s) {
    std::string n = effective_name(e.name, s);
    bool hidden = n != e.name;
    if ((s.is_module && !hidden) || s.globals.count(n)) {
      e.depth = static_cast<int32_t>(NameScope::Global);
      m_.global_refs.push_back(&e);
      return;
    }
    auto it = s.slots.find(n);
    if (it != s.slots.end() && !s.frees.count(n)) {
      e.slot = it->second;
      s.local_refs.emplace_back(&e, n);
      return;
    }
    int32_t idx = capture(s, n);
    if (idx >= 0) {
      e.depth = static_cast<int32_t>(NameScope::Free);
      e.slot = idx;
      return;
    }
    if (s.frees.count(n)) diags_.error(e.loc, "no binding for nonlocal '" + e.name + "' found");
    e.depth = static_cast<int32_t>(NameScope::Global);
    m_.global_refs.push_back(&e);
  }

  void exprs(std::vector<ast::ExprPtr>& xs, Scope& s) {
    for (auto& x : xs)
      if (x) expr(*x, s);
  }

  void list_comp(Expr& e, Scope& s) {
    // The first iterable is evaluated outside the comprehension's names.
    std::unordered_map<std::string, std::string> renames;
    int id = ++comp_counter_;
    for (size_t i = 0; i < e.comps.size(); ++i) {
      auto& c = e.comps[i];
      if (i > 0) s.comp_renames.push_back(renames);
      expr(*c.iter, s);
      if (i > 0) s.comp_renames.pop_back();
      bind_comp_target(*c.target, id, renames, s);
      s.comp_renames.push_back(renames);
      exprs(c.conds, s);
      s.comp_renames.pop_back();
    }
    s.comp_renames.push_back(renames);
    expr(*e.items[0], s);
    s.comp_renames.pop_back();
  }

  void bind_comp_target(Expr& t, int id, std::unordered_map<std::string, std::string>& renames, Scope& s) {
    if (t.kind == ExprKind::Name) {
      std::string hidden = "<comp" + std::to_string(id) + ">" + t.name;
      renames[t.name] = hidden;
      s.add_local(hidden);
      s.comp_renames.push_back(renames);
      name(t, s);
      s.comp_renames.pop_back();
      return;
    }
    for (auto& x : t.items) bind_comp_target(*x, id, renames, s);
  }

  void expr(Expr& e, Scope& s) {
    switch (e.kind) {
      case ExprKind::Name:
        name(e, s);
        return;
      case ExprKind::ListComp:
        list_comp(e, s);
        return;
      case ExprKind::Lambda:
        function(e.params, nullptr, &e, "<lambda>", e.loc, s);
        return;
      case ExprKind::Call:
        exprs(e.items, s);
        exprs(e.args, s);
        for (auto& k : e.keywords) expr(*k.value, s);
        return;
      case ExprKind::Dict:
        exprs(e.keys, s);
        exprs(e.items, s);
        return;
      case ExprKind::Attribute:
        exprs(e.items, s);
        // a.b.c on a global name: kept so that `tracer check` can name a dotted name a builtin
        // module lacks (torch.ops.aten.frobnicate) as it names an undefined bare one.
        if (!e.items.empty() && e.items[0] &&
            ((e.items[0]->kind == ExprKind::Name && e.items[0]->depth == static_cast<int32_t>(NameScope::Global)) ||
             (e.items[0]->kind == ExprKind::Attribute && !m_.global_attr_refs.empty() && m_.global_attr_refs.back() == e.items[0].get())))
          m_.global_attr_refs.push_back(&e);
        return;
      default:
        exprs(e.items, s);
        return;
    }
  }

  void function(std::vector<ast::Param>& params, Stmt* def, Expr* lambda, const std::string& fname, SourceLoc loc,
                Scope& outer) {
    for (auto& p : params) {
      if (p.default_value) expr(*p.default_value, outer);
      if (p.annotation) expr(*p.annotation, outer);
    }
    m_.funcs.emplace_back();
    FuncInfo& info = m_.funcs.back();
    info.name = fname;
    info.params = &params;
    info.loc = loc;
    Scope inner;
    inner.parent = &outer;
    inner.info = &info;
    for (auto& p : params) info.param_slots.push_back(inner.add_local(p.name));
    // A lambda inside a comprehension sees the comprehension's variables, unless shadowed.
    for (auto renames : outer.comp_renames) {
      for (auto& p : params) renames.erase(p.name);
      inner.comp_renames.push_back(std::move(renames));
    }
    if (def) {
      info.body = &def->body;
      collect_block(def->body, inner);
      block(def->body, inner);
      m_.by_node[def] = &info;
    } else {
      info.lambda_body = lambda->items[0].get();
      expr(*lambda->items[0], inner);
      m_.by_node[lambda] = &info;
    }
    finish(inner);
  }

  void finish(Scope& s) {
    for (auto& [e, n] : s.local_refs)
      e->depth = static_cast<int32_t>(s.cells.count(n) ? NameScope::Cell : NameScope::Local);
    for (const auto& c : s.cells) s.info->cell_slots.push_back(s.slots.at(c));
  }

  void block(ast::Block& b, Scope& s) {
    for (auto& st : b) stmt(*st, s);
  }

  void bind(Stmt& st, const std::string& n, SourceLoc loc, Scope& s) {
    auto e = std::make_unique<Expr>(ExprKind::Name, loc);
    e->name = n;
    name(*e, s);
    m_.binds[&st].push_back(std::move(e));
  }

  void stmt(Stmt& st, Scope& s) {
    switch (st.kind) {
      case StmtKind::FunctionDef:
        exprs(st.decorators, s);
        if (st.returns) expr(*st.returns, s);
        function(st.params, &st, nullptr, st.name, st.loc, s);
        bind(st, st.name, st.loc, s);
        return;
      case StmtKind::Import:
        for (const auto& im : st.imports) {
          bind(st, im.asname.empty() ? im.name.substr(0, im.name.find('.')) : im.asname, im.loc, s);
          if (im.asname.empty() && s.is_module) m_.plain_imports.insert(im.name.substr(0, im.name.find('.')));
        }
        return;
      case StmtKind::ImportFrom:
        for (const auto& im : st.imports) bind(st, im.asname.empty() ? im.name : im.asname, im.loc, s);
        return;
      case StmtKind::Global:
        for (const auto& n : st.names) m_.module_defs.insert(n);
        return;
      case StmtKind::Nonlocal:
        for (const auto& n : st.names)
          if (capture(s, n) < 0) diags_.error(st.loc, "no binding for nonlocal '" + n + "' found");
        return;
      case StmtKind::Assert:
        if (st.value) expr(*st.value, s);
        if (st.annotation) expr(*st.annotation, s);
        return;
      case StmtKind::FusionDef:
        // A fusion's callee is never looked up: its body stands in for it. A decomposed call's
        // callee is, where it is defined.
        if (st.decomposed) {
          size_t before = m_.global_refs.size(), before_attrs = m_.global_attr_refs.size();
          expr(*st.value->items[0], s);
          m_.global_refs.resize(before);  // an undefined callee is no error: its decomposition runs
          m_.global_attr_refs.resize(before_attrs);
        }
        exprs(st.targets, s);
        exprs(st.value->args, s);
        for (const auto& k : st.value->keywords) expr(*k.value, s);
        if (st.decomposed) {
          // A decomposition runs only where the callee is not defined; Thunder prints some with
          // names its later passes renamed (t29 for t31), which are no error unless it runs.
          size_t before = m_.global_refs.size(), before_attrs = m_.global_attr_refs.size();
          block(st.body, s);
          m_.global_refs.resize(before);
          m_.global_attr_refs.resize(before_attrs);
        } else {
          block(st.body, s);
        }
        return;
      default:
        break;
    }
    exprs(st.targets, s);
    if (st.value) expr(*st.value, s);
    if (st.annotation) expr(*st.annotation, s);
    block(st.body, s);
    block(st.orelse, s);
  }
};

}  // namespace

void resolve(Module& m, DiagnosticList& diags) { Resolver(m, diags).run(); }

}  // namespace tracer::interp
