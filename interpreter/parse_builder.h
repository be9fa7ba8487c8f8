// Turns the ANTLR parse tree of one Session into AST nodes, including the Thunder comment forms
// (type comments, fusion bodies). Private to the parser front end.
#pragma once
#include <string>
#include <vector>

#include "interpreter/ast.h"
#include "interpreter/parse_session.h"

namespace tracer::parse {

class Builder {
 public:
  // detect_fusions: turn "[a] = nvFusion0(x)" + deeper comment lines into FusionDef.
  Builder(Session& session, bool detect_fusions) : s_(session), detect_fusions_(detect_fusions) {}

  // Statements of a whole text. Comments before the first statement go to *header when given.
  ast::Block build_file(TracerParser::File_inputContext* file, std::vector<std::string>* header);

 private:
  using P = TracerParser;

  // ------------------------------------------------------------- statements (parse_stmt.cpp)
  void build_stmts(P::StmtsContext* stmts, size_t lo, size_t hi, ast::Block& out);
  size_t build_stmt(P::StmtContext* c, ast::Block& out);
  void build_block(P::BlockContext* c, ast::Block& out);
  void build_simple(P::Simple_stmtsContext* c, std::vector<std::string> comments, ast::Block& out);
  ast::StmtPtr small(P::Small_stmtContext* c);
  ast::StmtPtr expr_stmt(P::Expr_stmtContext* c);
  ast::StmtPtr import_from(P::Import_fromContext* c);
  ast::StmtPtr compound(P::Compound_stmtContext* c);
  ast::StmtPtr if_stmt(P::If_stmtContext* c);
  ast::StmtPtr with_stmt(P::With_stmtContext* c);
  ast::StmtPtr funcdef(P::FuncdefContext* c, std::vector<ast::ExprPtr> decorators);
  std::vector<ast::Param> params(P::ParametersContext* c);
  ast::StmtPtr stmt(ast::StmtKind kind, SourceLoc loc) { return std::make_unique<ast::Stmt>(kind, loc); }
  SourceLoc header_loc(antlr4::ParserRuleContext* c, antlr4::tree::TerminalNode* colon);

  // ----------------------------------------------------------------- comments (parse_stmt.cpp)
  void gap_comments(size_t from, size_t to, ast::Block& out);
  void attach_trailing(ast::Stmt& s, size_t first, size_t last);
  std::vector<std::string> take_comments();
  bool is_comment(size_t index);
  std::string comment_body(antlr4::Token* t);
  SourceLoc comment_loc(antlr4::Token* t);
  size_t absorb_fusion(ast::Stmt& s, size_t stmt_token, size_t cursor, size_t hi);
  ast::Block parse_fusion_body(const std::vector<antlr4::Token*>& lines, size_t first_indent);

  // ------------------------------------------------------------ expressions (parse_expr.cpp)
  ast::ExprPtr test(P::TestContext* c);
  ast::ExprPtr lambda(P::LambdefContext* c);
  ast::ExprPtr or_test(P::Or_testContext* c);
  ast::ExprPtr and_test(P::And_testContext* c);
  ast::ExprPtr not_test(P::Not_testContext* c);
  ast::ExprPtr comparison(P::ComparisonContext* c);
  ast::ExprPtr expr(P::ExprContext* c);
  ast::ExprPtr binary(P::BinaryExprContext* c);
  ast::ExprPtr atom_expr(P::Atom_exprContext* c);
  ast::ExprPtr atom(P::AtomContext* c);
  ast::ExprPtr number(P::NumberAtomContext* c);
  ast::ExprPtr strings(P::StringAtomContext* c);
  ast::ExprPtr sequence(P::Testlist_compContext* c, ast::ExprKind kind, antlr4::ParserRuleContext* whole);
  ast::ExprPtr dict(P::DictAtomContext* c);
  ast::ExprPtr list_comp(ast::ExprPtr element, P::Comp_forContext* c, antlr4::ParserRuleContext* whole);
  void call_args(P::ArglistContext* c, ast::Expr& call);
  ast::ExprPtr subscripts(P::SubscriptlistContext* c);
  ast::ExprPtr subscript(P::SubscriptContext* c);
  ast::ExprPtr star_or_test(P::Star_or_testContext* c);
  ast::ExprPtr star_or_expr(P::Star_or_exprContext* c);
  ast::ExprPtr starred(P::Star_exprContext* c);
  // Comma lists: a single item without a comma is itself, otherwise a Tuple.
  ast::ExprPtr testlist_star_expr(P::Testlist_star_exprContext* c);
  ast::ExprPtr testlist(P::TestlistContext* c);
  ast::ExprPtr exprlist(P::ExprlistContext* c);
  std::vector<ast::Param> lambda_params(P::Lambda_paramsContext* c);
  ast::ExprPtr opt_test(P::TestContext* c) { return c ? test(c) : nullptr; }
  ast::ExprPtr make(ast::ExprKind kind, antlr4::ParserRuleContext* c) {
    return std::make_unique<ast::Expr>(kind, s_.loc(c));
  }
  ast::ExprPtr tuple_or_single(std::vector<ast::ExprPtr> items, bool comma, antlr4::ParserRuleContext* c);
  // Checks that e can be assigned to (or deleted); reports otherwise.
  void check_target(const ast::Expr& e, const char* what, antlr4::Token* line_of);
  void check_params(const std::vector<ast::Param>& params, antlr4::ParserRuleContext* c);
  // Reports a problem found while building, counted against line_of's logical line.
  void error(SourceLoc at, antlr4::Token* line_of, std::string message);

  Session& s_;
  bool detect_fusions_;
  std::vector<std::string>* header_ = nullptr;  // set until the first statement is made
  std::vector<std::string> pending_comments_;
};

}  // namespace tracer::parse
