// Helpers for the parser tests: parse a string, print AST nodes as compact S-expressions, and
// render diagnostics as "line:col: message".
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "common/source.h"
#include "interpreter/ast.h"

namespace tracer::parse::testing {

struct Parsed {
  SourceManager sm;
  DiagnosticList diags;
  std::unique_ptr<ast::Module> module;
  int32_t file = -1;

  // "line:col: message" for each diagnostic, in order.
  std::vector<std::string> errors() const;
  std::string rendered() const { return diags.render_all(sm); }
  // The file text under loc.
  std::string text_at(SourceLoc loc) const;
};

std::unique_ptr<Parsed> parse_text(const std::string& text, const std::string& name = "test.trace");

// (Binary Add a (Call f 1 x=2)), names and literals bare, strings quoted.
std::string sexpr(const ast::Expr* e);
// One statement without its body: "assign (Tuple a b) = f".
std::string head(const ast::Stmt& s);
// One statement (and its body, indented) per line.
std::string dump(const ast::Block& block, int indent = 0);
// Parses "x = <expr>" and returns the S-expression of the value, or the errors.
std::string expr_of(const std::string& expression);

}  // namespace tracer::parse::testing
