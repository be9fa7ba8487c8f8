// Syntax error recovery and messages: one readable error per broken statement, then resume at
// the next statement of the same or an outer block (no cascades).
#include <string>

#include "interpreter/parse_session.h"

namespace tracer::parse {

namespace {

using P = TracerParser;

bool has(const antlr4::misc::IntervalSet& set, size_t type) { return set.contains(type); }

bool is_line_break(size_t type) { return type == P::NEWLINE || type == P::INDENT || type == P::DEDENT; }

// At an INDENT: skips the block it opens, through the matching DEDENT.
void skip_block(antlr4::TokenStream* in) {
  size_t depth = 0;
  do {
    size_t t = in->LA(1);
    if (t == antlr4::Token::EOF) return;
    if (t == P::INDENT) ++depth;
    if (t == P::DEDENT) --depth;
    in->consume();
  } while (depth > 0);
}

// Skips the rest of the logical line and the block it may open. Never eats a DEDENT that
// closes an enclosing block.
void skip_line(antlr4::TokenStream* in) {
  for (;;) {
    size_t t = in->LA(1);
    if (t == antlr4::Token::EOF || t == P::DEDENT) return;
    if (t == P::INDENT) return skip_block(in);
    in->consume();
    if (t == P::NEWLINE) break;
  }
  if (in->LA(1) == P::INDENT) skip_block(in);
}

std::string quoted_text(const antlr4::Token* t) {
  std::string s = t->getText();
  if (s.size() > 24) s = s.substr(0, 21) + "...";
  return "'" + s + "'";
}

std::string show_found(antlr4::Parser* p, const antlr4::Token* t) {
  switch (t->getType()) {
    case antlr4::Token::EOF: return "end of file";
    case P::NEWLINE: return "end of line";
    case P::INDENT: return "indent";
    case P::DEDENT: return "unindent";
    case P::NAME: case P::NUMBER: case P::STRING: case P::ERRORCHAR: return quoted_text(t);
    default: {
      std::string lit = p->getVocabulary().getLiteralName(t->getType());
      return lit.empty() ? quoted_text(t) : lit;
    }
  }
}

std::string show_expected(antlr4::Parser* p, size_t type) {
  switch (type) {
    case antlr4::Token::EOF: return "end of file";
    case P::NEWLINE: return "end of line";
    case P::INDENT: return "an indented block";
    case P::NAME: return "a name";
    case P::NUMBER: return "a number";
    case P::STRING: return "a string";
    default: {
      std::string lit = p->getVocabulary().getLiteralName(type);
      return lit.empty() ? p->getVocabulary().getDisplayName(type) : lit;
    }
  }
}

// What a ':' closes, for "expected ':' after ..." messages.
const char* header_of(antlr4::RuleContext* ctx) {
  if (dynamic_cast<P::If_stmtContext*>(ctx)) return "'if' condition";
  if (dynamic_cast<P::Elif_clauseContext*>(ctx)) return "'elif' condition";
  if (dynamic_cast<P::Else_clauseContext*>(ctx)) return "'else'";
  if (dynamic_cast<P::While_stmtContext*>(ctx)) return "'while' condition";
  if (dynamic_cast<P::For_stmtContext*>(ctx)) return "'for' clause";
  if (dynamic_cast<P::With_stmtContext*>(ctx)) return "'with' item";
  if (dynamic_cast<P::FuncdefContext*>(ctx)) return "function signature";
  if (dynamic_cast<P::LambdefContext*>(ctx)) return "lambda parameters";
  return nullptr;
}

bool starts_expression(size_t type) {
  switch (type) {
    case P::NAME: case P::NUMBER: case P::STRING: case P::NONE: case P::TRUE: case P::FALSE:
    case P::OPEN_PAREN: case P::OPEN_BRACK: case P::OPEN_BRACE: case P::ELLIPSIS: return true;
    default: return false;
  }
}

std::string list_expected(antlr4::Parser* p, const antlr4::misc::IntervalSet& expected) {
  std::vector<std::string> names;
  for (ssize_t type : expected.toList()) names.push_back(show_expected(p, static_cast<size_t>(type)));
  std::string out = "expected ";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += names[i];
  }
  return out;
}

std::string closing_bracket(const antlr4::misc::IntervalSet& expected) {
  if (expected.size() != 1) return {};
  if (has(expected, P::CLOSE_PAREN)) return "')'";
  if (has(expected, P::CLOSE_BRACK)) return "']'";
  if (has(expected, P::CLOSE_BRACE)) return "'}'";
  return {};
}

std::string describe(antlr4::Parser* p, const antlr4::RecognitionException& e, const antlr4::Token* found) {
  size_t type = found->getType();
  antlr4::misc::IntervalSet expected = e.getExpectedTokens();
  bool at_end = type == P::NEWLINE || type == antlr4::Token::EOF;
  if (type == P::INDENT) return "unexpected indent";
  if (has(expected, P::INDENT)) return "expected an indented block";
  const char* header = has(expected, P::COLON) ? header_of(e.getCtx()) : nullptr;
  if (header) return std::string("expected ':' after ") + header;
  if (has(expected, P::NAME) && has(expected, P::NUMBER)) return "expected an expression";
  std::string close = closing_bracket(expected);
  if (!close.empty() && starts_expression(type)) return "expected ',' or " + close;
  if (!has(expected, P::NEWLINE) && !expected.isEmpty() && expected.size() <= 3) {
    std::string msg = list_expected(p, expected);
    return at_end ? msg : msg + ", found " + show_found(p, found);
  }
  return "unexpected " + show_found(p, found);
}

}  // namespace

void ErrorStrategy::reportError(antlr4::Parser* parser, const antlr4::RecognitionException& e) {
  if (unwinding_) return;
  unwinding_ = true;
  antlr4::Token* found = e.getOffendingToken() ? e.getOffendingToken() : parser->getCurrentToken();
  session_.error(found, describe(parser, e, found));
}

void ErrorStrategy::recover(antlr4::Parser* parser, std::exception_ptr e) {
  antlr4::ParserRuleContext* ctx = parser->getContext();
  antlr4::TokenStream* in = parser->getTokenStream();
  if (auto* stmt = dynamic_cast<P::StmtContext*>(ctx)) {
    // An error found at the start of a later line (a missing block) leaves that line alone.
    bool next_line = in->index() > stmt->getStart()->getTokenIndex() && is_line_break(in->LT(-1)->getType());
    if (!next_line) skip_line(in);
    // The elif/else clauses of a broken 'if' go with it.
    if (stmt->getStart()->getType() == P::IF)
      while (in->LA(1) == P::ELIF || in->LA(1) == P::ELSE) skip_line(in);
    unwinding_ = false;
    return;
  }
  if (dynamic_cast<P::File_inputContext*>(ctx)) {
    while (in->LA(1) != antlr4::Token::EOF) in->consume();
    unwinding_ = false;
    return;
  }
  std::rethrow_exception(e);
}

antlr4::Token* ErrorStrategy::recoverInline(antlr4::Parser* parser) {
  throw antlr4::InputMismatchException(parser);
}

void ErrorStrategy::sync(antlr4::Parser* parser) {
  if (!dynamic_cast<P::StmtsContext*>(parser->getContext())) return;
  antlr4::TokenStream* in = parser->getTokenStream();
  const antlr4::atn::ATN& atn = parser->getATN();
  antlr4::atn::ATNState* state = atn.states[parser->getState()];
  for (;;) {
    size_t la = in->LA(1);
    if (la == antlr4::Token::EOF || la == P::DEDENT || has(atn.nextTokens(state), la)) return;
    antlr4::Token* found = in->LT(1);
    session_.error(found, la == P::INDENT ? "unexpected indent" : "unexpected " + show_found(parser, found));
    if (la == P::INDENT) skip_block(in);
    else skip_line(in);
  }
}

}  // namespace tracer::parse
