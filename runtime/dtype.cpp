// Element types: sizes, names, PyTorch type promotion, shape broadcasting, and the bit-exact
// f16/bf16 conversions every kernel relies on.
#include "runtime/dtype.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

namespace tracer::rt {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f64: case DType::i64: return 8;
    case DType::f32: case DType::i32: return 4;
    case DType::f16: case DType::bf16: return 2;
    case DType::i8: case DType::u8: case DType::b8: return 1;
  }
  throw std::invalid_argument("dtype_size: invalid dtype");
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f64: return "f64";
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i64: return "i64";
    case DType::i32: return "i32";
    case DType::i8: return "i8";
    case DType::u8: return "u8";
    case DType::b8: return "b8";
  }
  return "?";
}

std::optional<DType> dtype_from_name(const std::string& raw) {
  // Thunder prints dtypes as "thunder.dtypes.float32" and PyTorch as "torch.float32".
  std::string name = raw;
  for (const char* prefix : {"thunder.dtypes.", "torch.", "dtypes."})
    if (name.rfind(prefix, 0) == 0) name = name.substr(std::strlen(prefix));
  struct Entry { const char* name; DType dt; };
  static const Entry table[] = {
      {"f64", DType::f64},      {"float64", DType::f64}, {"double", DType::f64},
      {"f32", DType::f32},      {"float32", DType::f32}, {"float", DType::f32},
      {"f16", DType::f16},      {"float16", DType::f16}, {"half", DType::f16},
      {"bf16", DType::bf16},    {"bfloat16", DType::bf16},
      {"i64", DType::i64},      {"int64", DType::i64},   {"long", DType::i64},
      {"i32", DType::i32},      {"int32", DType::i32},   {"int", DType::i32},
      {"i8", DType::i8},        {"int8", DType::i8},
      {"u8", DType::u8},        {"uint8", DType::u8},    {"ui8", DType::u8},  // (Thunder prints uint8 as ui8)
      {"b8", DType::b8},        {"bool", DType::b8},     {"bool8", DType::b8},
  };
  for (const Entry& e : table)
    if (name == e.name) return e.dt;
  return std::nullopt;
}

bool is_float(DType t) {
  return t == DType::f64 || t == DType::f32 || t == DType::f16 || t == DType::bf16;
}
bool is_int(DType t) {
  return t == DType::i64 || t == DType::i32 || t == DType::i8 || t == DType::u8;
}
bool is_bool(DType t) { return t == DType::b8; }

namespace {
int category(DType t) { return is_bool(t) ? 0 : is_int(t) ? 1 : 2; }

DType promote_int(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::i64 || b == DType::i64) return DType::i64;
  if (a == DType::i32 || b == DType::i32) return DType::i32;
  // Only {i8, u8} remain; PyTorch gives int16, which we lack: i32 is the smallest that holds both.
  return DType::i32;
}

DType promote_float(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::f64 || b == DType::f64) return DType::f64;
  // f32 with anything, or f16 with bf16 (neither contains the other).
  return DType::f32;
}
}  // namespace

DType promote(DType a, DType b) {
  int ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 0) return DType::b8;
  return ca == 1 ? promote_int(a, b) : promote_float(a, b);
}

DType promote_with_scalar(DType t, ScalarKind k) {
  int ck = k == ScalarKind::Bool ? 0 : k == ScalarKind::Int ? 1 : 2;
  if (ck <= category(t)) return t;
  return ck == 2 ? DType::f32 : DType::i64;
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : s) {
    if (d < 0) throw std::invalid_argument("negative dimension in shape " + shape_str(s));
    overflow = overflow || __builtin_mul_overflow(n, d, &n);
  }
  for (int64_t d : s)  // a zero dimension empties any shape, however large the others
    if (d == 0) return 0;
  if (overflow) throw std::invalid_argument("shape " + shape_str(s) + " has more than 2^63 - 1 elements");
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    // Align from the right: missing leading dims count as 1.
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

namespace {
uint32_t float_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return x;
}
float bits_float(uint32_t x) {
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}
// Shifts m right by `shift` bits (1..31), rounding to nearest, ties to even.
uint32_t shift_round_even(uint32_t m, int shift) {
  uint32_t q = m >> shift;
  uint32_t rem = m & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) ++q;
  return q;
}
}  // namespace

uint16_t float_to_bf16(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  // Adding 0x7fff plus the lsb of the kept part rounds to nearest even; overflow carries to Inf.
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

uint16_t float_to_half(float f) {
  uint32_t x = float_bits(f);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  uint32_t ax = x & 0x7fffffff;
  if (ax > 0x7f800000) return sign | 0x7e00 | static_cast<uint16_t>((ax >> 13) & 0x3ff);
  // 65520 (0x477ff000) is halfway between the largest half, 65504, and 2^16: ties go to Inf.
  if (ax >= 0x477ff000) return sign | 0x7c00;
  int e = static_cast<int>(ax >> 23);
  if (e < 102) return sign;  // below 2^-25: rounds to zero (2^-25 itself ties to even zero)
  if (e < 113) {
    // Half subnormal: a multiple of 2^-24. A carry out yields 0x400, the smallest normal.
    uint32_t m = (ax & 0x7fffff) | 0x800000;
    return sign | static_cast<uint16_t>(shift_round_even(m, 126 - e));
  }
  // Normal: rebias the exponent; a mantissa carry correctly bumps the exponent.
  return sign | static_cast<uint16_t>(shift_round_even(ax - 0x38000000, 13));
}

float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0x1f) return bits_float(sign | 0x7f800000 | (m << 13));
  if (e == 0) {
    float v = std::ldexp(static_cast<float>(m), -24);
    return sign ? -v : v;
  }
  return bits_float(sign | ((e + 112) << 23) | (m << 13));
}

}  // namespace tracer::rt
