// Builder, comments: Thunder's "# name: \"type\"" lines (TypeComment statements and trailing
// type_comments), plain comments kept on the next statement, and fusion bodies parsed back out
// of the commented subsymbol lines under "[t0] = nvFusion0(...)".
#include <algorithm>
#include <cctype>
#include <functional>
#include <utility>

#include "interpreter/parse_builder.h"
#include "interpreter/parse_text.h"

namespace tracer::parse {

using ast::ExprKind;
using ast::StmtKind;

namespace {

enum class Absorb { None, Fusion, Decomposed };

// "[a, b] = nvFusion0(x)": a fusion; "(a, b) = name(x)" or "a = name(x)" with another plain
// name: a call that Thunder may print with its decomposition (an executor's or a user's op, or a
// dotted one: `mul = thunder.torch.experimental.dtensor_torch_and_aten_ops.dtensor_mul(x, w)`).
Absorb absorb_kind(const ast::Stmt& s) {
  if (s.kind != StmtKind::Assign || s.targets.size() != 1 || !s.value) return Absorb::None;
  const ast::Expr& call = *s.value;
  if (call.kind != ExprKind::Call) return Absorb::None;
  if (call.items[0]->kind == ExprKind::Attribute) {
    const ast::Expr* e = call.items[0].get();
    while (e->kind == ExprKind::Attribute) e = e->items[0].get();
    if (e->kind != ExprKind::Name) return Absorb::None;
  } else if (call.items[0]->kind != ExprKind::Name) {
    return Absorb::None;
  }
  const ast::Expr& target = *s.targets[0];
  bool names = target.kind == ExprKind::List || target.kind == ExprKind::Tuple;
  for (const auto& item : target.items) names = names && item->kind == ExprKind::Name;
  if (names && call.items[0]->kind == ExprKind::Name && is_fusion_name(call.items[0]->name)) return Absorb::Fusion;
  // (t2, (_, _)) = op(x): nested tuples of names too.
  std::function<bool(const ast::Expr&)> nested = [&](const ast::Expr& e) {
    if (e.kind == ExprKind::Name) return true;
    if (e.kind != ExprKind::Tuple && e.kind != ExprKind::List) return false;
    for (const auto& item : e.items)
      if (!nested(*item)) return false;
    return true;
  };
  return nested(target) ? Absorb::Decomposed : Absorb::None;
}

// A commented subsymbol line as Thunder prints one: "t0 = ltorch.mul(a, b)  # ...",
// "(t0, _) = f(x)", "[t1] = nvFusion0(t0)", "t2 = 3.0" (not prose that happens to sit deeper).
bool looks_like_subsymbol(std::string_view line) {
  size_t eq = line.find('=');
  if (eq == std::string_view::npos || eq == 0 || (eq + 1 < line.size() && line[eq + 1] == '=')) return false;
  for (size_t i = 0; i < eq; ++i) {
    char c = line[i];
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ',' || c == ' ' || c == '(' || c == ')' ||
          c == '[' || c == ']'))
      return false;
  }
  return true;
}

}  // namespace

bool Builder::is_comment(size_t index) { return s_.token(index)->getType() == TracerLexer::COMMENT; }

std::string Builder::comment_body(antlr4::Token* t) { return s_.token_text(t).substr(1); }

SourceLoc Builder::comment_loc(antlr4::Token* t) {
  std::string text = s_.token_text(t);
  size_t length = text.size();
  while (length > 1 && (text[length - 1] == ' ' || text[length - 1] == '\t')) --length;
  return s_.text_loc(t->getStartIndex(), length);
}

std::vector<std::string> Builder::take_comments() {
  std::vector<std::string> comments = std::move(pending_comments_);
  pending_comments_.clear();
  if (header_) {
    header_->insert(header_->end(), comments.begin(), comments.end());
    header_ = nullptr;
    return {};
  }
  return comments;
}

void Builder::gap_comments(size_t from, size_t to, ast::Block& out) {
  for (size_t i = from; i < to && i < s_.token_count(); ++i) {
    antlr4::Token* t = s_.token(i);
    if (!is_comment(i) || !starts_line(s_.text(), t->getStartIndex())) continue;
    std::string body = comment_body(t), name, type;
    if (!match_type_comment(body, name, type)) {
      // Thunder's 2023 printouts state a string argument's value with no name: `# "sum"`
      // (a TypeComment without a name; the parameters' comments give it its place).
      std::string_view lit = trim(body);
      if (lit.size() < 2 || lit.front() != '"' || lit.back() != '"' || lit.substr(1, lit.size() - 2).find('"') != std::string_view::npos) {
        pending_comments_.emplace_back(trim(body));
        continue;
      }
      type = "str " + std::string(lit.substr(1, lit.size() - 2));
    }
    ast::StmtPtr s = stmt(StmtKind::TypeComment, comment_loc(t));
    s->name = std::move(name);
    s->type_string = std::move(type);
    s->comments = take_comments();
    out.push_back(std::move(s));
  }
}

// Trailing comments of the statement's tokens [first, last], and those right after it on its
// line (past a ';' too).
void Builder::attach_trailing(ast::Stmt& s, size_t first, size_t last) {
  size_t end = last + 1, n = s_.token_count();
  while (end < n && (s_.token(end)->getChannel() != antlr4::Token::DEFAULT_CHANNEL ||
                     s_.token(end)->getType() == TracerLexer::SEMI_COLON))
    ++end;
  for (size_t i = first; i < end; ++i) {
    antlr4::Token* t = s_.token(i);
    std::string name, type;
    if (!is_comment(i) || starts_line(s_.text(), t->getStartIndex())) continue;
    if (match_type_comment(comment_body(t), name, type))
      s.type_comments.push_back({std::move(name), std::move(type), comment_loc(t)});
    else
      s.trailing_comment = std::string(trim(comment_body(t)));
  }
}

// s was built from the tokens starting at stmt_token; cursor is the token after it. Returns
// the token after the comment lines taken as the fusion body.
size_t Builder::absorb_fusion(ast::Stmt& s, size_t stmt_token, size_t cursor, size_t hi) {
  Absorb kind = absorb_kind(s);
  const std::string& text = s_.text();
  size_t column = column_of(text, s_.token(stmt_token)->getStartIndex());
  std::vector<antlr4::Token*> lines, all;
  size_t first_indent = 0, i = cursor;
  for (; i < hi && i < s_.token_count(); ++i) {
    antlr4::Token* t = s_.token(i);
    if (t->getChannel() == antlr4::Token::DEFAULT_CHANNEL) break;
    if (!is_comment(i) || !starts_line(text, t->getStartIndex())) continue;
    size_t indent = column_of(text, t->getStartIndex());
    if (indent <= column) break;
    if (lines.empty()) first_indent = indent;
    all.push_back(t);
    if (indent <= first_indent) lines.push_back(t);  // deeper lines: nested subsymbols, kept as comments
  }
  if (lines.empty()) return cursor;
  // A call that is not a fusion takes the lines only where each reads as a subsymbol; other
  // statements keep such lines as comments after them (printed back there).
  bool absorb = kind != Absorb::None;
  for (antlr4::Token* t : lines)
    if (kind == Absorb::Decomposed && !looks_like_subsymbol(trim(comment_body(t)))) absorb = false;
  if (!absorb) {
    for (antlr4::Token* t : all) {
      std::string name, type, body = comment_body(t);
      if (match_type_comment(body, name, type)) return cursor;  // a type comment: a statement of its own
    }
    for (antlr4::Token* t : all) s.after_comments.emplace_back(trim(comment_body(t)));
    return i;
  }
  s.kind = StmtKind::FusionDef;
  s.decomposed = kind == Absorb::Decomposed;
  s.body = parse_fusion_body(all, first_indent);
  return i;
}

// Parses the comment lines' text (after '#' and blanks) as statements; OffsetMap keeps their
// locations pointing into the original file. Lines deeper than the first level (a subsymbol's
// own subsymbols) stay comment lines, indented by how much deeper they are, so that the body's
// statements take them as their decompositions in turn.
ast::Block Builder::parse_fusion_body(const std::vector<antlr4::Token*>& lines, size_t first_indent) {
  const std::string& text = s_.text();
  std::string body;
  OffsetMap map;
  for (antlr4::Token* t : lines) {
    size_t begin = t->getStartIndex(), end = t->getStartIndex() + s_.token_text(t).size();
    size_t indent = column_of(text, begin);
    if (indent > first_indent) {
      body.append(indent - first_indent, ' ');
    } else {
      ++begin;
      while (begin < end && (text[begin] == ' ' || text[begin] == '\t')) ++begin;
    }
    map.add(static_cast<uint32_t>(body.size()), s_.file_offset(begin));
    body.append(text, begin, end - begin);
    body += '\n';
  }
  Session sub(std::move(body), std::move(map), s_.file(), s_.errors());
  P::File_inputContext* tree = sub.parse();
  Builder builder(sub, /*detect_fusions=*/true);
  ast::Block statements = builder.build_file(tree, nullptr);
  sub.finish();
  return statements;
}

}  // namespace tracer::parse
