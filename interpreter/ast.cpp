// Deep copies of syntax trees: the standard library is parsed once a process and each
// interpreter takes a copy of the trees (see parse_module_once in parser.h).
#include "interpreter/ast.h"

namespace tracer::ast {

namespace {

// Every field of Expr and Stmt is copied below; a field added to either changes its size, and
// this stops the build until the copy knows of it (update the sizes after updating the copy).
static_assert(sizeof(void*) != 8 || sizeof(Expr) == 320, "ast::Expr changed: copy the new field in clone()");
static_assert(sizeof(void*) != 8 || sizeof(Stmt) == 424, "ast::Stmt changed: copy the new field in clone()");

struct Cloner {
  int32_t file;

  SourceLoc at(SourceLoc l) const {
    if (l.valid()) l.file = file;
    return l;
  }

  ExprPtr expr(const ExprPtr& e) const {
    if (!e) return nullptr;
    auto c = std::make_unique<Expr>(e->kind, at(e->loc));
    c->op = e->op;
    c->name = e->name;
    c->int_value = e->int_value;
    c->float_value = e->float_value;
    c->str_value = e->str_value;
    c->items = exprs(e->items);
    c->keys = exprs(e->keys);
    c->compare_ops = e->compare_ops;
    c->args = exprs(e->args);
    c->keywords.reserve(e->keywords.size());
    for (const Keyword& k : e->keywords) c->keywords.push_back({k.name, expr(k.value), at(k.loc)});
    c->comps.reserve(e->comps.size());
    for (const Comprehension& q : e->comps) c->comps.push_back({expr(q.target), expr(q.iter), exprs(q.conds)});
    c->params = params(e->params);
    c->parenthesized = e->parenthesized;
    c->slot = e->slot;
    c->depth = e->depth;
    return c;  // the inline caches start empty
  }

  std::vector<ExprPtr> exprs(const std::vector<ExprPtr>& v) const {
    std::vector<ExprPtr> out;
    out.reserve(v.size());
    for (const ExprPtr& e : v) out.push_back(expr(e));
    return out;
  }

  std::vector<Param> params(const std::vector<Param>& v) const {
    std::vector<Param> out;
    out.reserve(v.size());
    for (const Param& p : v) out.push_back({p.name, expr(p.annotation), expr(p.default_value), p.kind, at(p.loc)});
    return out;
  }

  StmtPtr stmt(const StmtPtr& s) const {
    if (!s) return nullptr;
    auto c = std::make_unique<Stmt>(s->kind, at(s->loc));
    c->targets = exprs(s->targets);
    c->value = expr(s->value);
    c->annotation = expr(s->annotation);
    c->op = s->op;
    c->body = block(s->body);
    c->orelse = block(s->orelse);
    c->name = s->name;
    c->params = params(s->params);
    c->returns = expr(s->returns);
    c->decorators = exprs(s->decorators);
    c->module = s->module;
    c->imports.reserve(s->imports.size());
    for (const ImportName& i : s->imports) c->imports.push_back({i.name, i.asname, at(i.loc)});
    c->names = s->names;
    c->type_string = s->type_string;
    c->type_comments.reserve(s->type_comments.size());
    for (const TypeComment& t : s->type_comments) c->type_comments.push_back({t.name, t.type_string, at(t.loc)});
    c->comments = s->comments;
    c->decomposed = s->decomposed;
    c->blank_before = s->blank_before;
    c->trailing_comment = s->trailing_comment;
    c->after_comments = s->after_comments;
    return c;
  }

  Block block(const Block& b) const {
    Block out;
    out.reserve(b.size());
    for (const StmtPtr& s : b) out.push_back(stmt(s));
    return out;
  }
};

}  // namespace

std::unique_ptr<Module> clone(const Module& m, int32_t file) {
  auto c = std::make_unique<Module>();
  Cloner cl{file};
  c->file = file;
  c->body = cl.block(m.body);
  c->header_comments = m.header_comments;
  return c;
}

}  // namespace tracer::ast
