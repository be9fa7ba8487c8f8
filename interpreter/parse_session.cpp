// Session: runs the generated lexer and parser over one text, maps token positions to byte
// offsets of the file, and turns lexical problems into diagnostics (one per logical line).
#include "interpreter/parse_session.h"

#include <algorithm>

#include "interpreter/parse_text.h"

namespace tracer::parse {

namespace {

// ANTLR reads UTF-8 and indexes code points. Feeding each byte as its own code point (Latin-1
// read as UTF-8) makes every char index a byte offset, and no input can be invalid UTF-8.
std::string bytes_as_code_points(const std::string& text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x80) {
      out += ch;
    } else {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

// The lexer has a catch-all rule, so this only fires on surprises; it still must not print.
class LexerErrors : public antlr4::BaseErrorListener {
 public:
  explicit LexerErrors(std::vector<std::pair<size_t, std::string>>& out) : out_(out) {}
  void syntaxError(antlr4::Recognizer* recognizer, antlr4::Token*, size_t, size_t, const std::string& msg,
                   std::exception_ptr) override {
    auto* lexer = dynamic_cast<antlr4::Lexer*>(recognizer);
    out_.emplace_back(lexer ? lexer->tokenStartCharIndex : 0, msg);
  }

 private:
  std::vector<std::pair<size_t, std::string>>& out_;
};

constexpr size_t kNoIndex = static_cast<size_t>(-1);  // ANTLR's INVALID_INDEX

struct LexicalError {
  size_t offset;
  size_t logical_line;
  std::string message;
};

}  // namespace

uint32_t OffsetMap::to_file(size_t text_offset) const {
  auto off = static_cast<uint32_t>(text_offset);
  auto it = std::upper_bound(pieces_.begin(), pieces_.end(), off,
                             [](uint32_t v, const std::pair<uint32_t, uint32_t>& p) { return v < p.first; });
  if (it == pieces_.begin()) return off;
  --it;
  return it->second + (off - it->first);
}

Session::Session(std::string text, OffsetMap map, int32_t file, std::vector<Diagnostic>& errors)
    : text_(std::move(text)),
      map_(std::move(map)),
      file_(file),
      errors_(errors),
      input_(bytes_as_code_points(text_)),
      lexer_(&input_),
      tokens_(&lexer_),
      parser_(&tokens_) {
  lexer_.source = &text_;
  lexer_.removeErrorListeners();
  parser_.removeErrorListeners();
  parser_.setErrorHandler(std::make_shared<ErrorStrategy>(*this));
}

TracerParser::File_inputContext* Session::parse() {
  std::vector<std::pair<size_t, std::string>> lexer_failures;
  LexerErrors listener(lexer_failures);
  lexer_.addErrorListener(&listener);
  try {
    tokens_.fill();
  } catch (const std::exception& e) {
    error(text_loc(0, 0), 0, std::string("internal error while lexing: ") + e.what());
    lexer_.removeErrorListeners();
    return nullptr;
  }
  lexer_.removeErrorListeners();
  size_t line = 0;
  for (antlr4::Token* t : tokens_.getTokens()) {
    line_of_token_.push_back(line);
    if (t->getType() == TracerLexer::NEWLINE && t->getChannel() == antlr4::Token::DEFAULT_CHANNEL) ++line;
  }
  for (auto& failure : lexer_failures) lexer_.structure_errors.push_back({failure.first, "invalid token", 0});
  report_lexical_errors();
  try {
    return parser_.file_input();
  } catch (const antlr4::RecognitionException& e) {
    error(e.getOffendingToken(), "invalid syntax");
  } catch (const std::exception& e) {
    error(text_loc(0, 0), 0, std::string("internal parser error: ") + e.what());
  }
  return nullptr;
}

void Session::report_lexical_errors() {
  std::vector<LexicalError> found;
  for (auto& e : lexer_.structure_errors) found.push_back({e.offset, e.logical_line, e.message});
  for (antlr4::Token* t : tokens_.getTokens()) {
    size_t type = t->getType(), at = t->getStartIndex();
    if (type == TracerLexer::ERRORCHAR)
      found.push_back({at, logical_line(t), "invalid character " + describe_char(text_, at)});
    else if (type == TracerLexer::UNTERMINATED_STRING)
      found.push_back({at, logical_line(t), "unterminated string literal"});
    else if (type == TracerLexer::STRING && is_unterminated_long_string(token_text(t)))
      found.push_back({at, logical_line(t), "unterminated triple-quoted string literal"});
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const LexicalError& a, const LexicalError& b) { return a.offset < b.offset; });
  for (auto& e : found) error(text_loc(e.offset, 1), e.logical_line, e.message);
}

SourceLoc Session::text_loc(size_t offset, size_t length) const {
  offset = std::min(offset, text_.size());
  length = std::min(length, text_.size() - offset);
  return SourceLoc{file_, map_.to_file(offset), static_cast<uint32_t>(length)};
}

SourceLoc Session::span(const antlr4::Token* first, const antlr4::Token* last) const {
  size_t start = first->getStartIndex();
  if (start == kNoIndex) start = text_.size();
  size_t stop = last ? last->getStopIndex() : kNoIndex;
  if (stop == kNoIndex || stop < start || (last && last->getStartIndex() == kNoIndex))
    stop = first->getStopIndex();
  size_t length = (stop != kNoIndex && stop >= start) ? stop - start + 1 : 0;
  return text_loc(start, length);
}

SourceLoc Session::loc(const antlr4::Token* t) const { return span(t, t); }

SourceLoc Session::loc(antlr4::ParserRuleContext* c) const {
  antlr4::Token* last = c->getStop();
  if (last && last->getTokenIndex() < c->getStart()->getTokenIndex()) last = nullptr;
  return span(c->getStart(), last ? last : c->getStart());
}

std::string Session::token_text(const antlr4::Token* t) const {
  SourceLoc l = loc(t);
  size_t start = std::min<size_t>(t->getStartIndex(), text_.size());
  return text_.substr(start, l.length);
}

size_t Session::logical_line(const antlr4::Token* t) const {
  if (line_of_token_.empty()) return 0;
  size_t i = t ? t->getTokenIndex() : kNoIndex;
  return i < line_of_token_.size() ? line_of_token_[i] : line_of_token_.back();
}

void Session::error(const antlr4::Token* at, std::string message) {
  if (!at) return error(text_loc(text_.size(), 0), logical_line(nullptr), std::move(message));
  error(loc(at), logical_line(at), std::move(message));
}

void Session::error(SourceLoc at, size_t logical_line, std::string message) {
  candidates_.emplace_back(logical_line, Diagnostic{Severity::error, at, std::move(message), {}});
}

void Session::finish() {
  std::stable_sort(candidates_.begin(), candidates_.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second.loc.offset < b.second.loc.offset;
  });
  for (size_t i = 0; i < candidates_.size(); ++i)
    if (i == 0 || candidates_[i].first != candidates_[i - 1].first) errors_.push_back(std::move(candidates_[i].second));
  candidates_.clear();
}

}  // namespace tracer::parse
