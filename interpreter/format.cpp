// Python's string formatting: the format-spec mini-language and printf-style `%` (format.h).
#include "interpreter/format.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace tracer::interp {

namespace {

struct Spec {
  char fill = ' ';
  char align = 0;  // < > = ^, 0: the type's default
  char sign = '-';
  bool alt = false;
  int64_t width = -1;
  char group = 0;  // , or _
  int64_t precision = -1;
  char type = 0;
};

[[noreturn]] void bad(const std::string& m) { throw std::invalid_argument(m); }

int64_t digits(const std::string& s, size_t& i) {
  int64_t v = 0;
  size_t start = i;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
    v = v * 10 + (s[i] - '0');
    if (v > 100000000) bad("Too many decimal digits in format string");
    ++i;
  }
  return i == start ? -1 : v;
}

Spec parse_spec(const std::string& s) {
  Spec p;
  size_t i = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '=' || c == '^'; };
  if (s.size() >= 2 && is_align(s[1])) {
    p.fill = s[0], p.align = s[1], i = 2;
  } else if (!s.empty() && is_align(s[0])) {
    p.align = s[0], i = 1;
  }
  if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) p.sign = s[i++];
  if (i < s.size() && s[i] == '#') p.alt = true, ++i;
  if (i < s.size() && s[i] == '0') {
    if (!p.align) p.fill = '0', p.align = '=';
    ++i;
  }
  p.width = digits(s, i);
  if (i < s.size() && (s[i] == ',' || s[i] == '_')) p.group = s[i++];
  if (i < s.size() && s[i] == '.') {
    ++i;
    p.precision = digits(s, i);
    if (p.precision < 0) bad("Format specifier missing precision");
  }
  if (i < s.size()) p.type = s[i++];
  if (i < s.size()) bad("Invalid format specifier '" + s + "'");
  return p;
}

// Groups of three digits in the integer part of a number's digits (from the first digit to the
// first non-digit).
std::string grouped(const std::string& body, char sep, int every = 3) {
  size_t end = 0;
  while (end < body.size() && std::isalnum(static_cast<unsigned char>(body[end])) && body[end] != 'e' && body[end] != 'E') ++end;
  std::string head = body.substr(0, end), out;
  for (size_t k = 0; k < head.size(); ++k) {
    if (k > 0 && (head.size() - k) % every == 0) out += sep;
    out += head[k];
  }
  return out + body.substr(end);
}

// Pads `sign + prefix + body` to the width: '=' puts the fill between the sign and the digits.
std::string pad(const Spec& p, const std::string& sign, const std::string& body, char default_align) {
  char align = p.align ? p.align : default_align;
  int64_t len = static_cast<int64_t>(sign.size() + body.size());
  if (p.width <= len) return sign + body;
  std::string fill(static_cast<size_t>(p.width - len), p.fill);
  switch (align) {
    case '<': return sign + body + fill;
    case '^': {
      size_t left = fill.size() / 2;
      return fill.substr(0, left) + sign + body + fill.substr(left);
    }
    case '=': return sign + fill + body;
    default: return fill + sign + body;
  }
}

std::string sign_of(const Spec& p, bool negative) {
  if (negative) return "-";
  return p.sign == '+' ? "+" : p.sign == ' ' ? " " : "";
}

std::string format_int(int64_t v, const Spec& p) {
  char t = p.type ? p.type : 'd';
  bool neg = v < 0;
  uint64_t mag = neg ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  std::string body, prefix;
  if (t == 'c') {
    if (p.sign != '-') bad("Sign not allowed with integer format specifier 'c'");
    if (v < 0 || v > 0x10FFFF) bad("%c arg not in range(0x110000)");
    std::string ch;
    uint32_t c = static_cast<uint32_t>(v);
    if (c < 0x80) ch += static_cast<char>(c);
    else if (c < 0x800) ch += static_cast<char>(0xC0 | (c >> 6)), ch += static_cast<char>(0x80 | (c & 0x3F));
    else if (c < 0x10000)
      ch += static_cast<char>(0xE0 | (c >> 12)), ch += static_cast<char>(0x80 | ((c >> 6) & 0x3F)), ch += static_cast<char>(0x80 | (c & 0x3F));
    else
      ch += static_cast<char>(0xF0 | (c >> 18)), ch += static_cast<char>(0x80 | ((c >> 12) & 0x3F)),
          ch += static_cast<char>(0x80 | ((c >> 6) & 0x3F)), ch += static_cast<char>(0x80 | (c & 0x3F));
    return pad(p, "", ch, '<');
  }
  int base = 10;
  if (t == 'x' || t == 'X') base = 16, prefix = t == 'x' ? "0x" : "0X";
  else if (t == 'o') base = 8, prefix = "0o";
  else if (t == 'b') base = 2, prefix = "0b";
  else if (t != 'd' && t != 'n') bad(std::string("Unknown format code '") + t + "' for object of type 'int'");
  const char* dig = t == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
  do {
    body.insert(body.begin(), dig[mag % static_cast<uint64_t>(base)]);
    mag /= static_cast<uint64_t>(base);
  } while (mag);
  if (p.group) body = grouped(body, p.group, base == 10 ? 3 : 4);
  if (!p.alt) prefix.clear();
  if (p.precision >= 0) bad("Precision not allowed in integer format specifier");
  return pad(p, sign_of(p, neg) + prefix, body, '>');
}

std::string format_float(double v, const Spec& p) {
  char t = p.type;
  if (t && std::string("eEfFgG%").find(t) == std::string::npos)
    bad(std::string("Unknown format code '") + t + "' for object of type 'float'");
  bool neg = std::signbit(v) && !std::isnan(v);
  double mag = std::fabs(v);
  std::string body;
  bool upper = t == 'E' || t == 'F' || t == 'G';
  if (std::isnan(v) || std::isinf(v)) {
    body = std::isnan(v) ? "nan" : "inf";
    if (upper)
      for (char& c : body) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (t == '%') body += '%';
  } else {
    char buf[512];
    int64_t prec = p.precision;
    if (t == 0 && prec < 0) {
      // No type, no precision: as str() writes the float.
      body = to_str(Value::number(mag));
    } else {
      if (t == 0 && prec > 0 && !p.alt) {
        // No type with a precision: 'g', except that fixed notation keeps a digit past the point,
        // so exponents from precision - 1 on are written as exponents (format(100.0, '.3') is
        // '1e+02', format(3.1, '.3') '3.1', format(2.0, '.3') '2.0').
        std::snprintf(buf, sizeof buf, "%.*e", static_cast<int>(prec - 1), mag);
        std::string e = buf;
        size_t at = e.find('e');
        int exp = std::atoi(e.c_str() + at + 1);
        if (exp < -4 || exp >= prec - 1) {
          std::string mant = e.substr(0, at), rest = e.substr(at);
          if (mant.find('.') != std::string::npos) {
            while (mant.back() == '0') mant.pop_back();
            if (mant.back() == '.') mant.pop_back();
          }
          body = mant + rest;
          if (p.group) body = grouped(body, p.group);
          return pad(p, sign_of(p, neg), body, '>');
        }
      }
      char conv = t == 0 ? 'g' : t == '%' ? 'f' : t;
      if (prec < 0) prec = 6;
      if (conv == 'g' || conv == 'G') prec = std::max<int64_t>(prec, 1);
      if (prec > 400) bad("precision too big");
      double x = t == '%' ? mag * 100.0 : mag;
      std::string f = std::string("%") + (p.alt ? "#" : "") + ".*" + conv;
      std::snprintf(buf, sizeof buf, f.c_str(), static_cast<int>(prec), x);
      body = buf;
      // No type with a precision: 'g', but a number in fixed notation keeps a decimal point.
      if (t == 0 && body.find_first_of(".e") == std::string::npos) body += ".0";
      if (t == '%') body += '%';
    }
    if (p.group) body = grouped(body, p.group);
  }
  return pad(p, sign_of(p, neg), body, '>');
}

std::string format_str(const std::string& s, const Spec& p) {
  if (p.type && p.type != 's') bad(std::string("Unknown format code '") + p.type + "' for object of type 'str'");
  if (p.sign != '-') bad("Sign not allowed in string format specifier");
  if (p.align == '=') bad("'=' alignment not allowed in string format specifier");
  if (p.group) bad("Cannot specify ',' with 's'.");
  std::string body = s;
  if (p.precision >= 0) {
    // Truncated to `precision` characters (UTF-8 code points).
    size_t at = 0;
    int64_t n = 0;
    while (at < body.size() && n < p.precision) {
      ++at;
      while (at < body.size() && (static_cast<unsigned char>(body[at]) & 0xC0) == 0x80) ++at;
      ++n;
    }
    body = body.substr(0, at);
  }
  return pad(p, "", body, '<');
}

}  // namespace

std::string format_spec(const Value& v, const std::string& spec) {
  Spec p = parse_spec(spec);
  if (v.is(VT::Bool) && spec.empty()) return v.as_bool() ? "True" : "False";  // else as the int it is
  if (v.is(VT::Int) || v.is(VT::Bool)) {
    int64_t i = v.is(VT::Bool) ? static_cast<int64_t>(v.as_bool()) : v.as_int();
    if (p.type && std::string("eEfFgG%").find(p.type) != std::string::npos) return format_float(static_cast<double>(i), p);
    return format_int(i, p);
  }
  if (v.is(VT::Float)) return format_float(v.as_float(), p);
  if (v.is(VT::Str)) return format_str(v.as<StrObj>()->s, p);
  // Other values: str() with an empty spec, as object.__format__ (which refuses any other).
  if (!spec.empty()) bad(std::string("unsupported format string passed to ") + type_name(v.type()) + ".__format__");
  return to_str(v);
}

std::string percent_format(const std::string& f, const Value& args) {
  const DictObj* dict = args.is(VT::Dict) ? args.as<DictObj>() : nullptr;
  std::vector<Value> vals;
  if (args.is(VT::Tuple)) vals = args.as<TupleObj>()->items;
  else if (!dict) vals = {args};
  size_t k = 0;
  auto next = [&]() -> const Value& {
    if (k >= vals.size()) bad("not enough arguments for format string");
    return vals[k++];
  };
  std::string out;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out += f[i];
      continue;
    }
    if (++i >= f.size()) bad("incomplete format");
    const Value* key_value = nullptr;
    if (f[i] == '(') {
      size_t close = f.find(')', i);
      if (close == std::string::npos) bad("incomplete format key");
      if (!dict) bad("format requires a mapping");
      std::string key = f.substr(i + 1, close - i - 1);
      key_value = const_cast<DictObj*>(dict)->find(str_value(key));
      if (!key_value) bad("KeyError: '" + key + "'");
      i = close + 1;
    }
    Spec p;
    for (; i < f.size(); ++i) {  // flags
      char c = f[i];
      if (c == '-') p.align = '<';
      else if (c == '+') p.sign = '+';
      else if (c == ' ') { if (p.sign != '+') p.sign = ' '; }
      else if (c == '#') p.alt = true;
      else if (c == '0') { if (p.align != '<') p.fill = '0'; }
      else break;
    }
    auto number = [&](int64_t* dst) {
      if (i < f.size() && f[i] == '*') {
        const Value& w = next();
        if (!w.is(VT::Int)) bad("* wants int");
        *dst = w.as_int();
        ++i;
      } else {
        *dst = digits(f, i);
      }
    };
    number(&p.width);
    if (p.width < -1) p.align = '<', p.width = -p.width;  // a negative * width left-aligns
    if (i < f.size() && f[i] == '.') {
      ++i;
      number(&p.precision);
      if (p.precision < 0) p.precision = 0;
    }
    while (i < f.size() && (f[i] == 'l' || f[i] == 'h' || f[i] == 'L')) ++i;  // length modifiers: ignored, as Python does
    if (i >= f.size()) bad("incomplete format");
    char t = f[i];
    if (t == '%') {
      out += '%';
      continue;
    }
    const Value& v = key_value ? *key_value : next();
    // The zero flag pads numbers after their sign; '-' wins over it.
    if (p.fill == '0' && p.align != '<') p.align = '=';
    if (!p.align) p.align = '>';
    switch (t) {
      case 'd': case 'i': case 'u': {
        if (!v.is_number()) bad(std::string("%") + t + " format: a real number is required, not " + type_name(v.type()));
        int64_t n;
        if (v.is(VT::Float)) {
          double d = v.as_float();
          if (!std::isfinite(d)) bad(std::string("cannot convert float ") + (std::isnan(d) ? "NaN" : "infinity") + " to integer");
          if (std::fabs(d) >= 9.2233720368547758e18) bad("%d format: the float is too large for a 64-bit integer");
          n = static_cast<int64_t>(std::trunc(d));
        } else {
          n = v.is(VT::Bool) ? static_cast<int64_t>(v.as_bool()) : v.as_int();
        }
        // The digits of |n|, at least `precision` of them (%.3d), then the sign and the padding.
        std::string body = std::to_string(n < 0 ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n));
        if (p.precision > static_cast<int64_t>(body.size())) body.insert(0, static_cast<size_t>(p.precision) - body.size(), '0');
        out += pad(p, sign_of(p, n < 0), body, '>');
        break;
      }
      case 'x': case 'X': case 'o': {
        if (!v.is(VT::Int) && !v.is(VT::Bool)) bad(std::string("%") + t + " format: an integer is required, not " + type_name(v.type()));
        Spec q = p;
        q.type = t;
        q.precision = -1;
        out += format_int(v.is(VT::Bool) ? static_cast<int64_t>(v.as_bool()) : v.as_int(), q);
        break;
      }
      case 'e': case 'E': case 'f': case 'F': case 'g': case 'G': {
        if (!v.is_number()) bad(std::string("must be real number, not ") + type_name(v.type()));
        Spec q = p;
        q.type = t;
        out += format_float(v.to_double(), q);
        break;
      }
      case 'c': {
        Spec q = p;
        q.fill = ' ';
        if (v.is(VT::Str)) {
          if (v.as<StrObj>()->s.empty()) bad("%c requires int or char");
          q.type = 's';
          q.sign = '-';
          out += format_str(v.as<StrObj>()->s, q);  // one character (UTF-8) expected
        } else if (v.is(VT::Int)) {
          q.type = 'c';
          q.sign = '-';
          out += format_int(v.as_int(), q);
        } else {
          bad("%c requires int or char");
        }
        break;
      }
      case 's': case 'r': case 'a': {
        Spec q = p;
        q.fill = ' ';
        q.sign = '-';
        if (q.align == '=') q.align = '>';
        q.type = 's';
        out += format_str(t == 's' ? to_str(v) : repr(v), q);
        break;
      }
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%x", static_cast<unsigned char>(t));
        bad(std::string("unsupported format character '") + t + "' (" + hex + ") at index " + std::to_string(i));
      }
    }
  }
  if (!dict && k < vals.size()) bad("not all arguments converted during string formatting");
  return out;
}

}  // namespace tracer::interp
