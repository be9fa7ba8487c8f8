// Builder, statements: parse-tree statement contexts to ast::Stmt. Statements that failed to
// parse are skipped (their error is already reported); the rest of the block still builds.
#include <utility>

#include "interpreter/parse_builder.h"
#include "interpreter/parse_text.h"

namespace tracer::parse {

using ast::ExprKind;
using ast::ExprPtr;
using ast::Op;
using ast::StmtKind;
using ast::StmtPtr;

namespace {

using P = TracerParser;

Op augmented_op(size_t type) {
  switch (type) {
    case P::ADD_ASSIGN: return Op::Add;
    case P::SUB_ASSIGN: return Op::Sub;
    case P::MULT_ASSIGN: return Op::Mul;
    case P::AT_ASSIGN: return Op::MatMul;
    case P::DIV_ASSIGN: return Op::Div;
    case P::MOD_ASSIGN: return Op::Mod;
    case P::AND_ASSIGN: return Op::BitAnd;
    case P::OR_ASSIGN: return Op::BitOr;
    case P::XOR_ASSIGN: return Op::BitXor;
    case P::LEFT_SHIFT_ASSIGN: return Op::LShift;
    case P::RIGHT_SHIFT_ASSIGN: return Op::RShift;
    case P::POWER_ASSIGN: return Op::Pow;
    default: return Op::FloorDiv;
  }
}

size_t index_of(antlr4::tree::TerminalNode* node) { return node->getSymbol()->getTokenIndex(); }

// Whether a blank line stands above the line that holds offset `at`, comment lines in between
// skipped (a blank line above a statement's leading comments counts).
bool blank_line_above(std::string_view text, size_t at) {
  if (at == 0 || at > text.size()) return false;
  size_t nl = text.rfind('\n', at - 1);  // the end of the line above
  while (nl != std::string_view::npos) {
    size_t start = nl == 0 ? std::string_view::npos : text.rfind('\n', nl - 1);
    start = start == std::string_view::npos ? 0 : start + 1;
    std::string_view line = text.substr(start, nl - start);
    size_t k = line.find_first_not_of(" \t\r\f");
    if (k == std::string_view::npos) return true;
    if (line[k] != '#' || start == 0) return false;
    nl = start - 1;
  }
  return false;
}

}  // namespace

ast::Block Builder::build_file(P::File_inputContext* file, std::vector<std::string>* header) {
  header_ = header;
  ast::Block out;
  if (!file || !file->stmts()) return out;
  size_t hi = file->EOF() ? index_of(file->EOF()) : s_.token_count();
  build_stmts(file->stmts(), 0, hi, out);
  take_comments();  // with no statement at all, the comments are the header
  return out;
}

// [lo, hi) is the token range of the block: full-line comments in it between statements become
// TypeComment statements or comments of the next statement.
void Builder::build_stmts(P::StmtsContext* stmts, size_t lo, size_t hi, ast::Block& out) {
  size_t cursor = lo;
  // Blank lines between the statements of a block are kept (the source-level print shows them).
  auto mark_blanks = [&](size_t from) {
    for (size_t i = from; i < out.size(); ++i) out[i]->blank_before = blank_line_above(s_.text(), out[i]->loc.offset);
  };
  for (auto* st : stmts->stmt()) {
    size_t first = st->getStart()->getTokenIndex();
    size_t gap = out.size();
    gap_comments(cursor, first, out);
    mark_blanks(gap);
    size_t before = out.size();
    cursor = std::max(cursor, build_stmt(st, out));
    if (out.size() > before) out[before]->blank_before = blank_line_above(s_.text(), out[before]->loc.offset);
    if (detect_fusions_ && out.size() == before + 1 && out.back()->kind != ast::StmtKind::FunctionDef &&
        out.back()->kind != ast::StmtKind::If && out.back()->kind != ast::StmtKind::For &&
        out.back()->kind != ast::StmtKind::While && out.back()->kind != ast::StmtKind::With)
      cursor = absorb_fusion(*out.back(), first, cursor, hi);
  }
  size_t gap = out.size();
  gap_comments(cursor, hi, out);
  mark_blanks(gap);
}

size_t Builder::build_stmt(P::StmtContext* c, ast::Block& out) {
  size_t start = c->getStart()->getTokenIndex();
  size_t next = c->getStop() ? std::max(start, c->getStop()->getTokenIndex()) + 1 : start + 1;
  if (c->exception) return next;
  std::vector<std::string> comments = take_comments();
  if (c->simple_stmts()) {
    build_simple(c->simple_stmts(), std::move(comments), out);
  } else {
    StmtPtr s = compound(c->compound_stmt());
    s->comments = std::move(comments);
    out.push_back(std::move(s));
  }
  return next;
}

void Builder::build_block(P::BlockContext* c, ast::Block& out) {
  if (c->simple_stmts()) return build_simple(c->simple_stmts(), {}, out);
  size_t lo = index_of(c->NEWLINE()) + 1;
  build_stmts(c->stmts(), lo, c->DEDENT() ? index_of(c->DEDENT()) : lo, out);
}

void Builder::build_simple(P::Simple_stmtsContext* c, std::vector<std::string> comments, ast::Block& out) {
  auto smalls = c->small_stmt();
  for (size_t i = 0; i < smalls.size(); ++i) {
    StmtPtr s = small(smalls[i]);
    if (i == 0) s->comments = std::move(comments);
    attach_trailing(*s, smalls[i]->getStart()->getTokenIndex(), smalls[i]->getStop()->getTokenIndex());
    out.push_back(std::move(s));
  }
}

StmtPtr Builder::small(P::Small_stmtContext* c) {
  SourceLoc loc = s_.loc(c);
  if (auto* x = c->expr_stmt()) return expr_stmt(x);
  if (auto* x = c->import_from()) return import_from(x);
  if (c->pass_stmt()) return stmt(StmtKind::Pass, loc);
  if (c->break_stmt()) return stmt(StmtKind::Break, loc);
  if (c->continue_stmt()) return stmt(StmtKind::Continue, loc);
  if (auto* x = c->del_stmt()) {
    StmtPtr s = stmt(StmtKind::Del, loc);
    ExprPtr targets = exprlist(x->exprlist());
    if (x->exprlist()->COMMA().empty()) s->targets.push_back(std::move(targets));
    else s->targets = std::move(targets->items);
    for (auto& t : s->targets) check_target(*t, "delete", c->getStart());
    return s;
  }
  if (auto* x = c->return_stmt()) {
    StmtPtr s = stmt(StmtKind::Return, loc);
    if (x->testlist_star_expr()) s->value = testlist_star_expr(x->testlist_star_expr());
    return s;
  }
  if (auto* x = c->raise_stmt()) {
    StmtPtr s = stmt(StmtKind::Raise, loc);
    s->value = opt_test(x->test());
    return s;
  }
  if (auto* x = c->assert_stmt()) {
    StmtPtr s = stmt(StmtKind::Assert, loc);
    s->value = test(x->test(0));
    s->annotation = opt_test(x->test(1));
    return s;
  }
  if (auto* x = c->import_name()) {
    StmtPtr s = stmt(StmtKind::Import, loc);
    for (auto* d : x->dotted_as_name())
      s->imports.push_back({d->dotted_name()->getText(), d->asname ? d->asname->getText() : "", s_.loc(d)});
    return s;
  }
  StmtPtr s = stmt(c->global_stmt() ? StmtKind::Global : StmtKind::Nonlocal, loc);
  auto names = c->global_stmt() ? c->global_stmt()->NAME() : c->nonlocal_stmt()->NAME();
  for (auto* n : names) s->names.push_back(n->getText());
  return s;
}

StmtPtr Builder::expr_stmt(P::Expr_stmtContext* c) {
  ExprPtr lhs = testlist_star_expr(c->testlist_star_expr());
  SourceLoc loc = s_.loc(c);
  if (auto* ann = c->annassign()) {
    StmtPtr s = stmt(StmtKind::AnnAssign, loc);
    if (lhs->kind != ExprKind::Name) error(lhs->loc, c->getStart(), "only a single name can be annotated");
    s->targets.push_back(std::move(lhs));
    s->annotation = test(ann->test());
    if (ann->testlist_star_expr()) s->value = testlist_star_expr(ann->testlist_star_expr());
    return s;
  }
  if (auto* aug = c->augassign()) {
    StmtPtr s = stmt(StmtKind::AugAssign, loc);
    if (lhs->kind != ExprKind::Name && lhs->kind != ExprKind::Attribute && lhs->kind != ExprKind::Subscript)
      error(lhs->loc, c->getStart(), "illegal target for augmented assignment");
    s->op = augmented_op(aug->op->getType());
    s->targets.push_back(std::move(lhs));
    s->value = testlist(c->testlist());
    return s;
  }
  auto rhs = c->assign_rhs();
  if (rhs.empty()) {
    StmtPtr s = stmt(StmtKind::Expr, loc);
    s->value = std::move(lhs);
    return s;
  }
  StmtPtr s = stmt(StmtKind::Assign, loc);
  check_target(*lhs, "assign to", c->getStart());
  s->targets.push_back(std::move(lhs));
  for (size_t i = 0; i + 1 < rhs.size(); ++i) {
    s->targets.push_back(testlist_star_expr(rhs[i]->testlist_star_expr()));
    check_target(*s->targets.back(), "assign to", c->getStart());
  }
  s->value = testlist_star_expr(rhs.back()->testlist_star_expr());
  return s;
}

StmtPtr Builder::import_from(P::Import_fromContext* c) {
  StmtPtr s = stmt(StmtKind::ImportFrom, s_.loc(c));
  s->module.assign(c->DOT().size() + 3 * c->ELLIPSIS().size(), '.');
  if (c->dotted_name()) s->module += c->dotted_name()->getText();
  if (s->module.empty()) error(s->loc, c->getStart(), "expected a module name after 'from'");
  if (c->STAR()) {
    s->imports.push_back({"*", "", s_.loc(c->STAR()->getSymbol())});
    return s;
  }
  for (auto* n : c->import_as_names()->import_as_name())
    s->imports.push_back({n->name->getText(), n->asname ? n->asname->getText() : "", s_.loc(n)});
  return s;
}

SourceLoc Builder::header_loc(antlr4::ParserRuleContext* c, antlr4::tree::TerminalNode* colon) {
  return s_.span(c->getStart(), colon ? colon->getSymbol() : c->getStop());
}

StmtPtr Builder::compound(P::Compound_stmtContext* c) {
  if (auto* x = c->if_stmt()) return if_stmt(x);
  if (auto* x = c->with_stmt()) return with_stmt(x);
  if (auto* x = c->funcdef()) return funcdef(x, {});
  if (auto* x = c->decorated()) {
    std::vector<ExprPtr> decorators;
    for (auto* d : x->decorator()) decorators.push_back(test(d->test()));
    return funcdef(x->funcdef(), std::move(decorators));
  }
  if (auto* x = c->while_stmt()) {
    StmtPtr s = stmt(StmtKind::While, header_loc(x, x->COLON()));
    s->value = test(x->test());
    attach_trailing(*s, x->getStart()->getTokenIndex(), index_of(x->COLON()));
    build_block(x->block(), s->body);
    if (x->else_clause()) build_block(x->else_clause()->block(), s->orelse);
    return s;
  }
  auto* x = c->for_stmt();
  StmtPtr s = stmt(StmtKind::For, header_loc(x, x->COLON()));
  s->targets.push_back(exprlist(x->exprlist()));
  check_target(*s->targets[0], "assign to", x->getStart());
  s->value = testlist(x->testlist());
  attach_trailing(*s, x->getStart()->getTokenIndex(), index_of(x->COLON()));
  build_block(x->block(), s->body);
  if (x->else_clause()) build_block(x->else_clause()->block(), s->orelse);
  return s;
}

// elif chains become nested Ifs in orelse, built without recursion.
StmtPtr Builder::if_stmt(P::If_stmtContext* c) {
  StmtPtr root = stmt(StmtKind::If, header_loc(c, c->COLON()));
  root->value = test(c->test());
  attach_trailing(*root, c->getStart()->getTokenIndex(), index_of(c->COLON()));
  build_block(c->block(), root->body);
  ast::Block* orelse = &root->orelse;
  for (auto* e : c->elif_clause()) {
    StmtPtr s = stmt(StmtKind::If, header_loc(e, e->COLON()));
    s->value = test(e->test());
    attach_trailing(*s, e->getStart()->getTokenIndex(), index_of(e->COLON()));
    build_block(e->block(), s->body);
    ast::Block* next = &s->orelse;
    orelse->push_back(std::move(s));
    orelse = next;
  }
  if (auto* e = c->else_clause()) build_block(e->block(), *orelse);
  return root;
}

// "with a as x, b:" nests: With(a, x) { With(b) { body } }. targets is empty without "as".
StmtPtr Builder::with_stmt(P::With_stmtContext* c) {
  StmtPtr root;
  ast::Block* into = nullptr;
  for (auto* item : c->with_item()) {
    StmtPtr s = stmt(StmtKind::With, root ? s_.loc(item) : header_loc(c, c->COLON()));
    s->value = test(item->test());
    if (item->expr()) {
      s->targets.push_back(expr(item->expr()));
      check_target(*s->targets[0], "assign to", item->getStart());
    }
    ast::Block* body = &s->body;
    if (root) into->push_back(std::move(s));
    else root = std::move(s);
    into = body;
  }
  attach_trailing(*root, c->getStart()->getTokenIndex(), index_of(c->COLON()));
  build_block(c->block(), *into);
  return root;
}

StmtPtr Builder::funcdef(P::FuncdefContext* c, std::vector<ExprPtr> decorators) {
  StmtPtr s = stmt(StmtKind::FunctionDef, header_loc(c, c->COLON()));
  s->name = c->NAME()->getText();
  if (c->parameters()) s->params = params(c->parameters());
  check_params(s->params, c);
  s->returns = opt_test(c->ret);
  s->decorators = std::move(decorators);
  attach_trailing(*s, c->getStart()->getTokenIndex(), index_of(c->COLON()));
  build_block(c->block(), s->body);
  return s;
}

std::vector<ast::Param> Builder::params(P::ParametersContext* c) {
  std::vector<ast::Param> out;
  for (auto* p : c->param()) {
    ast::Param param;
    param.loc = s_.loc(p);
    if (auto* n = dynamic_cast<P::NormalParamContext*>(p)) {
      param.name = n->NAME()->getText();
      param.annotation = opt_test(n->annotation);
      param.default_value = opt_test(n->default_value);
    } else if (auto* st = dynamic_cast<P::StarParamContext*>(p)) {
      param.kind = ast::Param::Kind::VarArgs;  // a bare '*' has an empty name
      if (st->NAME()) param.name = st->NAME()->getText();
      param.annotation = opt_test(st->annotation);
    } else if (auto* kw = dynamic_cast<P::KwParamContext*>(p)) {
      param.kind = ast::Param::Kind::KwArgs;
      param.name = kw->NAME()->getText();
      param.annotation = opt_test(kw->annotation);
    }
    out.push_back(std::move(param));
  }
  return out;
}

void Builder::check_params(const std::vector<ast::Param>& params, antlr4::ParserRuleContext* c) {
  using Kind = ast::Param::Kind;
  bool seen_default = false, seen_star = false, seen_kwargs = false;
  for (size_t i = 0; i < params.size(); ++i) {
    const ast::Param& p = params[i];
    for (size_t j = 0; j < i; ++j)
      if (!p.name.empty() && params[j].name == p.name) error(p.loc, c->getStart(), "duplicate parameter '" + p.name + "'");
    if (seen_kwargs) error(p.loc, c->getStart(), "parameter after '**" + params[i - 1].name + "'");
    if (p.kind == Kind::VarArgs && seen_star) error(p.loc, c->getStart(), "only one '*' parameter is allowed");
    bool named_after = i + 1 < params.size() && params[i + 1].kind == Kind::Normal;
    if (p.kind == Kind::VarArgs && p.name.empty() && !named_after)
      error(p.loc, c->getStart(), "a bare '*' must be followed by a named parameter");
    if (p.kind == Kind::Normal && !seen_star && p.default_value) seen_default = true;
    else if (p.kind == Kind::Normal && !seen_star && seen_default)
      error(p.loc, c->getStart(), "parameter without a default follows a parameter with a default");
    seen_star |= p.kind == Kind::VarArgs;
    seen_kwargs |= p.kind == Kind::KwArgs;
  }
}

}  // namespace tracer::parse
