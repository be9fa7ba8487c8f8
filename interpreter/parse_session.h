// One ANTLR run over one text (a whole file, or a fusion body assembled from comment lines),
// with its error recovery. Private to the parser front end: ANTLR types stop here.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "TracerLexer.h"
#include "TracerParser.h"
#include "common/source.h"

namespace tracer::parse {

using grammar::TracerLexer;
using grammar::TracerParser;

// Maps offsets in a parsed text to byte offsets in the file: identity for a whole file,
// one piece per line for a fusion body cut out of comments.
class OffsetMap {
 public:
  void add(uint32_t text_begin, uint32_t file_begin) { pieces_.emplace_back(text_begin, file_begin); }
  uint32_t to_file(size_t text_offset) const;

 private:
  std::vector<std::pair<uint32_t, uint32_t>> pieces_;  // ascending text_begin
};

class Session;

// Replaces ANTLR's recovery: the first error of a statement is reported, the exception unwinds
// to the enclosing `stmt` rule, which skips the rest of the logical line (and a block opened by
// it). Stray tokens where a statement should start are reported and skipped line by line.
class ErrorStrategy : public antlr4::DefaultErrorStrategy {
 public:
  explicit ErrorStrategy(Session& session) : session_(session) {}
  void reportError(antlr4::Parser* parser, const antlr4::RecognitionException& e) override;
  void recover(antlr4::Parser* parser, std::exception_ptr e) override;
  antlr4::Token* recoverInline(antlr4::Parser* parser) override;
  void sync(antlr4::Parser* parser) override;

 private:
  Session& session_;
  bool unwinding_ = false;  // an error was reported and is travelling to its statement
};

class Session {
 public:
  // text: the bytes to parse; map: where they lie in file; errors collects diagnostics.
  Session(std::string text, OffsetMap map, int32_t file, std::vector<Diagnostic>& errors);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Lexes everything (reporting lexical errors), then parses; never throws.
  TracerParser::File_inputContext* parse();

  const std::string& text() const { return text_; }
  int32_t file() const { return file_; }
  std::vector<Diagnostic>& errors() { return errors_; }
  antlr4::CommonTokenStream& tokens() { return tokens_; }
  antlr4::Token* token(size_t index) { return tokens_.get(index); }
  size_t token_count() { return tokens_.size(); }
  uint32_t file_offset(size_t text_offset) const { return map_.to_file(text_offset); }

  SourceLoc loc(const antlr4::Token* t) const;
  SourceLoc span(const antlr4::Token* first, const antlr4::Token* last) const;
  SourceLoc loc(antlr4::ParserRuleContext* c) const;
  SourceLoc text_loc(size_t offset, size_t length) const;
  std::string token_text(const antlr4::Token* t) const;

  // Records an error; finish() keeps one per logical line (the leftmost; lexical ones win ties).
  void error(const antlr4::Token* at, std::string message);
  void error(SourceLoc at, size_t logical_line, std::string message);
  // Moves the chosen errors to the list given at construction. Call once, after building.
  void finish();
  size_t logical_line(const antlr4::Token* t) const;

 private:
  void report_lexical_errors();

  std::string text_;
  OffsetMap map_;
  int32_t file_;
  std::vector<Diagnostic>& errors_;
  std::vector<size_t> line_of_token_;
  std::vector<std::pair<size_t, Diagnostic>> candidates_;  // (logical line, error)
  antlr4::ANTLRInputStream input_;
  TracerLexer lexer_;
  antlr4::CommonTokenStream tokens_;
  TracerParser parser_;
};

}  // namespace tracer::parse
