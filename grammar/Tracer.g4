// The trace language: Python-like, indentation based (Starlark-sized), accepting Lightning
// Thunder trace printouts as they are. The lexer turns indentation into INDENT/DEDENT tokens and
// keeps comments on the HIDDEN channel; interpreter/parser.cpp turns the parse tree into our AST.
grammar Tracer;

tokens { INDENT, DEDENT }

@lexer::header {
#include "TracerParser.h"  // INDENT and DEDENT are declared in the parser's vocabulary
#include <deque>
#include <memory>
#include <string>
#include <vector>
}

@lexer::members {
 public:
  // An indentation or bracket problem found while lexing. logical_line counts the NEWLINE
  // tokens emitted before the offending place.
  struct StructureError {
    size_t offset;
    std::string message;
    size_t logical_line;
  };
  std::vector<StructureError> structure_errors;
  // The bytes being lexed; char indices equal byte offsets (the caller feeds one code point per
  // byte). Needed to measure indentation.
  const std::string* source = nullptr;

  static constexpr size_t kMaxIndentLevels = 100;
  static constexpr size_t kMaxNesting = 200;

  std::unique_ptr<antlr4::Token> nextToken() override {
    while (pending_.empty()) pump();
    std::unique_ptr<antlr4::Token> t = std::move(pending_.front());
    pending_.pop_front();
    return t;
  }

 private:
  struct Level {
    size_t width, alt_width;  // tabs to multiples of 8, and tabs counted as 1
    bool real;                // false: opened by a bad unindent, no INDENT/DEDENT
  };
  std::deque<std::unique_ptr<antlr4::Token>> pending_;
  std::vector<Level> levels_{{0, 0, true}};
  std::vector<size_t> brackets_;         // token types of open brackets
  std::vector<size_t> bracket_offsets_;  // where they opened
  std::vector<size_t> chain_{0};         // recursion-inducing tokens per bracket level
  size_t chain_total_ = 0;
  bool line_start_ = true;  // no significant token yet on this logical line
  size_t last_type_ = 0;    // type of the last significant token
  size_t logical_line_ = 0;
  bool stopped_ = false;          // gave up: indentation too deep
  bool reported_tabs_ = false;    // tab/space mix is reported once per file

  void pump() {
    if (stopped_) return pending_.push_back(synthetic(EOF, "<EOF>", _input->size()));
    std::unique_ptr<antlr4::Token> t = antlr4::Lexer::nextToken();
    size_t type = t->getType();
    if (type == EOF) return on_eof(std::move(t));
    if (t->getChannel() != DEFAULT_TOKEN_CHANNEL) return pending_.push_back(std::move(t));
    if (type == NEWLINE) return on_newline(std::move(t));
    if (line_start_) on_line_start(*t);
    if (stopped_) return on_eof(synthetic(EOF, "<EOF>", t->getStartIndex()));
    on_significant(*t);
    pending_.push_back(std::move(t));
  }

  void error(size_t offset, std::string message) {
    structure_errors.push_back({offset, std::move(message), logical_line_});
  }

  std::unique_ptr<antlr4::Token> synthetic(size_t type, const std::string& text, size_t pos) {
    return _factory->create({this, _input}, type, text, DEFAULT_TOKEN_CHANNEL, pos, pos, 0, 0);
  }

  void on_newline(std::unique_ptr<antlr4::Token> t) {
    if (!brackets_.empty() || line_start_) return;  // inside brackets, or a blank line
    pending_.push_back(std::move(t));
    end_logical_line();
  }

  void end_logical_line() {
    line_start_ = true;
    ++logical_line_;
    chain_.assign(1, 0);
    chain_total_ = 0;
  }

  void on_eof(std::unique_ptr<antlr4::Token> t) {
    size_t pos = t->getStartIndex();
    if (!brackets_.empty()) {
      error(bracket_offsets_.front(), std::string("'") + bracket_char(brackets_.front()) + "' was never closed");
      brackets_.clear();
      bracket_offsets_.clear();
    }
    if (!line_start_) {
      pending_.push_back(synthetic(NEWLINE, "\n", pos));
      end_logical_line();
    }
    for (; levels_.size() > 1; levels_.pop_back())
      if (levels_.back().real) pending_.push_back(synthetic(TracerParser::DEDENT, "<DEDENT>", pos));
    pending_.push_back(std::move(t));
  }

  void on_line_start(const antlr4::Token& t) {
    line_start_ = false;
    size_t pos = t.getStartIndex(), begin = pos, width = 0, alt = 0;
    while (source && begin > 0 && (*source)[begin - 1] != '\n' && (*source)[begin - 1] != '\r') --begin;
    for (size_t i = begin; source && i < pos; ++i) {
      char c = (*source)[i];
      if (c == '\t') width = (width / 8 + 1) * 8, alt += 1;
      else if (c == ' ') ++width, ++alt;
      else if (c == '\f') width = alt = 0;
    }
    const Level& top = levels_.back();
    if (width > top.width) return indent(pos, width, alt);
    if (width < top.width) return dedent(pos, width, alt);
    if (alt != top.alt_width) inconsistent_tabs(pos);
  }

  void inconsistent_tabs(size_t pos) {
    if (!reported_tabs_) error(pos, "inconsistent use of tabs and spaces in indentation");
    reported_tabs_ = true;
  }

  // An indent after a line not ending in ':' is still an INDENT: the parser reports it (or
  // skips it with the broken header before it) together with the block it opens.
  void indent(size_t pos, size_t width, size_t alt) {
    if (levels_.size() >= kMaxIndentLevels) {  // like Python, a fatal error: stop lexing here
      error(pos, "too many levels of indentation (limit " + std::to_string(kMaxIndentLevels) + ")");
      stopped_ = true;
      return;
    }
    if (alt <= levels_.back().alt_width) inconsistent_tabs(pos);
    levels_.push_back({width, alt, true});
    pending_.push_back(synthetic(TracerParser::INDENT, "<INDENT>", pos));
  }

  void dedent(size_t pos, size_t width, size_t alt) {
    while (levels_.size() > 1 && levels_.back().width > width) {
      if (levels_.back().real) pending_.push_back(synthetic(TracerParser::DEDENT, "<DEDENT>", pos));
      levels_.pop_back();
    }
    if (levels_.back().width != width) {
      error(pos, "unindent does not match any outer indentation level");
      levels_.push_back({width, alt, false});
    } else if (levels_.back().alt_width != alt) {
      inconsistent_tabs(pos);
    }
  }

  static char bracket_char(size_t type) {
    switch (type) {
      case OPEN_PAREN: return '(';
      case OPEN_BRACK: return '[';
      case OPEN_BRACE: return '{';
      case CLOSE_PAREN: return ')';
      case CLOSE_BRACK: return ']';
      default: return '}';
    }
  }

  static size_t opener_of(size_t close) {
    return close == CLOSE_PAREN ? OPEN_PAREN : close == CLOSE_BRACK ? OPEN_BRACK : OPEN_BRACE;
  }

  bool after_operand() const {
    switch (last_type_) {
      case NAME: case NUMBER: case STRING: case CLOSE_PAREN: case CLOSE_BRACK: case CLOSE_BRACE:
      case ELLIPSIS: case NONE: case TRUE: case FALSE: return true;
      default: return false;
    }
  }

  // Counts tokens that make the parser recurse (brackets, prefix operators, '**', 'if',
  // 'lambda'); past kMaxNesting the token becomes an ERRORCHAR so parsing stops there.
  bool nesting_ok(const antlr4::Token& t) {
    size_t type = t.getType();
    bool recursive = type == POWER || type == IF || type == LAMBDA || type == NOT || type == NOT_OP ||
                     ((type == MINUS || type == ADD) && !after_operand());
    bool opens = type == OPEN_PAREN || type == OPEN_BRACK || type == OPEN_BRACE;
    if (!recursive && !opens) return true;
    if (brackets_.size() + chain_total_ + 1 <= kMaxNesting) return true;
    error(t.getStartIndex(), "expression nested too deeply (limit " + std::to_string(kMaxNesting) + ")");
    return false;
  }

  void on_significant(antlr4::Token& t) {
    size_t type = t.getType();
    if (!nesting_ok(t)) {
      static_cast<antlr4::CommonToken&>(t).setType(ERRORCHAR);
      last_type_ = ERRORCHAR;
      return;
    }
    switch (type) {
      case OPEN_PAREN: case OPEN_BRACK: case OPEN_BRACE:
        brackets_.push_back(type);
        bracket_offsets_.push_back(t.getStartIndex());
        chain_.push_back(0);
        break;
      case CLOSE_PAREN: case CLOSE_BRACK: case CLOSE_BRACE: close_bracket(t); break;
      case COMMA:
        chain_total_ -= chain_.back();
        chain_.back() = 0;
        break;
      case POWER: case IF: case LAMBDA: case NOT: case NOT_OP: case MINUS: case ADD:
        if (type == POWER || type == IF || type == LAMBDA || type == NOT || type == NOT_OP || !after_operand())
          ++chain_.back(), ++chain_total_;
        break;
      default: break;
    }
    last_type_ = type;
  }

  void close_bracket(const antlr4::Token& t) {
    if (brackets_.empty()) return;  // the parser reports the stray bracket
    if (brackets_.back() != opener_of(t.getType()))
      error(t.getStartIndex(), std::string("closing '") + bracket_char(t.getType()) +
                                   "' does not match opening '" + bracket_char(brackets_.back()) + "'");
    brackets_.pop_back();
    bracket_offsets_.pop_back();
    chain_total_ -= chain_.back();
    chain_.pop_back();
  }
}

// ---------------------------------------------------------------------------------- statements

file_input : stmts EOF ;
stmts : stmt* ;
stmt : simple_stmts | compound_stmt ;
simple_stmts : small_stmt (';' small_stmt)* ';'? NEWLINE ;

small_stmt
  : expr_stmt | del_stmt | pass_stmt | break_stmt | continue_stmt | return_stmt | raise_stmt
  | import_name | import_from | global_stmt | nonlocal_stmt | assert_stmt
  ;

expr_stmt : testlist_star_expr ( annassign | augassign testlist | assign_rhs* ) ;
assign_rhs : '=' testlist_star_expr ;
annassign : ':' test ('=' testlist_star_expr)? ;
augassign
  : op=('+=' | '-=' | '*=' | '@=' | '/=' | '%=' | '&=' | '|=' | '^=' | '<<=' | '>>=' | '**=' | '//=') ;

del_stmt : 'del' exprlist ;
pass_stmt : 'pass' ;
break_stmt : 'break' ;
continue_stmt : 'continue' ;
return_stmt : 'return' testlist_star_expr? ;
raise_stmt : 'raise' test? ;
global_stmt : 'global' NAME (',' NAME)* ;
nonlocal_stmt : 'nonlocal' NAME (',' NAME)* ;
assert_stmt : 'assert' test (',' test)? ;

import_name : 'import' dotted_as_name (',' dotted_as_name)* ;
dotted_as_name : dotted_name ('as' asname=NAME)? ;
dotted_name : NAME ('.' NAME)* ;
import_from
  : 'from' ('.' | '...')* dotted_name? 'import' ('*' | '(' import_as_names ')' | import_as_names) ;
import_as_names : import_as_name (',' import_as_name)* ','? ;
import_as_name : name=NAME ('as' asname=NAME)? ;

compound_stmt : if_stmt | while_stmt | for_stmt | with_stmt | funcdef | decorated ;
if_stmt : 'if' test ':' block elif_clause* else_clause? ;
elif_clause : 'elif' test ':' block ;
else_clause : 'else' ':' block ;
while_stmt : 'while' test ':' block else_clause? ;
for_stmt : 'for' exprlist 'in' testlist ':' block else_clause? ;
with_stmt : 'with' with_item (',' with_item)* ':' block ;
with_item : test ('as' expr)? ;
decorated : decorator+ funcdef ;
decorator : '@' test NEWLINE ;
funcdef : 'def' NAME '(' parameters? ')' ('->' ret=test)? ':' block ;
parameters : param (',' param)* ','? ;
param
  : NAME (':' annotation=test)? ('=' default_value=test)?   # normalParam
  | '*' (NAME (':' annotation=test)?)?                      # starParam
  | '**' NAME (':' annotation=test)?                        # kwParam
  ;
block : NEWLINE INDENT stmts DEDENT | simple_stmts ;

// --------------------------------------------------------------------------------- expressions

test : or_test ('if' cond=or_test 'else' orelse=test)? | lambdef ;
lambdef : 'lambda' lambda_params? ':' test ;
lambda_params : lambda_param (',' lambda_param)* ','? ;
lambda_param
  : NAME ('=' default_value=test)?   # lambdaNormal
  | '*' NAME?                        # lambdaStar
  | '**' NAME                        # lambdaKw
  ;
or_test : and_test ('or' and_test)* ;
and_test : not_test ('and' not_test)* ;
not_test : 'not' not_test | comparison ;
comparison : expr (comp_op expr)* ;
comp_op : '<' | '>' | '==' | '>=' | '<=' | '!=' | 'in' | 'not' 'in' | 'is' | 'is' 'not' ;

expr
  : atom_expr                                      # primaryExpr
  | <assoc=right> expr op='**' expr                # binaryExpr
  | op=('-' | '+' | '~') expr                      # unaryExpr
  | expr op=('*' | '@' | '/' | '//' | '%') expr    # binaryExpr
  | expr op=('+' | '-') expr                       # binaryExpr
  | expr op=('<<' | '>>') expr                     # binaryExpr
  | expr op='&' expr                               # binaryExpr
  | expr op='^' expr                               # binaryExpr
  | expr op='|' expr                               # binaryExpr
  ;

star_expr : '*' expr ;
star_or_test : test | star_expr ;
star_or_expr : expr | star_expr ;
testlist_star_expr : star_or_test (',' star_or_test)* ','? ;
testlist : test (',' test)* ','? ;
exprlist : star_or_expr (',' star_or_expr)* ','? ;

atom_expr : atom trailer* ;
trailer
  : '(' arglist? ')'           # callTrailer
  | '[' subscriptlist ']'      # subscriptTrailer
  | '.' NAME                   # attributeTrailer
  ;
arglist : argument (',' argument)* ','? ;
argument : test (comp_for | '=' value=test)? | star='*' test | dstar='**' test ;
subscriptlist : subscript (',' subscript)* ','? ;
subscript
  : lower=test (colon=':' upper=test? sliceop?)?
  | colon=':' upper=test? sliceop?
  ;
sliceop : ':' test? ;

atom
  : '(' testlist_comp? ')'     # parenAtom
  | '[' testlist_comp? ']'     # listAtom
  | '{' dictmaker? '}'         # dictAtom
  | NAME                       # nameAtom
  | NUMBER                     # numberAtom
  | STRING+                    # stringAtom
  | '...'                      # ellipsisAtom
  | 'None'                     # noneAtom
  | 'True'                     # trueAtom
  | 'False'                    # falseAtom
  ;
testlist_comp : star_or_test ( comp_for | (',' star_or_test)* ','? ) ;
dictmaker : dict_item (',' dict_item)* ','? ;
dict_item : test ':' test ;
comp_for : comp_clause+ ;
comp_clause : 'for' exprlist 'in' or_test comp_if* ;
comp_if : 'if' or_test ;

// --------------------------------------------------------------------------------------- lexer

DEF : 'def' ;
RETURN : 'return' ;
RAISE : 'raise' ;
FROM : 'from' ;
IMPORT : 'import' ;
AS : 'as' ;
GLOBAL : 'global' ;
NONLOCAL : 'nonlocal' ;
ASSERT : 'assert' ;
IF : 'if' ;
ELIF : 'elif' ;
ELSE : 'else' ;
WHILE : 'while' ;
FOR : 'for' ;
IN : 'in' ;
WITH : 'with' ;
OR : 'or' ;
AND : 'and' ;
NOT : 'not' ;
IS : 'is' ;
NONE : 'None' ;
TRUE : 'True' ;
FALSE : 'False' ;
LAMBDA : 'lambda' ;
DEL : 'del' ;
PASS : 'pass' ;
CONTINUE : 'continue' ;
BREAK : 'break' ;

NEWLINE : '\r'? '\n' | '\r' ;

STRING : STRING_PREFIX? ( SHORT_STRING | LONG_STRING ) ;
// A short string cut off by the end of the line; the parser front end reports it.
UNTERMINATED_STRING : STRING_PREFIX? ( '\'' ( ESCAPE | ~[\\\r\n'] )* | '"' ( ESCAPE | ~[\\\r\n"] )* ) ;

NUMBER : FLOAT_NUMBER | INTEGER ;
NAME : [a-zA-Z_] [a-zA-Z_0-9]* ;

ELLIPSIS : '...' ;
DOT : '.' ;
STAR : '*' ;
OPEN_PAREN : '(' ;
CLOSE_PAREN : ')' ;
COMMA : ',' ;
COLON : ':' ;
SEMI_COLON : ';' ;
POWER : '**' ;
ASSIGN : '=' ;
OPEN_BRACK : '[' ;
CLOSE_BRACK : ']' ;
OR_OP : '|' ;
XOR : '^' ;
AND_OP : '&' ;
LEFT_SHIFT : '<<' ;
RIGHT_SHIFT : '>>' ;
ADD : '+' ;
MINUS : '-' ;
DIV : '/' ;
MOD : '%' ;
IDIV : '//' ;
NOT_OP : '~' ;
OPEN_BRACE : '{' ;
CLOSE_BRACE : '}' ;
LESS_THAN : '<' ;
GREATER_THAN : '>' ;
EQUALS : '==' ;
GT_EQ : '>=' ;
LT_EQ : '<=' ;
NOT_EQ : '!=' ;
AT : '@' ;
ARROW : '->' ;
ADD_ASSIGN : '+=' ;
SUB_ASSIGN : '-=' ;
MULT_ASSIGN : '*=' ;
AT_ASSIGN : '@=' ;
DIV_ASSIGN : '/=' ;
MOD_ASSIGN : '%=' ;
AND_ASSIGN : '&=' ;
OR_ASSIGN : '|=' ;
XOR_ASSIGN : '^=' ;
LEFT_SHIFT_ASSIGN : '<<=' ;
RIGHT_SHIFT_ASSIGN : '>>=' ;
POWER_ASSIGN : '**=' ;
IDIV_ASSIGN : '//=' ;

SKIP_ : ( [ \t\f]+ | '\\' [ \t]* ( '\r'? '\n' | '\r' ) ) -> skip ;
COMMENT : '#' ~[\r\n]* -> channel(HIDDEN) ;
// Anything else; the parser front end reports it as an invalid character.
ERRORCHAR : . ;

fragment STRING_PREFIX : [rRuUbB] | [rR] [bB] | [bB] [rR] ;
fragment SHORT_STRING : '\'' ( ESCAPE | ~[\\\r\n'] )* '\'' | '"' ( ESCAPE | ~[\\\r\n"] )* '"' ;
// A long string may run into the end of the file; the parser front end reports that.
fragment LONG_STRING
  : '\'\'\'' ( ESCAPE | ~'\\' )*? ( '\'\'\'' | EOF )
  | '"""' ( ESCAPE | ~'\\' )*? ( '"""' | EOF )
  ;
fragment ESCAPE : '\\' ( '\r\n' | . ) ;
fragment INTEGER : DIGITS | '0' [xX] ( '_'? [0-9a-fA-F] )+ | '0' [bB] ( '_'? [01] )+ | '0' [oO] ( '_'? [0-7] )+ ;
fragment DIGITS : [0-9] ( '_'? [0-9] )* ;
fragment FLOAT_NUMBER : DIGITS '.' DIGITS? EXPONENT? | '.' DIGITS EXPONENT? | DIGITS EXPONENT ;
fragment EXPONENT : [eE] [+-]? DIGITS ;
