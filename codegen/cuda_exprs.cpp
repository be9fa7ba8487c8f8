// Expression helpers shared by the kernel generators (cuda_codegen.cpp, cuda_rows.cpp,
// cuda_columns.cpp): register types and conversions, literals, C names, index maps of broadcasts,
// views, cats and creations, one primitive's expression, and the lines that compute a group's
// needed primitives. Declared in cuda_codegen_detail.h; see docs/codegen.md.
#include "codegen/cuda_codegen_detail.h"

#include <cmath>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "codegen/cuda_codegen.h"
#include "ir/fusion.h"
#include "ir/group.h"
#include "ir/op.h"
#include "ir/op_rules.h"
#include "runtime/kernels.h"

namespace tracer::codegen {
namespace detail {

using ir::Arg;
using ir::DType;
using ir::Stmt;
using ir::StmtKind;
using K = Arg::Kind;

Reg reg_of(DType d) {
  switch (d) {
    case DType::f64: return Reg::f64;
    case DType::f32:
    case DType::f16:
    case DType::bf16: return Reg::f32;
    case DType::b8: return Reg::b8;
    default: return Reg::i64;
  }
}
// The type arithmetic is done in (bools compute as integers, as on the CPU).
Reg math_of(DType d) { return d == DType::b8 ? Reg::i64 : reg_of(d); }

const char* reg_name(Reg r) {
  switch (r) {
    case Reg::f32: return "float";
    case Reg::f64: return "double";
    case Reg::i64: return "long long";
    case Reg::b8: return "bool";
  }
  return "?";
}


// Register value (of register kind `from`) converted to the value a tensor of dtype `to` holds,
// in to's register kind: the CPU's convert<To>(from).
std::string convert(const std::string& e, Reg from, DType to) {
  Reg r = reg_of(to);
  auto as_float = [&]() -> std::string {
    switch (from) {
      case Reg::f32: return e;
      case Reg::b8: return "(" + e + " ? 1.0f : 0.0f)";
      default: return "(float)(" + e + ")";
    }
  };
  switch (to) {
    case DType::f32: return as_float();
    case DType::bf16: return "tr_round_bf16(" + as_float() + ")";
    case DType::f16: return "tr_round_f16(" + as_float() + ")";
    case DType::f64: return from == Reg::f64 ? e : from == Reg::b8 ? "(" + e + " ? 1.0 : 0.0)" : "(double)(" + e + ")";
    case DType::b8: return from == Reg::b8 ? e : "(" + e + " != 0)";
    default: break;
  }
  (void)r;
  std::string wide = from == Reg::i64 ? e : from == Reg::b8 ? "(long long)(" + e + ")" : "tr_f2i((double)(" + e + "))";
  switch (to) {
    case DType::i64: return wide;
    case DType::i32: return "(long long)(int)(" + wide + ")";
    case DType::i8: return "(long long)(signed char)(" + wide + ")";
    case DType::u8: return "(long long)(unsigned char)(" + wide + ")";
    default: return wide;
  }
}

// A register value of kind `from` as the math type `to` (operands before an op).
std::string to_math(const std::string& e, Reg from, Reg to) {
  if (from == to) return e;
  switch (to) {
    case Reg::f32: return from == Reg::b8 ? "(" + e + " ? 1.0f : 0.0f)" : "(float)(" + e + ")";
    case Reg::f64: return from == Reg::b8 ? "(" + e + " ? 1.0 : 0.0)" : "(double)(" + e + ")";
    case Reg::i64: return from == Reg::b8 ? "(long long)(" + e + ")" : "tr_f2i((double)(" + e + "))";
    case Reg::b8: return "(" + e + " != 0)";
  }
  return e;
}

std::string literal(const Arg& a, Reg math) {
  char buf[64];
  double v = a.number();
  if (math == Reg::i64 || math == Reg::b8) {
    if (a.kind == K::Float) return "tr_f2i(" + literal(a, Reg::f64) + ")";
    std::snprintf(buf, sizeof buf, "%lldLL", static_cast<long long>(a.kind == K::Bool ? int64_t(a.b) : a.i));
    return math == Reg::b8 ? std::string("(") + buf + " != 0)" : buf;
  }
  if (std::isnan(v)) return math == Reg::f32 ? "__int_as_float(0x7fc00000)" : "__longlong_as_double(0x7ff8000000000000LL)";
  if (std::isinf(v)) {
    std::string inf = math == Reg::f32 ? "__int_as_float(0x7f800000)" : "__longlong_as_double(0x7ff0000000000000LL)";
    return v < 0 ? "(-" + inf + ")" : inf;
  }
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  // The compiler rounds the double literal to float as the CPU's static_cast<float> does.
  return math == Reg::f32 ? "(float)" + s : s;
}

const std::unordered_set<std::string>& reserved() {
  static const std::unordered_set<std::string> r = {
      "i", "n", "k", "v", "i0", "stride", "first", "nvec", "vec_ok", "auto", "bool", "break", "case", "char",
      "const", "continue", "default", "do", "double", "else", "enum", "extern", "float", "for", "goto", "if",
      "int", "long", "register", "return", "short", "signed", "sizeof", "static", "struct", "switch",
      "typedef", "union", "unsigned", "void", "volatile", "while", "new", "delete", "class", "template",
      "this", "true", "false", "operator", "private", "public", "namespace", "using", "asm", "inline"};
  return r;
}

std::string c_name(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0])) || reserved().count(out) ||
      out.rfind("tr_", 0) == 0 || out.rfind("p_", 0) == 0)
    out = "v_" + out;
  return out;
}

std::string index_coord(long long div, long long mod, const Index& ix, const std::string& flat) {
  const std::string S = ix.suffix;
  auto num = [&](long long v) { return std::to_string(v) + S; };
  auto plain = [&](const std::string& base, long long d, long long m) {
    std::string c = base;
    if (d != 1) c = "(" + c + " / " + num(d) + ")";
    if (m) c = "(" + c + " % " + num(m) + ")";
    return c;
  };
  const long long C = ix.row;
  if (C > 0 && flat == "i" && div > 0) {
    // 32-bit division and remainder where the coordinate fits (they cost a fraction of 64-bit).
    const bool col32 = C < (1LL << 31), row32 = ix.rows > 0 && ix.rows < (1LL << 31);
    auto small = [&](const std::string& v, bool fits, long long d, long long m) {
      if (!fits) return plain(v, d, m);
      std::string c = "(int)" + v;
      if (d != 1) c += " / " + std::to_string(d);
      if (m) c += " % " + std::to_string(m);
      return "(long long)(" + c + ")";
    };
    if (div % C == 0) return small("tr_r", row32, div / C, mod);  // i / div = tr_r / (div / C): the row's
    if (C % div == 0) {  // i / div = tr_r * q + tr_c / div, with tr_c / div < q
      long long q = C / div;
      std::string col = small("tr_c", col32, div, 0);
      if (mod == 0) return "(tr_r * " + num(q) + " + " + col + ")";
      if (q % mod == 0) return mod == q ? col : small("tr_c", col32, div, mod);
      if (mod % q == 0) return "(" + small("tr_r", row32, 1, mod / q) + " * " + num(q) + " + " + col + ")";
      return "((tr_r * " + num(q) + " + " + col + ") % " + num(mod) + ")";
    }
  }
  return plain(flat, div, mod);
}

// The element offset into a tensor of shape `in` broadcast to `out`, for flat output index i.
std::string offset_expr(const ir::Shape& in, const ir::Shape& out, const Index& ix) {
  if (in == out) return "i";
  if (rt::numel(in) == 1) return "0";
  // A tensor of higher rank does not broadcast to `out`: a caller's mistake, never a silent 0
  // (a reshape of an input read in order is at offset i; its caller must say so).
  if (in.size() > out.size())
    throw std::logic_error("codegen: offset of a " + rt::shape_str(in) + " tensor in the shape " + rt::shape_str(out));
  size_t r = out.size(), k = in.size();
  std::vector<int64_t> ostride(r, 1), istride(k, 1);
  for (size_t d = r; d-- > 1;) ostride[d - 1] = ostride[d] * out[d];
  for (size_t d = k; d-- > 1;) istride[d - 1] = istride[d] * in[d];
  std::string expr;
  for (size_t d = 0; d < r; ++d) {
    if (d < r - k) continue;
    size_t e = d - (r - k);
    if (in[e] == 1) continue;
    std::string coord = index_coord(ostride[d], d > 0 ? out[d] : 0, ix);
    if (istride[e] != 1) coord += " * " + std::to_string(istride[e]) + ix.suffix;
    expr += (expr.empty() ? "" : " + ") + coord;
  }
  return expr.empty() ? "0" : expr;
}

bool broadcasts_to(const ir::Shape& in, const ir::Shape& out) {
  if (in.size() > out.size()) return false;
  for (size_t j = 0; j < in.size(); ++j) {
    int64_t a = in[in.size() - 1 - j], b = out[out.size() - 1 - j];
    if (a != b && a != 1) return false;
  }
  return true;
}

void prims_of(const Stmt& s, std::vector<const Stmt*>& out) {
  if (s.kind == StmtKind::Prim) out.push_back(&s);
  else ir::flat_prims(s, out);
}

// The C expression of one primitive over its operands (already in the math type).
std::string op_expr(const std::string& op, const std::vector<std::string>& x, Reg m) {
  bool fl = m == Reg::f32 || m == Reg::f64;
  bool f32 = m == Reg::f32;
  auto fn = [&](const char* f) { return std::string(f) + (f32 ? "f(" : "(") + x[0] + ")"; };
  auto fn2 = [&](const char* f) { return std::string(f) + (f32 ? "f(" : "(") + x[0] + ", " + x[1] + ")"; };
  auto via_double = [&](const char* f) { return "tr_f2i(" + std::string(f) + "((double)" + x[0] + "))"; };
  if (op == "neg") return fl ? "(-" + x[0] + ")" : "tr_wsub(0, " + x[0] + ")";
  if (op == "abs") return fl ? fn("fabs") : "tr_iabs(" + x[0] + ")";
  if (op == "sign") return fl ? "tr_sign(" + x[0] + ")" : "(long long)((" + x[0] + " > 0) - (" + x[0] + " < 0))";
  if (op == "bitwise_not") return "(~" + x[0] + ")";
  if (op == "logical_not") return "(" + x[0] + " == 0)";
  if (op == "isfinite") return fl ? "isfinite(" + x[0] + ")" : "true";
  if (op == "signbit") return fl ? "(signbit(" + x[0] + ") != 0)" : "(" + x[0] + " < 0)";
  static const std::unordered_map<std::string, const char*> unary_fn = {
      {"exp", "exp"},   {"exp2", "exp2"}, {"expm1", "expm1"}, {"log", "log"},     {"log1p", "log1p"},
      {"log2", "log2"}, {"sqrt", "sqrt"}, {"sin", "sin"},     {"cos", "cos"},     {"tanh", "tanh"},
      {"erf", "erf"},   {"floor", "floor"}, {"ceil", "ceil"}, {"round", "nearbyint"}, {"trunc", "trunc"},
      {"asin", "asin"}, {"acos", "acos"},   {"atan", "atan"}, {"asinh", "asinh"},     {"acosh", "acosh"},
      {"atanh", "atanh"}, {"sinh", "sinh"}, {"cosh", "cosh"}, {"tan", "tan"},         {"log10", "log10"},
      {"erfc", "erfc"}, {"lgamma", "lgamma"}, {"erfinv", "erfinv"}, {"erfcinv", "erfcinv"}, {"ndtri", "normcdfinv"}};
  auto u = unary_fn.find(op);
  if (u != unary_fn.end()) return fl ? fn(u->second) : via_double(u->second);
  // The prelude's double-precision digamma and zeta (runtime/special_math.inc), as on the CPU.
  if (op == "digamma")
    return !fl ? "tr_f2i(tr_sf_digamma((double)" + x[0] + "))" : f32 ? "(float)tr_sf_digamma((double)" + x[0] + ")" : "tr_sf_digamma(" + x[0] + ")";
  if (op == "zeta")
    return f32 ? "(float)tr_sf_zeta((double)" + x[0] + ", (double)" + x[1] + ")" : "tr_sf_zeta(" + x[0] + ", " + x[1] + ")";
  if (op == "nextafter") return fn2("nextafter");
  if (op == "bitwise_left_shift") return "tr_shl(" + x[0] + ", " + x[1] + ")";
  if (op == "bitwise_right_shift") return "tr_shr(" + x[0] + ", " + x[1] + ")";
  if (op == "rsqrt") return fl ? (f32 ? "(1.0f / sqrtf(" + x[0] + "))" : "(1.0 / sqrt(" + x[0] + "))") : "tr_f2i(1.0 / sqrt((double)" + x[0] + "))";
  if (op == "reciprocal") return fl ? (f32 ? "(1.0f / " + x[0] + ")" : "(1.0 / " + x[0] + ")") : "tr_f2i(1.0 / (double)" + x[0] + ")";
  // binary
  if (op == "add") return fl ? "(" + x[0] + " + " + x[1] + ")" : "tr_wadd(" + x[0] + ", " + x[1] + ")";
  if (op == "sub") return fl ? "(" + x[0] + " - " + x[1] + ")" : "tr_wsub(" + x[0] + ", " + x[1] + ")";
  if (op == "mul") return fl ? "(" + x[0] + " * " + x[1] + ")" : "tr_wmul(" + x[0] + ", " + x[1] + ")";
  if (op == "div") return fl ? "(" + x[0] + " / " + x[1] + ")" : "tr_idiv(" + x[0] + ", " + x[1] + ")";
  if (op == "pow") return fl ? fn2("pow") : "tr_ipow(" + x[0] + ", " + x[1] + ")";
  if (op == "maximum") return fl ? "tr_fmax(" + x[0] + ", " + x[1] + ")" : "max(" + x[0] + ", " + x[1] + ")";
  if (op == "minimum") return fl ? "tr_fmin(" + x[0] + ", " + x[1] + ")" : "min(" + x[0] + ", " + x[1] + ")";
  if (op == "remainder") return fl ? "tr_fmod_py(" + x[0] + ", " + x[1] + ")" : "tr_imod(" + x[0] + ", " + x[1] + ")";
  if (op == "floor_divide") return fl ? "tr_ffloordiv(" + x[0] + ", " + x[1] + ")" : "tr_ifloordiv(" + x[0] + ", " + x[1] + ")";
  if (op == "atan2") return fl ? fn2("atan2") : "tr_f2i(atan2((double)" + x[0] + ", (double)" + x[1] + "))";
  if (op == "fmod") return fl ? fn2("fmod") : "((" + x[1] + " == 0 || " + x[1] + " == -1) ? 0LL : " + x[0] + " % " + x[1] + ")";
  if (op == "copysign") return fl ? fn2("copysign") : "(((" + x[1] + " < 0) != (" + x[0] + " < 0)) ? tr_wsub(0, " + x[0] + ") : " + x[0] + ")";
  static const std::unordered_map<std::string, const char*> cmp = {
      {"eq", "=="}, {"ne", "!="}, {"lt", "<"}, {"le", "<="}, {"gt", ">"}, {"ge", ">="},
      {"bitwise_and", "&"}, {"bitwise_or", "|"}, {"bitwise_xor", "^"}};
  auto c = cmp.find(op);
  if (c != cmp.end()) return "(" + x[0] + " " + c->second + " " + x[1] + ")";
  if (op == "logical_and") return "((" + x[0] + " != 0) && (" + x[1] + " != 0))";
  if (op == "logical_or") return "((" + x[0] + " != 0) || (" + x[1] + " != 0))";
  if (op == "logical_xor") return "((" + x[0] + " != 0) != (" + x[1] + " != 0))";
  throw std::invalid_argument("codegen: no CUDA form for prims." + op);
}

bool rounds_exactly(double v, DType d) {
  if (std::isnan(v)) return false;
  float f = static_cast<float>(v);
  if (static_cast<double>(f) != v) return false;
  if (d == DType::bf16) return rt::bf16_to_float(rt::float_to_bf16(f)) == f || std::isinf(f);
  if (d == DType::f16) return rt::half_to_float(rt::float_to_half(f)) == f || std::isinf(f);
  return false;
}

// A comparison of a uniform [0, 1) f32 draw with a number (dropout's mask, u < 1 - p), as an
// integer comparison of the draw's word: u = (word >> 8) * 2^-24 exactly, so u < c holds exactly
// when (word >> 8) < ceil(c * 2^24) (c * 2^24 is exact in double). Saves the conversion and
// the multiply per element; the result is the same bit for bit.
std::optional<std::string> unit_compare(const Stmt& p, const std::unordered_map<const ir::Proxy*, std::string>& words) {
  const std::string& op = p.op->name;
  if (op != "lt" && op != "le" && op != "gt" && op != "ge") return std::nullopt;
  if (p.args.size() != 2 || p.args[0].kind != K::Proxy || !p.args[1].is_number() || p.args[1].kind == K::Bool) return std::nullopt;
  auto w = words.find(p.args[0].proxy.get());
  if (w == words.end()) return std::nullopt;
  if (ir::promote_args({&p.args[0], &p.args[1]}) != DType::f32 || p.outputs[0]->type.dtype != DType::b8) return std::nullopt;
  double c = static_cast<double>(static_cast<float>(p.args[1].number()));  // the literal as the f32 math sees it
  if (std::isnan(c)) return std::string("false");
  double x = std::ldexp(c, 24);
  // m = word >> 8 in [0, 2^24): m < x  <=>  m < ceil(x);  m <= x  <=>  m < floor(x) + 1.
  double bound = (op == "lt" || op == "ge") ? std::ceil(x) : std::floor(x) + 1;
  bound = std::min(std::max(bound, 0.0), 16777216.0 + 1);
  std::string below = "((long long)(" + w->second + " >> 8) < " + std::to_string(static_cast<long long>(bound)) + "LL)";
  return (op == "lt" || op == "le") ? below : "(!" + below + ")";
}

bool is_compare(const std::string& op) {
  return op == "eq" || op == "ne" || op == "lt" || op == "le" || op == "gt" || op == "ge" || op == "logical_and" ||
         op == "logical_or" || op == "logical_xor";
}

// The expression of one elementwise primitive (not a random draw) over its operands, named by
// name_of, converted to the register type of its output's dtype.
std::string prim_expr(const Stmt& ps, const std::function<std::string(const ir::ProxyPtr&)>& name_of) {
  const Stmt* p = &ps;
  const std::string& op = p->op->name;
  DType od = p->outputs[0]->type.dtype;
  std::string expr;
  auto operand = [&](const Arg& a, Reg math) {
    if (a.kind == K::Proxy) return to_math(name_of(a.proxy), reg_of(a.proxy->type.dtype), math);
    if (a.is_number()) return literal(a, math);
    throw std::invalid_argument("codegen: prims." + op + " has an argument that is neither a tensor nor a number");
  };
  if (op == "convert_element_type") {
    const Arg& a = p->args[0];
    std::string src = a.kind == K::Proxy ? name_of(a.proxy) : literal(a, Reg::f64);
    Reg from = a.kind == K::Proxy ? reg_of(a.proxy->type.dtype) : Reg::f64;
    expr = convert(src, from, od);
  } else if (op == "where") {
    Reg m = math_of(od);
    std::string pred = p->args[0].kind == K::Proxy ? to_math(name_of(p->args[0].proxy), reg_of(p->args[0].proxy->type.dtype), Reg::b8)
                                                   : (p->args[0].number() != 0 ? "true" : "false");
    std::string pick = "(" + pred + " ? " + operand(p->args[1], m) + " : " + operand(p->args[2], m) + ")";
    // Choosing between values the output dtype already holds exactly needs no rounding: a 16-bit
    // float register of the group always holds a rounded value (dropout's where(mask, y, 0)).
    bool exact = (od == DType::bf16 || od == DType::f16) && m == Reg::f32;
    for (int j = 1; j <= 2 && exact; ++j) {
      const Arg& a = p->args[j];
      if (a.kind == K::Proxy) exact = a.proxy->type.dtype == od;
      else exact = a.is_number() && a.kind != K::Bool && rounds_exactly(a.number(), od);
    }
    expr = exact ? pick : convert(pick, m, od);
  } else if (p->args.size() == 1) {
    // Unary: float-valued ops on integers compute in the output's float type.
    const Arg& a = p->args[0];
    DType in = a.kind == K::Proxy ? a.proxy->type.dtype : od;
    Reg m = rt::is_float(in) ? math_of(in) : rt::is_float(od) ? math_of(od) : Reg::i64;
    // On bool, bitwise not is logical not (as on the CPU: ~1 would be nonzero).
    const std::string& uop = (op == "bitwise_not" && in == DType::b8) ? std::string("logical_not") : op;
    if (uop == "logical_not" || uop == "isfinite" || uop == "signbit") m = rt::is_float(in) ? math_of(in) : Reg::i64;
    expr = convert(op_expr(uop, {operand(a, m)}, m), is_compare(uop) || uop == "logical_not" || uop == "isfinite" || uop == "signbit" ? Reg::b8 : m, od);
  } else {
    const Arg &a = p->args[0], &b = p->args[1];
    DType compute = ir::promote_args({&a, &b});
    if ((op == "div" || op == "atan2" || op == "copysign" || op == "zeta") && !rt::is_float(compute)) compute = DType::f32;
    Reg m = math_of(compute);
    std::string e = op_expr(op, {operand(a, m), operand(b, m)}, m);
    expr = convert(e, is_compare(op) ? Reg::b8 : m, od);
  }
  return expr;
}

// The element of view v read at flat index i of the group's shape S (coordinate `dim` of S taken
// less `shift`: a cat's piece).
std::string view_offset_expr(const ir::View& v, const ir::Shape& S, const Index& ix, int64_t dim, int64_t shift,
                             const std::string& index) {
  const char* suffix = ix.suffix;
  std::string expr = v.offset ? std::to_string(v.offset) + suffix : "";
  std::string coord;
  if (dim >= 0) {  // the piece's coordinate along dim
    int64_t ostride = 1;
    for (size_t d = S.size(); d-- > static_cast<size_t>(dim) + 1;) ostride *= S[d];
    coord = index_coord(ostride, dim > 0 ? S[static_cast<size_t>(dim)] : 0, ix, index);
    if (shift) coord = "(" + coord + " - " + std::to_string(shift) + suffix + ")";
  }
  for (const ir::OffsetTerm& t : ir::view_terms(v, S, dim)) {
    // A shifted term reads the piece's coordinate (already divided and reduced), else the index.
    std::string c = t.shifted ? coord : index;
    if (t.shifted) {
      if (t.div != 1) c = "(" + c + " / " + std::to_string(t.div) + suffix + ")";
      if (t.mod) c = "(" + c + " % " + std::to_string(t.mod) + suffix + ")";
    } else {
      c = index_coord(t.div, t.mod, ix, index);
    }
    if (t.stride != 1) c += " * " + std::to_string(t.stride) + suffix;
    expr += (expr.empty() ? "" : " + ") + c;
  }
  return expr.empty() ? "0" : expr;
}

bool view_runs(const ir::View& v, const ir::Shape& S, int64_t V, int64_t dim, int64_t shift) {
  if (V <= 1 || S.empty() || S.back() % V != 0 || v.offset % V != 0) return false;
  const int64_t last = static_cast<int64_t>(S.size()) - 1;
  if (dim >= 0) {
    int64_t ostride = 1;
    for (int64_t d = last; d > dim; --d) ostride *= S[static_cast<size_t>(d)];
    // Along the last dimension the piece's coordinate moves with i (its start a multiple of V);
    // along another it is the same for the V elements.
    if (dim == last ? shift % V != 0 : ostride % V != 0) return false;
  }
  int varying = 0;
  for (const ir::OffsetTerm& t : ir::view_terms(v, S, dim)) {
    const bool moves = !t.shifted || dim == last;
    if (moves && t.div == 1) {
      // ((i + k) % mod) = (i % mod) + k for k < V when V divides i and mod.
      if (t.stride != 1 || (t.mod != 0 && t.mod % V != 0)) return false;
      ++varying;
    } else if (moves && t.div % V != 0) {
      return false;  // (i + k) / div may change within the run
    } else if (t.stride % V != 0) {
      return false;  // the same for the run, but not at a multiple of V
    }
  }
  return varying == 1;
}

// A cat of views at flat index i of S: the piece that holds i's coordinate along the cat's
// dimension, read through its view at the coordinate less the piece's start.
std::string cat_expr(const ir::CatPlan& c, const ir::Shape& S, const Index& ix, DType dt,
                     const std::function<std::string(const ir::Proxy*)>& pointer) {
  const char* suffix = ix.suffix;
  std::vector<int64_t> ostride(S.size(), 1);
  for (size_t d = S.size(); d-- > 1;) ostride[d - 1] = ostride[d] * S[d];
  std::string coord = index_coord(ostride[c.dim], c.dim > 0 ? S[c.dim] : 0, ix);
  std::string expr;
  for (size_t k = c.pieces.size(); k-- > 0;) {
    const ir::View& v = c.pieces[k];
    std::string off = view_offset_expr(v, S, ix, static_cast<int64_t>(c.dim), c.bounds[k]);
    std::string load = load_expr(dt, pointer(v.base) + "[" + off + "]");
    expr = expr.empty() ? load : "(" + coord + " < " + std::to_string(c.bounds[k + 1]) + suffix + " ? " + load + " : " + expr + ")";
  }
  return expr;
}

// A full or an iota inside a group, as its register value at flat index i of S: full's value
// converted on the host exactly as the CPU converts it; iota's start + c * step (c: the
// element's index along the iota) in 64 bits, converted as the CPU does.
std::string creation_expr(const Stmt& p, const ir::Shape& S, const Index& ix) {
  const ir::TensorType& t = p.outputs[0]->type;
  Reg r = reg_of(t.dtype);
  if (p.op->name == "full") {
    rt::Tensor one = rt::full({1}, ir::to_scalar(p.args[1]), t.dtype, nullptr);
    double v = one.get(0);
    if (r == Reg::b8) return v != 0 ? "true" : "false";
    if (r == Reg::i64) return std::to_string(static_cast<long long>(v)) + "LL";
    return literal(Arg::of_float(v), r);
  }
  long long start = p.args[1].kind == K::Int ? p.args[1].i : 0, step = p.args[2].kind == K::Int ? p.args[2].i : 1;
  std::string c = offset_expr(t.shape, S, ix);
  std::string v = "(long long)((unsigned long long)" + std::to_string(start) + "LL + (unsigned long long)(" + c +
                  ") * (unsigned long long)" + std::to_string(step) + "LL)";
  return convert(v, Reg::i64, t.dtype);
}

std::vector<const Stmt*> needed_prims(const std::vector<const Stmt*>& prims, const ir::GroupPlan& plan,
                                      const std::vector<ir::ProxyPtr>& targets, const std::function<bool(const Stmt&)>& skip,
                                      std::unordered_set<const ir::Proxy*>* need) {
  for (const auto& t : targets) need->insert(t.get());
  std::vector<const Stmt*> chosen;
  for (size_t j = prims.size(); j-- > 0;) {
    const Stmt* p = prims[j];
    if (ir::row_reduction(*p) || ir::column_reduction(*p) || plan.views.count(p->outputs[0].get()) || skip(*p)) continue;
    bool wanted = false;
    for (const auto& o : p->outputs) wanted = wanted || need->count(o.get());
    if (!wanted) continue;
    chosen.push_back(p);
    auto same = plan.same_as.find(p->outputs[0].get());
    if (same != plan.same_as.end()) {
      need->insert(same->second.get());
      continue;
    }
    if (plan.cats.count(p->outputs[0].get())) continue;  // read piece by piece by its expression
    for (const Arg& a : p->args) ir::for_each_proxy(a, [&](const ir::ProxyPtr& q) { need->insert(q.get()); });
  }
  std::reverse(chosen.begin(), chosen.end());
  return chosen;
}

std::string prim_lines(const std::vector<const Stmt*>& chosen, const ir::GroupPlan& plan, const ir::Shape& S, const Index& ix,
                       bool canonical, Namer& name_of, const std::function<std::string(const ir::Proxy*)>& pointer,
                       const std::string& indent) {
  std::ostringstream o;
  for (const Stmt* p : chosen) {
    const ir::ProxyPtr& out = p->outputs[0];
    std::string expr;
    auto same = plan.same_as.find(out.get());
    if (same != plan.same_as.end()) expr = name_of(same->second);
    else if (p->op->name == "full" || p->op->name == "iota") expr = creation_expr(*p, S, ix);
    else if (auto c = plan.cats.find(out.get()); c != plan.cats.end()) expr = cat_expr(c->second, S, ix, out->type.dtype, pointer);
    else expr = prim_expr(*p, [&](const ir::ProxyPtr& x) { return name_of(x); });
    o << indent << "const " << reg_name(reg_of(out->type.dtype)) << " " << name_of(out) << " = " << expr << ";  // "
      << (canonical ? name_of(out) : out->name) << " = prims." << p->op->name << "\n";
  }
  return o.str();
}

// A group's inputs: the proxies its primitives read before the group defines them, in order of
// first use.
std::vector<ir::ProxyPtr> group_inputs(const std::vector<const Stmt*>& prims) {
  std::unordered_set<const ir::Proxy*> defined, seen;
  std::vector<ir::ProxyPtr> inputs;
  for (const Stmt* p : prims) {
    for (const Arg& a : p->args)
      ir::for_each_proxy(a, [&](const ir::ProxyPtr& q) {
        if (!defined.count(q.get()) && seen.insert(q.get()).second) inputs.push_back(q);
      });
    for (const auto& o : p->outputs) defined.insert(o.get());
  }
  return inputs;
}

}  // namespace detail
}  // namespace tracer::codegen
