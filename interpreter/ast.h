// The abstract syntax tree of the trace language: what the parser front end produces and the
// interpreter consumes. ANTLR types never appear here.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/source.h"

namespace tracer::ast {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Block = std::vector<StmtPtr>;

enum class ExprKind {
  Name,        // name
  Int,         // int_value
  Float,       // float_value
  Str,         // str_value (escapes already decoded; adjacent literals concatenated)
  True, False, None,
  Ellipsis,
  List,        // items
  Tuple,       // items
  Dict,        // keys, items (same length)
  Unary,       // op, items[0]
  Binary,      // op, items[0], items[1]
  BoolOp,      // op (And/Or), items (>= 2)
  Compare,     // ops (compare_ops), items (operands, ops.size() + 1 of them)
  IfExp,       // items[0] = then, items[1] = cond, items[2] = else
  Call,        // items[0] = callee, args (positional), keywords
  Attribute,   // items[0] = object, name = attribute
  Subscript,   // items[0] = object, items[1] = index (a Slice, Tuple, or any expr)
  Slice,       // items[0..2] = lower, upper, step; an absent part is nullptr
  ListComp,    // items[0] = element, comps
  Lambda,      // params, items[0] = body
  Starred,     // items[0]: *x in a call argument list or a target list
};

enum class Op {
  // unary
  Neg, Pos, Not, Invert,
  // binary
  Add, Sub, Mul, Div, FloorDiv, Mod, Pow, MatMul, BitAnd, BitOr, BitXor, LShift, RShift,
  // bool
  And, Or,
  // compare
  Lt, Le, Gt, Ge, Eq, Ne, In, NotIn, Is, IsNot,
};

struct Keyword {
  std::string name;  // empty for **kwargs
  ExprPtr value;
  SourceLoc loc;
};

struct Comprehension {  // for target in iter if cond1 if cond2 ...
  ExprPtr target;       // Name or Tuple of Names
  ExprPtr iter;
  std::vector<ExprPtr> conds;
};

struct Param {
  std::string name;
  ExprPtr annotation;    // may be null
  ExprPtr default_value; // may be null
  enum class Kind { Normal, VarArgs, KwArgs } kind = Kind::Normal;  // *args, **kwargs
  SourceLoc loc;
};

struct Expr {
  ExprKind kind;
  SourceLoc loc;
  Op op = Op::Add;
  std::string name;      // Name, Attribute
  int64_t int_value = 0;
  double float_value = 0;
  std::string str_value;
  std::vector<ExprPtr> items;
  std::vector<ExprPtr> keys;       // Dict
  std::vector<Op> compare_ops;     // Compare
  std::vector<ExprPtr> args;       // Call positional (may contain Starred)
  std::vector<Keyword> keywords;   // Call
  std::vector<Comprehension> comps;  // ListComp
  std::vector<Param> params;       // Lambda
  bool parenthesized = false;      // Tuple: written in parentheses (`return (a, b)` prints so)
  int32_t slot = -1;               // filled by the resolver
  int32_t depth = -1;              // filled by the resolver
  // Attribute callee of a Call: the builtin method found for receivers of type method_type last
  // time (an inline cache; an interpreter runs on one thread at a time, see docs/embedding).
  mutable int32_t method_type = -1;
  mutable const void* method = nullptr;
  // Name resolved as global: where its value was found (the module's globals or the builtins)
  // for global_module at version global_version (Module::globals_version).
  mutable const void* global_module = nullptr;
  mutable uint64_t global_version = 0;
  mutable const void* global_value = nullptr;
  explicit Expr(ExprKind k, SourceLoc l = {}) : kind(k), loc(l) {}
};

enum class StmtKind {
  Expr,        // value
  Assign,      // targets (chained a = b = v: several), value; type_comments
  AugAssign,   // targets[0], op, value
  AnnAssign,   // targets[0] (a Name), annotation, value (may be null)
  Del,         // targets
  Pass, Break, Continue,
  Return,      // value (may be null)
  If,          // value = condition, body, orelse (elif is a nested If in orelse)
  For,         // targets[0] = target, value = iterable, body
  While,       // value = condition, body
  FunctionDef, // name, params, returns (annotation), decorators, body
  With,        // value = context expression, targets[0] = optional "as" target, body
  Import,      // imports
  ImportFrom,  // module, imports
  Raise,       // value (may be null)
  Assert,      // value = test, annotation = message (may be null)
  Global, Nonlocal,  // names
  // Thunder printouts: "# x: \"cuda:0 f32[2, 3]\"" on a line of its own. name = x,
  // type_string = "cuda:0 f32[2, 3]".
  TypeComment,
  // A Thunder fusion call ("[a, b] = nvFusion0(x, y)") followed by its commented subsymbols:
  // targets[0] = the target list, value = the Call, body = the subsymbol statements parsed
  // from the comments (a flat list of Assign statements, each with its type_comments).
  // With Stmt::decomposed, any other call printed with its decomposition (an executor's or a
  // user's op: "(t0, t1) = multimul(a, b)" and its commented subsymbols): the callee runs where
  // the name is defined, the decomposition where it is not.
  FusionDef,
};

struct ImportName {
  std::string name;   // dotted for Import ("torch.nn.functional"), plain for ImportFrom
  std::string asname; // may be empty
  SourceLoc loc;
};

// A trailing "# name: \"type\"" comment on a statement's line.
struct TypeComment {
  std::string name;
  std::string type_string;
  SourceLoc loc;
};

struct Stmt {
  StmtKind kind;
  SourceLoc loc;
  std::vector<ExprPtr> targets;
  ExprPtr value;
  ExprPtr annotation;
  Op op = Op::Add;
  Block body;
  Block orelse;
  std::string name;                  // FunctionDef, TypeComment
  std::vector<Param> params;         // FunctionDef
  ExprPtr returns;                   // FunctionDef return annotation
  std::vector<ExprPtr> decorators;   // FunctionDef
  std::string module;                // ImportFrom (dotted; leading dots kept)
  std::vector<ImportName> imports;   // Import, ImportFrom
  std::vector<std::string> names;    // Global, Nonlocal
  std::string type_string;           // TypeComment
  std::vector<TypeComment> type_comments;  // trailing type comments
  std::vector<std::string> comments;  // full-line comments directly above (text after '#', trimmed)
  bool decomposed = false;            // FusionDef of a call that is not a fusion (see FusionDef)
  bool blank_before = false;          // a blank line above it (or above its comments) in the source
  std::string trailing_comment;       // a comment after it on its line that is no type comment
  std::vector<std::string> after_comments;  // comment lines indented deeper right after it (subsymbols)
  explicit Stmt(StmtKind k, SourceLoc l = {}) : kind(k), loc(l) {}
  // `x = f(...)`, printed with its decomposition or not (a decomposed call is an assignment to
  // every reader of the source that looks for one).
  bool is_assign() const { return kind == StmtKind::Assign || (kind == StmtKind::FusionDef && decomposed); }
};

struct Module {
  int32_t file = -1;
  Block body;
  std::vector<std::string> header_comments;  // comment lines before the first statement
};

// A deep copy of m whose locations name `file` (ast.cpp); the inline caches start empty.
std::unique_ptr<Module> clone(const Module& m, int32_t file);

}  // namespace tracer::ast
