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

// parse_module for text that stays the same for the process's life (the embedded standard
// library, named by `key`, its text's address): parsed once a process, each call returns a copy
// (ast::clone) that names `file` of sm. Text with syntax errors is parsed anew each time.
std::unique_ptr<ast::Module> parse_module_once(const SourceManager& sm, int32_t file, const void* key,
                                               DiagnosticList& diags);

// For a name a printout calls but nothing defines: what would support it (": ..."), where the
// name is one of a Thunder executor's operators or fusions; else "".
std::string unknown_name_hint(const std::string& name);

}  // namespace tracer::parse
