// Builder, expressions: parse-tree expression contexts to ast::Expr, with Python's shapes
// (chained comparisons flattened, adjacent strings joined, slices, comprehensions).
#include <utility>

#include "interpreter/parse_builder.h"
#include "interpreter/parse_text.h"

namespace tracer::parse {

using ast::Expr;
using ast::ExprKind;
using ast::ExprPtr;
using ast::Op;

namespace {

using P = TracerParser;

Op binary_op(size_t type) {
  switch (type) {
    case P::POWER: return Op::Pow;
    case P::STAR: return Op::Mul;
    case P::AT: return Op::MatMul;
    case P::DIV: return Op::Div;
    case P::IDIV: return Op::FloorDiv;
    case P::MOD: return Op::Mod;
    case P::ADD: return Op::Add;
    case P::MINUS: return Op::Sub;
    case P::LEFT_SHIFT: return Op::LShift;
    case P::RIGHT_SHIFT: return Op::RShift;
    case P::AND_OP: return Op::BitAnd;
    case P::XOR: return Op::BitXor;
    default: return Op::BitOr;
  }
}

Op compare_op(P::Comp_opContext* c) {
  if (c->NOT()) return c->IN() ? Op::NotIn : Op::IsNot;
  if (c->IN()) return Op::In;
  if (c->IS()) return Op::Is;
  if (c->LESS_THAN()) return Op::Lt;
  if (c->GREATER_THAN()) return Op::Gt;
  if (c->EQUALS()) return Op::Eq;
  if (c->GT_EQ()) return Op::Ge;
  if (c->LT_EQ()) return Op::Le;
  return Op::Ne;
}

const char* kind_name(ExprKind k) {
  switch (k) {
    case ExprKind::Call: return "function call";
    case ExprKind::Int: case ExprKind::Float: case ExprKind::Str: case ExprKind::True:
    case ExprKind::False: case ExprKind::None: case ExprKind::Ellipsis: return "literal";
    case ExprKind::Compare: return "comparison";
    case ExprKind::IfExp: return "conditional expression";
    case ExprKind::Lambda: return "lambda";
    case ExprKind::ListComp: return "comprehension";
    case ExprKind::Dict: return "dict literal";
    default: return "expression";
  }
}

}  // namespace

void Builder::error(SourceLoc at, antlr4::Token* line_of, std::string message) {
  s_.error(at, s_.logical_line(line_of), std::move(message));
}

void Builder::check_target(const Expr& e, const char* what, antlr4::Token* line_of) {
  switch (e.kind) {
    case ExprKind::Name: case ExprKind::Attribute: case ExprKind::Subscript: return;
    case ExprKind::Tuple: case ExprKind::List:
      for (const ExprPtr& item : e.items) check_target(*item, what, line_of);
      return;
    case ExprKind::Starred: return check_target(*e.items[0], what, line_of);
    default: break;
  }
  error(e.loc, line_of, std::string("cannot ") + what + " " + kind_name(e.kind));
}

ExprPtr Builder::tuple_or_single(std::vector<ExprPtr> items, bool comma, antlr4::ParserRuleContext* c) {
  if (!comma && items.size() == 1) return std::move(items[0]);
  ExprPtr t = make(ExprKind::Tuple, c);
  t->items = std::move(items);
  return t;
}

ExprPtr Builder::testlist_star_expr(P::Testlist_star_exprContext* c) {
  std::vector<ExprPtr> items;
  for (auto* item : c->star_or_test()) items.push_back(star_or_test(item));
  return tuple_or_single(std::move(items), !c->COMMA().empty(), c);
}

ExprPtr Builder::testlist(P::TestlistContext* c) {
  std::vector<ExprPtr> items;
  for (auto* item : c->test()) items.push_back(test(item));
  return tuple_or_single(std::move(items), !c->COMMA().empty(), c);
}

ExprPtr Builder::exprlist(P::ExprlistContext* c) {
  std::vector<ExprPtr> items;
  for (auto* item : c->star_or_expr()) items.push_back(star_or_expr(item));
  return tuple_or_single(std::move(items), !c->COMMA().empty(), c);
}

ExprPtr Builder::star_or_test(P::Star_or_testContext* c) {
  return c->star_expr() ? starred(c->star_expr()) : test(c->test());
}

ExprPtr Builder::star_or_expr(P::Star_or_exprContext* c) {
  return c->star_expr() ? starred(c->star_expr()) : expr(c->expr());
}

ExprPtr Builder::starred(P::Star_exprContext* c) {
  ExprPtr e = make(ExprKind::Starred, c);
  e->items.push_back(expr(c->expr()));
  return e;
}

ExprPtr Builder::test(P::TestContext* c) {
  if (c->lambdef()) return lambda(c->lambdef());
  ExprPtr body = or_test(c->or_test(0));
  if (!c->cond) return body;
  ExprPtr e = make(ExprKind::IfExp, c);
  e->items.push_back(std::move(body));
  e->items.push_back(or_test(c->cond));
  e->items.push_back(test(c->orelse));
  return e;
}

ExprPtr Builder::lambda(P::LambdefContext* c) {
  ExprPtr e = make(ExprKind::Lambda, c);
  if (c->lambda_params()) e->params = lambda_params(c->lambda_params());
  check_params(e->params, c);
  e->items.push_back(test(c->test()));
  return e;
}

std::vector<ast::Param> Builder::lambda_params(P::Lambda_paramsContext* c) {
  std::vector<ast::Param> out;
  for (auto* p : c->lambda_param()) {
    ast::Param param;
    param.loc = s_.loc(p);
    if (auto* n = dynamic_cast<P::LambdaNormalContext*>(p)) {
      param.name = n->NAME()->getText();
      param.default_value = opt_test(n->default_value);
    } else if (auto* st = dynamic_cast<P::LambdaStarContext*>(p)) {
      param.kind = ast::Param::Kind::VarArgs;
      if (st->NAME()) param.name = st->NAME()->getText();
    } else if (auto* kw = dynamic_cast<P::LambdaKwContext*>(p)) {
      param.kind = ast::Param::Kind::KwArgs;
      param.name = kw->NAME()->getText();
    }
    out.push_back(std::move(param));
  }
  return out;
}

ExprPtr Builder::or_test(P::Or_testContext* c) {
  auto parts = c->and_test();
  if (parts.size() == 1) return and_test(parts[0]);
  ExprPtr e = make(ExprKind::BoolOp, c);
  e->op = Op::Or;
  for (auto* p : parts) e->items.push_back(and_test(p));
  return e;
}

ExprPtr Builder::and_test(P::And_testContext* c) {
  auto parts = c->not_test();
  if (parts.size() == 1) return not_test(parts[0]);
  ExprPtr e = make(ExprKind::BoolOp, c);
  e->op = Op::And;
  for (auto* p : parts) e->items.push_back(not_test(p));
  return e;
}

ExprPtr Builder::not_test(P::Not_testContext* c) {
  if (!c->NOT()) return comparison(c->comparison());
  ExprPtr e = make(ExprKind::Unary, c);
  e->op = Op::Not;
  e->items.push_back(not_test(c->not_test()));
  return e;
}

ExprPtr Builder::comparison(P::ComparisonContext* c) {
  auto operands = c->expr();
  if (operands.size() == 1) return expr(operands[0]);
  ExprPtr e = make(ExprKind::Compare, c);
  for (auto* op : c->comp_op()) e->compare_ops.push_back(compare_op(op));
  for (auto* operand : operands) e->items.push_back(expr(operand));
  return e;
}

ExprPtr Builder::expr(P::ExprContext* c) {
  if (auto* p = dynamic_cast<P::PrimaryExprContext*>(c)) return atom_expr(p->atom_expr());
  if (auto* b = dynamic_cast<P::BinaryExprContext*>(c)) return binary(b);
  auto* u = static_cast<P::UnaryExprContext*>(c);
  ExprPtr e = make(ExprKind::Unary, c);
  e->op = u->op->getType() == P::MINUS ? Op::Neg : u->op->getType() == P::ADD ? Op::Pos : Op::Invert;
  e->items.push_back(expr(u->expr()));
  return e;
}

// Left-associative chains nest down the left operand; walk that spine without recursion.
ExprPtr Builder::binary(P::BinaryExprContext* c) {
  std::vector<P::BinaryExprContext*> spine;
  P::ExprContext* leftmost = c;
  while (auto* b = dynamic_cast<P::BinaryExprContext*>(leftmost)) {
    spine.push_back(b);
    leftmost = b->expr(0);
  }
  ExprPtr acc = expr(leftmost);
  for (auto it = spine.rbegin(); it != spine.rend(); ++it) {
    ExprPtr e = make(ExprKind::Binary, *it);
    e->op = binary_op((*it)->op->getType());
    e->items.push_back(std::move(acc));
    e->items.push_back(expr((*it)->expr(1)));
    acc = std::move(e);
  }
  return acc;
}

ExprPtr Builder::atom_expr(P::Atom_exprContext* c) {
  ExprPtr e = atom(c->atom());
  for (auto* t : c->trailer()) {
    SourceLoc loc = s_.span(c->getStart(), t->getStop());
    ExprPtr next;
    if (auto* call = dynamic_cast<P::CallTrailerContext*>(t)) {
      next = std::make_unique<Expr>(ExprKind::Call, loc);
      next->items.push_back(std::move(e));
      if (call->arglist()) call_args(call->arglist(), *next);
    } else if (auto* sub = dynamic_cast<P::SubscriptTrailerContext*>(t)) {
      next = std::make_unique<Expr>(ExprKind::Subscript, loc);
      next->items.push_back(std::move(e));
      next->items.push_back(subscripts(sub->subscriptlist()));
    } else {
      auto* attr = static_cast<P::AttributeTrailerContext*>(t);
      next = std::make_unique<Expr>(ExprKind::Attribute, loc);
      next->items.push_back(std::move(e));
      next->name = attr->NAME()->getText();
    }
    e = std::move(next);
  }
  return e;
}

void Builder::call_args(P::ArglistContext* c, Expr& call) {
  auto args = c->argument();
  for (auto* a : args) {
    if (a->dstar) {
      call.keywords.push_back({"", test(a->test(0)), s_.loc(a)});
    } else if (a->star) {
      ExprPtr st = make(ExprKind::Starred, a);
      st->items.push_back(test(a->test(0)));
      call.args.push_back(std::move(st));
    } else if (a->value) {
      ExprPtr key = test(a->test(0));
      if (key->kind != ExprKind::Name) error(key->loc, a->getStart(), "keyword argument name must be a plain name");
      call.keywords.push_back({key->name, test(a->value), s_.loc(a)});
    } else {
      ExprPtr value = test(a->test(0));
      if (a->comp_for()) {
        if (args.size() != 1) error(s_.loc(a), a->getStart(), "generator expression must be parenthesized");
        value = list_comp(std::move(value), a->comp_for(), a);
      } else if (!call.keywords.empty()) {
        error(value->loc, a->getStart(), "positional argument follows keyword argument");
      }
      call.args.push_back(std::move(value));
    }
  }
}

ExprPtr Builder::subscripts(P::SubscriptlistContext* c) {
  std::vector<ExprPtr> items;
  for (auto* s : c->subscript()) items.push_back(subscript(s));
  return tuple_or_single(std::move(items), !c->COMMA().empty(), c);
}

ExprPtr Builder::subscript(P::SubscriptContext* c) {
  if (!c->colon) return test(c->lower);
  ExprPtr e = make(ExprKind::Slice, c);
  e->items.push_back(opt_test(c->lower));
  e->items.push_back(opt_test(c->upper));
  e->items.push_back(c->sliceop() ? opt_test(c->sliceop()->test()) : nullptr);
  return e;
}

ExprPtr Builder::atom(P::AtomContext* c) {
  if (auto* n = dynamic_cast<P::NameAtomContext*>(c)) {
    ExprPtr e = make(ExprKind::Name, c);
    e->name = n->NAME()->getText();
    return e;
  }
  if (auto* num = dynamic_cast<P::NumberAtomContext*>(c)) return number(num);
  if (auto* str = dynamic_cast<P::StringAtomContext*>(c)) return strings(str);
  if (auto* p = dynamic_cast<P::ParenAtomContext*>(c)) {
    if (!p->testlist_comp()) return make(ExprKind::Tuple, c);
    ExprPtr e = sequence(p->testlist_comp(), ExprKind::Tuple, c);
    if (e->kind == ExprKind::Tuple) e->parenthesized = true;  // `return (t0,)` prints back so
    return e;
  }
  if (auto* l = dynamic_cast<P::ListAtomContext*>(c)) {
    if (!l->testlist_comp()) return make(ExprKind::List, c);
    return sequence(l->testlist_comp(), ExprKind::List, c);
  }
  if (auto* d = dynamic_cast<P::DictAtomContext*>(c)) return dict(d);
  if (dynamic_cast<P::EllipsisAtomContext*>(c)) return make(ExprKind::Ellipsis, c);
  if (dynamic_cast<P::TrueAtomContext*>(c)) return make(ExprKind::True, c);
  if (dynamic_cast<P::FalseAtomContext*>(c)) return make(ExprKind::False, c);
  return make(ExprKind::None, c);
}

ExprPtr Builder::number(P::NumberAtomContext* c) {
  std::string text = c->NUMBER()->getText();
  if (is_float_literal(text)) {
    ExprPtr e = make(ExprKind::Float, c);
    e->float_value = parse_float_literal(text);
    return e;
  }
  ExprPtr e = make(ExprKind::Int, c);
  if (!parse_int_literal(text, e->int_value)) error(e->loc, c->getStart(), "integer literal too large");
  return e;
}

ExprPtr Builder::strings(P::StringAtomContext* c) {
  ExprPtr e = make(ExprKind::Str, c);
  for (auto* node : c->STRING()) {
    std::string err;
    if (!decode_string(s_.token_text(node->getSymbol()), e->str_value, err))
      error(s_.loc(node->getSymbol()), node->getSymbol(), err);
  }
  return e;
}

// Parenthesized or bracketed items: a comprehension, a single parenthesized expression, or a
// Tuple/List.
ExprPtr Builder::sequence(P::Testlist_compContext* c, ExprKind kind, antlr4::ParserRuleContext* whole) {
  std::vector<ExprPtr> items;
  for (auto* item : c->star_or_test()) items.push_back(star_or_test(item));
  if (c->comp_for()) return list_comp(std::move(items[0]), c->comp_for(), whole);
  if (kind == ExprKind::Tuple && c->COMMA().empty()) return std::move(items[0]);
  ExprPtr e = make(kind, whole);
  e->items = std::move(items);
  return e;
}

ExprPtr Builder::dict(P::DictAtomContext* c) {
  ExprPtr e = make(ExprKind::Dict, c);
  if (!c->dictmaker()) return e;
  for (auto* item : c->dictmaker()->dict_item()) {
    e->keys.push_back(test(item->test(0)));
    e->items.push_back(test(item->test(1)));
  }
  return e;
}

ExprPtr Builder::list_comp(ExprPtr element, P::Comp_forContext* c, antlr4::ParserRuleContext* whole) {
  ExprPtr e = make(ExprKind::ListComp, whole);
  e->items.push_back(std::move(element));
  for (auto* clause : c->comp_clause()) {
    ast::Comprehension comp;
    comp.target = exprlist(clause->exprlist());
    check_target(*comp.target, "assign to", clause->getStart());
    comp.iter = or_test(clause->or_test());
    for (auto* cond : clause->comp_if()) comp.conds.push_back(or_test(cond->or_test()));
    e->comps.push_back(std::move(comp));
  }
  return e;
}

}  // namespace tracer::parse
