// Literal decoding and Thunder comment recognition for the parser front end (no ANTLR here).
#include "interpreter/parse_text.h"

#include <cctype>
#include <charconv>
#include <cstdio>
#include <limits>

namespace tracer::parse {

namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\f'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Reads exactly n hex digits at body[i+1..]; returns false if they are not there.
bool read_hex(std::string_view body, size_t i, size_t n, uint32_t& cp) {
  if (i + n >= body.size()) return false;
  cp = 0;
  for (size_t k = 1; k <= n; ++k) {
    int v = hex_value(body[i + k]);
    if (v < 0) return false;
    cp = cp * 16 + static_cast<uint32_t>(v);
  }
  return true;
}

char simple_escape(char c) {
  switch (c) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case '\\': return '\\';
    case '\'': return '\'';
    case '"': return '"';
    case 'a': return '\a';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'v': return '\v';
    default: return 0;
  }
}

// Decodes the escape at body[i] == '\\'; returns the number of characters consumed.
size_t decode_escape(std::string_view body, size_t i, std::string& out, std::string& err) {
  if (i + 1 >= body.size()) return out += '\\', 1;
  char c = body[i + 1];
  if (char s = simple_escape(c)) return out += s, 2;
  if (c == '\n') return 2;
  if (c == '\r') return (i + 2 < body.size() && body[i + 2] == '\n') ? 3 : 2;
  if (c >= '0' && c <= '7') {
    uint32_t v = 0;
    size_t k = 1;
    for (; k <= 3 && i + k < body.size() && body[i + k] >= '0' && body[i + k] <= '7'; ++k)
      v = v * 8 + static_cast<uint32_t>(body[i + k] - '0');
    append_utf8(out, v);
    return k;
  }
  size_t n = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
  if (n == 0) return out += '\\', out += c, 2;  // unknown escapes stay as written
  uint32_t cp = 0;
  if (!read_hex(body, i + 1, n, cp) || cp > 0x10FFFF) {
    err = std::string("truncated \\") + c + " escape";
    return out += '\\', 1;
  }
  append_utf8(out, cp);
  return 2 + n;
}

std::string strip_underscores(std::string_view text) {
  std::string s;
  for (char c : text)
    if (c != '_') s += c;
  return s;
}

// literal starts with n quote characters; true when it also ends with n unescaped ones.
bool has_closing_quotes(std::string_view literal, size_t n) {
  if (literal.size() < 2 * n || literal.substr(literal.size() - n) != literal.substr(0, n)) return false;
  size_t backslashes = 0;
  for (size_t k = literal.size() - n; k > n && literal[k - 1] == '\\'; --k) ++backslashes;
  return backslashes % 2 == 0;
}

}  // namespace

bool decode_string(std::string_view token, std::string& out, std::string& err) {
  size_t i = 0;
  bool raw = false;
  while (i < token.size() && std::isalpha(static_cast<unsigned char>(token[i])))
    raw |= token[i] == 'r' || token[i] == 'R', ++i;
  if (i >= token.size()) return true;
  char q = token[i];
  std::string_view rest = token.substr(i);
  bool triple = rest.size() >= 3 && rest[1] == q && rest[2] == q;
  size_t open = triple ? 3 : 1;
  size_t close = has_closing_quotes(rest, open) ? open : 0;
  std::string_view body = rest.substr(open, rest.size() - open - close);
  for (size_t k = 0; k < body.size();) {
    if (body[k] == '\r' && k + 1 < body.size() && body[k + 1] == '\n') {
      ++k;  // CRLF inside a literal reads as LF
    } else if (body[k] == '\\' && !raw) {
      k += decode_escape(body, k, out, err);
    } else if (body[k] == '\\' && k + 1 < body.size()) {
      out += body[k];
      out += body[k + 1];
      k += 2;
    } else {
      out += body[k++];
    }
  }
  return err.empty();
}

bool is_unterminated_long_string(std::string_view token) {
  size_t i = 0;
  while (i < token.size() && std::isalpha(static_cast<unsigned char>(token[i]))) ++i;
  std::string_view rest = token.substr(i);
  if (rest.size() < 3 || rest[0] != rest[1] || rest[1] != rest[2]) return false;
  return !has_closing_quotes(rest, 3);
}

namespace {

bool has_base_prefix(std::string_view s) {
  return s.size() > 1 && s[0] == '0' && std::string_view("xXbBoO").find(s[1]) != std::string_view::npos;
}

}  // namespace

bool is_float_literal(std::string_view text) {
  if (has_base_prefix(text)) return false;
  return text.find_first_of(".eE") != std::string_view::npos;
}

bool parse_int_literal(std::string_view text, int64_t& out) {
  std::string s = strip_underscores(text);
  int base = 10;
  size_t i = 0;
  if (has_base_prefix(s)) {
    char p = static_cast<char>(std::tolower(static_cast<unsigned char>(s[1])));
    base = p == 'x' ? 16 : p == 'b' ? 2 : 8;
    i = 2;
  }
  uint64_t v = 0;
  const uint64_t limit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  for (; i < s.size(); ++i) {
    int d = hex_value(s[i]);
    if (d < 0 || d >= base) return false;
    if (v > (limit - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base)) return false;
    v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
  }
  out = static_cast<int64_t>(v);
  return true;
}

double parse_float_literal(std::string_view text) {
  std::string s = strip_underscores(text);
  double v = 0;
  auto res = std::from_chars(s.data(), s.data() + s.size(), v);
  if (res.ec == std::errc::result_out_of_range) return std::numeric_limits<double>::infinity();
  return v;
}

bool match_type_comment(std::string_view body, std::string& name, std::string& type) {
  std::string_view s = trim(body);
  size_t i = 0;
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
  std::string_view n = s.substr(0, i);
  while (i < s.size() && is_blank(s[i])) ++i;
  if (i >= s.size() || s[i] != ':') return false;
  ++i;
  while (i < s.size() && is_blank(s[i])) ++i;
  if (i >= s.size() || s[i] != '"') return false;
  size_t close = s.find('"', i + 1);
  if (close == std::string_view::npos) return false;
  std::string_view t = s.substr(i + 1, close - i - 1);
  // Thunder's 2023 parameter lines go on: `# x: "cpu f32[2, 2]" =  x  (trivial unpack)`.
  std::string_view rest = trim(s.substr(close + 1));
  if (!rest.empty() && rest[0] != '=') return false;
  name = std::string(n);
  type = std::string(t);
  return true;
}

bool is_fusion_name(std::string_view name) {
  static const std::string_view kPrefixes[] = {"nvFusion", "fusion", "torchCompile", "TorchCompile"};
  for (std::string_view p : kPrefixes) {
    if (name.size() <= p.size() || name.substr(0, p.size()) != p) continue;
    std::string_view digits = name.substr(p.size());
    bool all = true;
    for (char c : digits) all &= std::isdigit(static_cast<unsigned char>(c)) != 0;
    if (all) return true;
  }
  return false;
}

std::string_view trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (is_blank(s[b]) || s[b] == '\r' || s[b] == '\n')) ++b;
  while (e > b && (is_blank(s[e - 1]) || s[e - 1] == '\r' || s[e - 1] == '\n')) --e;
  return s.substr(b, e - b);
}

size_t column_of(std::string_view text, size_t offset) {
  size_t begin = offset;
  while (begin > 0 && text[begin - 1] != '\n' && text[begin - 1] != '\r') --begin;
  size_t col = 0;
  for (size_t i = begin; i < offset && i < text.size(); ++i) col = text[i] == '\t' ? (col / 8 + 1) * 8 : col + 1;
  return col;
}

bool starts_line(std::string_view text, size_t offset) {
  for (size_t i = offset; i > 0; --i) {
    char c = text[i - 1];
    if (c == '\n' || c == '\r') return true;
    if (!is_blank(c)) return false;
  }
  return true;
}

std::string describe_char(std::string_view text, size_t offset) {
  if (offset >= text.size()) return "end of file";
  unsigned char c = static_cast<unsigned char>(text[offset]);
  char buf[32];
  if (c >= 0x20 && c < 0x7F) return std::string("'") + static_cast<char>(c) + "'";
  size_t n = c >= 0xF0 && c < 0xF8 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  uint32_t cp = n == 1 ? c : c & (0x7F >> n);
  bool ok = n > 1 && offset + n <= text.size() && c < 0xF8;
  for (size_t k = 1; ok && k < n; ++k) {
    unsigned char d = static_cast<unsigned char>(text[offset + k]);
    ok = (d & 0xC0) == 0x80;
    cp = (cp << 6) | (d & 0x3F);
  }
  if (n == 1 && c < 0x80) {
    std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(c));
    return buf;
  }
  if (!ok) {
    std::snprintf(buf, sizeof buf, "byte 0x%02X", static_cast<unsigned>(c));
    return buf;
  }
  std::snprintf(buf, sizeof buf, " (U+%04X)", static_cast<unsigned>(cp));
  return "'" + std::string(text.substr(offset, n)) + "'" + buf;
}

}  // namespace tracer::parse
