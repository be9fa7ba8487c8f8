// The parser front end: source text in, AST out. The only place that knows ANTLR.
#pragma once
#include <memory>
#include <string>

#include "common/source.h"
#include "interpreter/ast.h"

namespace tracer::parse {

// Parses one registered file of sm. Syntax errors are appended to diags (several per file,
// without cascades); the returned module holds every statement that parsed.
std::unique_ptr<ast::Module> parse_module(const SourceManager& sm, int32_t file, DiagnosticList& diags);

}  // namespace tracer::parse
