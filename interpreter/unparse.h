// A module's source printed back from its AST: one canonical text (two-space indents, single
// quotes, comments and Thunder's type comments kept, a fusion's subsymbols as commented lines), so
// that unparse(parse(unparse(parse(src)))) == unparse(parse(src)). `tracer print` shows it for a
// printout it cannot trace (parameters without types).
#pragma once
#include <string>

#include "interpreter/ast.h"

namespace tracer::ast {

std::string unparse(const Module& m);
std::string unparse(const Expr& e);
// An operator as the language writes it: "+", "//", "not", "is not", ...
const char* op_text(Op op);

}  // namespace tracer::ast
