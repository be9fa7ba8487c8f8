// Elementwise kernels (unary, binary, where, cast) for every dtype with NumPy broadcasting.
// Work proceeds in blocks: operands are gathered and converted to the math type, the op runs
// over plain arrays (so loops vectorize), and results are converted to the output dtype.
#include <algorithm>
#include <cmath>
#include <optional>

#include "runtime/kernel_util.h"
#include "runtime/kernels.h"
#include "runtime/special_math.h"

namespace tracer::rt {
using namespace detail;

namespace {
constexpr int64_t kBlock = 1024;
constexpr int64_t kParallelMin = 32768;

// One operand as seen from the output: a scalar, or data with per-output-dim strides.
struct Src {
  const void* data = nullptr;
  DType dt = DType::f32;
  std::vector<int64_t> strides;
  bool direct = false;  // same shape as the output: element i is at offset i
  Scalar scalar;
};

template <class C>
C scalar_as(const Scalar& s) {
  if constexpr (std::is_integral_v<C>) return s.is_int ? static_cast<C>(s.int_value) : float_to_int<C>(s.value);
  else if constexpr (std::is_same_v<C, B8>) return B8{static_cast<uint8_t>(s.is_int ? s.int_value != 0 : s.value != 0)};
  else return s.is_int ? static_cast<C>(s.int_value) : static_cast<C>(s.value);
}

Src make_src(const Operand& op, const Shape& out) {
  Src s;
  if (const Scalar* sc = std::get_if<Scalar>(&op)) {
    s.scalar = *sc;
    return s;
  }
  const Tensor& t = std::get<Tensor>(op);
  s.data = t.data();
  s.dt = t.dtype();
  s.direct = t.shape() == out;
  std::vector<int64_t> own = contiguous_strides(t.shape());
  size_t lead = out.size() - t.shape().size();
  s.strides.assign(out.size(), 0);
  for (size_t i = 0; i < t.shape().size(); ++i)
    s.strides[lead + i] = t.shape()[i] == 1 ? 0 : own[i];
  return s;
}

// Fills buf[0..n) with operand values for output elements start..start+n, converted to C.
template <class C>
void gather(const Src& s, const Shape& out, int64_t start, int64_t n, C* buf) {
  if (!s.data) {
    std::fill(buf, buf + n, scalar_as<C>(s.scalar));
    return;
  }
  dispatch(s.dt, [&](auto tag) {
    using S = typename decltype(tag)::type;
    const S* p = static_cast<const S*>(s.data);
    if (s.direct) {
      for (int64_t k = 0; k < n; ++k) buf[k] = convert<C>(p[start + k]);
      return;
    }
    // Walk the output coordinates, keeping the operand offset in step.
    size_t nd = out.size();
    std::vector<int64_t> idx(nd);
    int64_t off = 0, rem = start;
    for (size_t d = nd; d-- > 0;) {
      idx[d] = rem % out[d];
      rem /= out[d];
      off += idx[d] * s.strides[d];
    }
    for (int64_t k = 0; k < n; ++k) {
      buf[k] = convert<C>(p[off]);
      for (size_t d = nd; d-- > 0;) {
        off += s.strides[d];
        if (++idx[d] < out[d]) break;
        off -= s.strides[d] * out[d];
        idx[d] = 0;
      }
    }
  });
}

template <class R>
void store(const R* buf, DType dt, void* out, int64_t start, int64_t n) {
  dispatch(dt, [&](auto tag) {
    using S = typename decltype(tag)::type;
    S* p = static_cast<S*>(out) + start;
    for (int64_t k = 0; k < n; ++k) p[k] = convert<S>(buf[k]);
  });
}

// Runs body(start, n) over [0, total) in blocks, in parallel when large.
template <class F>
void for_blocks(int64_t total, F&& body) {
  int64_t nb = (total + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (total > kParallelMin)
  for (int64_t b = 0; b < nb; ++b) {
    int64_t start = b * kBlock;
    body(start, std::min(kBlock, total - start));
  }
}

// Integer arithmetic wraps (as PyTorch does) instead of overflowing into undefined behaviour.
inline int64_t wadd(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
inline int64_t wsub(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }
inline int64_t wmul(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }

int64_t ipow(int64_t base, int64_t e) {
  if (e < 0) return base == 1 ? 1 : base == -1 ? (e % 2 ? -1 : 1) : 0;
  int64_t r = 1;
  while (e) {
    if (e & 1) r = wmul(r, base);
    base = wmul(base, base);
    e >>= 1;
  }
  return r;
}

// Integer division by zero yields 0 rather than trapping; INT64_MIN / -1 wraps.
int64_t idiv_trunc(int64_t a, int64_t b) { return b == 0 ? 0 : b == -1 ? wsub(0, a) : a / b; }
// C's fmod on integers: the remainder of truncated division (the sign of a); by zero, 0.
int64_t imod_trunc(int64_t a, int64_t b) { return b == 0 || b == -1 ? 0 : a % b; }
int64_t imod_py(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
int64_t ifloordiv(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return wsub(0, a);
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

template <class C> C fmod_py(C a, C b) {
  C r = std::fmod(a, b);
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
// PyTorch's div_floor_floating: exact floor of the true quotient, robust to rounding in a / b.
template <class C> C ffloordiv(C a, C b) {
  if (b == 0) return a / b;
  C mod = std::fmod(a, b);
  C div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
  if (div == 0) return std::copysign(C(0), a / b);
  C fl = std::floor(div);
  return div - fl > C(0.5) ? fl + 1 : fl;
}
template <class C> C fmaximum(C a, C b) { return std::isnan(a) || std::isnan(b) ? a + b : std::max(a, b); }
template <class C> C fminimum(C a, C b) { return std::isnan(a) || std::isnan(b) ? a + b : std::min(a, b); }

template <class C, class F>
void map2(const C* x, const C* y, C* o, int64_t n, F f) {
  for (int64_t k = 0; k < n; ++k) o[k] = f(x[k], y[k]);
}
template <class C, class F>
void pred2(const C* x, const C* y, uint8_t* o, int64_t n, F f) {
  for (int64_t k = 0; k < n; ++k) o[k] = f(x[k], y[k]) ? 1 : 0;
}

// Applies op blockwise; returns true when the result went to the bool buffer ob.
template <class C>
bool binary_block(BinaryOp op, const C* x, const C* y, C* o, uint8_t* ob, int64_t n) {
  constexpr bool I = std::is_integral_v<C>;
  switch (op) {
    case BinaryOp::eq: pred2(x, y, ob, n, [](C a, C b) { return a == b; }); return true;
    case BinaryOp::ne: pred2(x, y, ob, n, [](C a, C b) { return a != b; }); return true;
    case BinaryOp::lt: pred2(x, y, ob, n, [](C a, C b) { return a < b; }); return true;
    case BinaryOp::le: pred2(x, y, ob, n, [](C a, C b) { return a <= b; }); return true;
    case BinaryOp::gt: pred2(x, y, ob, n, [](C a, C b) { return a > b; }); return true;
    case BinaryOp::ge: pred2(x, y, ob, n, [](C a, C b) { return a >= b; }); return true;
    case BinaryOp::logical_and: pred2(x, y, ob, n, [](C a, C b) { return a != 0 && b != 0; }); return true;
    case BinaryOp::logical_or: pred2(x, y, ob, n, [](C a, C b) { return a != 0 || b != 0; }); return true;
    case BinaryOp::logical_xor: pred2(x, y, ob, n, [](C a, C b) { return (a != 0) != (b != 0); }); return true;
    default: break;
  }
  if constexpr (I) {
    switch (op) {
      case BinaryOp::add: map2(x, y, o, n, wadd); break;
      case BinaryOp::sub: map2(x, y, o, n, wsub); break;
      case BinaryOp::mul: map2(x, y, o, n, wmul); break;
      case BinaryOp::div: map2(x, y, o, n, idiv_trunc); break;
      case BinaryOp::pow: map2(x, y, o, n, ipow); break;
      case BinaryOp::maximum: map2(x, y, o, n, [](C a, C b) { return std::max(a, b); }); break;
      case BinaryOp::minimum: map2(x, y, o, n, [](C a, C b) { return std::min(a, b); }); break;
      case BinaryOp::remainder: map2(x, y, o, n, imod_py); break;
      case BinaryOp::fmod: map2(x, y, o, n, imod_trunc); break;
      case BinaryOp::copysign: map2(x, y, o, n, [](C a, C b) { return (b < 0) != (a < 0) ? wsub(0, a) : a; }); break;
      case BinaryOp::floor_div: map2(x, y, o, n, ifloordiv); break;
      case BinaryOp::atan2: map2(x, y, o, n, [](C a, C b) { return float_to_int<C>(std::atan2(double(a), double(b))); }); break;
      case BinaryOp::bitwise_and: map2(x, y, o, n, [](C a, C b) { return a & b; }); break;
      case BinaryOp::bitwise_or: map2(x, y, o, n, [](C a, C b) { return a | b; }); break;
      case BinaryOp::bitwise_xor: map2(x, y, o, n, [](C a, C b) { return a ^ b; }); break;
      // PyTorch's shifts: a count below 0 or beyond the width gives 0 (left) or the sign (right);
      // the narrower storage dtypes wrap when stored.
      case BinaryOp::shift_left:
        map2(x, y, o, n, [](C a, C b) { return (b < 0 || b >= 64) ? C(0) : C(static_cast<uint64_t>(a) << b); });
        break;
      case BinaryOp::shift_right:
        map2(x, y, o, n, [](C a, C b) { return (b < 0 || b >= 64) ? C(a < 0 ? -1 : 0) : C(a >> b); });
        break;
      default: break;
    }
  } else {
    switch (op) {
      case BinaryOp::add: map2(x, y, o, n, [](C a, C b) { return a + b; }); break;
      case BinaryOp::sub: map2(x, y, o, n, [](C a, C b) { return a - b; }); break;
      case BinaryOp::mul: map2(x, y, o, n, [](C a, C b) { return a * b; }); break;
      case BinaryOp::div: map2(x, y, o, n, [](C a, C b) { return a / b; }); break;
      case BinaryOp::pow: map2(x, y, o, n, [](C a, C b) { return std::pow(a, b); }); break;
      case BinaryOp::maximum: map2(x, y, o, n, fmaximum<C>); break;
      case BinaryOp::minimum: map2(x, y, o, n, fminimum<C>); break;
      case BinaryOp::remainder: map2(x, y, o, n, fmod_py<C>); break;
      case BinaryOp::fmod: map2(x, y, o, n, [](C a, C b) { return std::fmod(a, b); }); break;
      case BinaryOp::copysign: map2(x, y, o, n, [](C a, C b) { return std::copysign(a, b); }); break;
      case BinaryOp::floor_div: map2(x, y, o, n, ffloordiv<C>); break;
      case BinaryOp::atan2: map2(x, y, o, n, [](C a, C b) { return std::atan2(a, b); }); break;
      case BinaryOp::zeta: map2(x, y, o, n, [](C a, C b) { return C(special::zeta(double(a), double(b))); }); break;
      case BinaryOp::nextafter: map2(x, y, o, n, [](C a, C b) { return std::nextafter(a, b); }); break;
      default: break;  // bitwise ops on floats are rejected before any work starts
    }
  }
  return false;
}

template <class C, class F>
void map1(const C* x, C* o, int64_t n, F f) {
  for (int64_t k = 0; k < n; ++k) o[k] = f(x[k]);
}

// Transcendental ops on an integer math type go through double and truncate.
template <class C, class F>
void map1f(const C* x, C* o, int64_t n, F f) {
  if constexpr (std::is_integral_v<C>) {
    for (int64_t k = 0; k < n; ++k) o[k] = float_to_int<C>(f(static_cast<double>(x[k])));
  } else {
    map1(x, o, n, f);
  }
}

template <class C>
bool unary_block(UnaryOp op, const C* x, C* o, uint8_t* ob, int64_t n) {
  constexpr bool I = std::is_integral_v<C>;
  switch (op) {
    case UnaryOp::logical_not:
      for (int64_t k = 0; k < n; ++k) ob[k] = x[k] == 0;
      return true;
    case UnaryOp::isfinite:
      for (int64_t k = 0; k < n; ++k) ob[k] = I ? 1 : std::isfinite(static_cast<double>(x[k]));
      return true;
    case UnaryOp::signbit:
      for (int64_t k = 0; k < n; ++k) ob[k] = std::signbit(static_cast<double>(x[k]));
      return true;
    case UnaryOp::neg:
      if constexpr (I) map1(x, o, n, [](C a) { return wsub(0, a); });
      else map1(x, o, n, [](C a) { return -a; });
      break;
    case UnaryOp::abs:
      if constexpr (I) map1(x, o, n, [](C a) { return a < 0 ? wsub(0, a) : a; });
      else map1(x, o, n, [](C a) { return std::abs(a); });
      break;
    case UnaryOp::sign:
      map1(x, o, n, [](C a) { return std::isnan(static_cast<double>(a)) ? a : C((a > 0) - (a < 0)); });
      break;
    case UnaryOp::bitwise_not:
      if constexpr (I) map1(x, o, n, [](C a) { return ~a; });
      break;
    case UnaryOp::exp: map1f(x, o, n, [](auto a) { return std::exp(a); }); break;
    case UnaryOp::log: map1f(x, o, n, [](auto a) { return std::log(a); }); break;
    case UnaryOp::log1p: map1f(x, o, n, [](auto a) { return std::log1p(a); }); break;
    case UnaryOp::sqrt: map1f(x, o, n, [](auto a) { return std::sqrt(a); }); break;
    case UnaryOp::rsqrt: map1f(x, o, n, [](auto a) { return decltype(a)(1) / std::sqrt(a); }); break;
    case UnaryOp::sin: map1f(x, o, n, [](auto a) { return std::sin(a); }); break;
    case UnaryOp::cos: map1f(x, o, n, [](auto a) { return std::cos(a); }); break;
    case UnaryOp::tanh: map1f(x, o, n, [](auto a) { return std::tanh(a); }); break;
    case UnaryOp::erf: map1f(x, o, n, [](auto a) { return std::erf(a); }); break;
    case UnaryOp::reciprocal: map1f(x, o, n, [](auto a) { return decltype(a)(1) / a; }); break;
    case UnaryOp::sigmoid:
      map1f(x, o, n, [](auto a) { return decltype(a)(1) / (decltype(a)(1) + std::exp(-a)); });
      break;
    case UnaryOp::expm1: map1f(x, o, n, [](auto a) { return std::expm1(a); }); break;
    case UnaryOp::exp2: map1f(x, o, n, [](auto a) { return std::exp2(a); }); break;
    case UnaryOp::log2: map1f(x, o, n, [](auto a) { return std::log2(a); }); break;
    // Integers are already whole; round is half-to-even like torch.round.
    case UnaryOp::floor: map1f(x, o, n, [](auto a) { return std::floor(a); }); break;
    case UnaryOp::ceil: map1f(x, o, n, [](auto a) { return std::ceil(a); }); break;
    case UnaryOp::round: map1f(x, o, n, [](auto a) { return std::nearbyint(a); }); break;
    case UnaryOp::trunc: map1f(x, o, n, [](auto a) { return std::trunc(a); }); break;
    case UnaryOp::asin: map1f(x, o, n, [](auto a) { return std::asin(a); }); break;
    case UnaryOp::acos: map1f(x, o, n, [](auto a) { return std::acos(a); }); break;
    case UnaryOp::atan: map1f(x, o, n, [](auto a) { return std::atan(a); }); break;
    case UnaryOp::asinh: map1f(x, o, n, [](auto a) { return std::asinh(a); }); break;
    case UnaryOp::acosh: map1f(x, o, n, [](auto a) { return std::acosh(a); }); break;
    case UnaryOp::atanh: map1f(x, o, n, [](auto a) { return std::atanh(a); }); break;
    case UnaryOp::sinh: map1f(x, o, n, [](auto a) { return std::sinh(a); }); break;
    case UnaryOp::cosh: map1f(x, o, n, [](auto a) { return std::cosh(a); }); break;
    case UnaryOp::tan: map1f(x, o, n, [](auto a) { return std::tan(a); }); break;
    case UnaryOp::log10: map1f(x, o, n, [](auto a) { return std::log10(a); }); break;
    case UnaryOp::erfc: map1f(x, o, n, [](auto a) { return std::erfc(a); }); break;
    case UnaryOp::lgamma: map1f(x, o, n, [](auto a) { return std::lgamma(a); }); break;
    // In double, rounded to the math type (runtime/special_math.h).
    case UnaryOp::digamma: map1f(x, o, n, [](auto a) { return decltype(a)(special::digamma(double(a))); }); break;
    case UnaryOp::erfinv: map1f(x, o, n, [](auto a) { return decltype(a)(special::erfinv(double(a))); }); break;
    case UnaryOp::erfcinv: map1f(x, o, n, [](auto a) { return decltype(a)(special::erfcinv(double(a))); }); break;
    case UnaryOp::ndtri: map1f(x, o, n, [](auto a) { return decltype(a)(special::ndtri(double(a))); }); break;
  }
  return false;
}

bool is_bitwise(BinaryOp op) {
  return op == BinaryOp::bitwise_and || op == BinaryOp::bitwise_or || op == BinaryOp::bitwise_xor ||
         op == BinaryOp::shift_left || op == BinaryOp::shift_right;
}

Shape operand_shape(const Operand& op) {
  if (const Tensor* t = std::get_if<Tensor>(&op)) {
    require_defined(*t, "elementwise");
    return t->shape();
  }
  return {};
}

Shape broadcast_or_throw(const char* what, const Shape& a, const Shape& b) {
  std::optional<Shape> s = broadcast_shapes(a, b);
  if (!s)
    throw std::invalid_argument(std::string(what) + ": shapes " + shape_str(a) + " and " +
                                shape_str(b) + " cannot be broadcast");
  return *s;
}

// The output tensor: *reuse when it fits, else a new one.
Tensor output(DType dt, const Shape& shape, Allocator* al, Tensor* reuse) {
  if (reuse && reuse->defined() && reuse->dtype() == dt && reuse->shape() == shape) return std::move(*reuse);
  return Tensor::empty(dt, shape, al);
}
}  // namespace

Tensor unary(UnaryOp op, const Tensor& a, DType out_dtype, Allocator* al, Tensor* reuse) {
  require_defined(a, "unary");
  // Integer inputs to float-valued ops (exp of an int tensor) compute in the output's float type.
  Math m = is_float(a.dtype()) ? math_of(a.dtype()) : is_float(out_dtype) ? math_of(out_dtype) : Math::i64;
  if (op == UnaryOp::bitwise_not && m != Math::i64)
    throw std::invalid_argument(std::string("bitwise_not: unsupported dtype ") + dtype_name(a.dtype()));
  // On bool, bitwise not is logical not (~1 would be nonzero).
  if (op == UnaryOp::bitwise_not && a.dtype() == DType::b8) op = UnaryOp::logical_not;
  Tensor out = output(out_dtype, a.shape(), al, reuse);
  Src src = make_src(a, a.shape());
  dispatch_math(m, [&](auto tag) {
    using C = typename decltype(tag)::type;
    for_blocks(out.numel(), [&](int64_t start, int64_t n) {
      C x[kBlock], o[kBlock];
      uint8_t ob[kBlock];
      gather<C>(src, a.shape(), start, n, x);
      if (unary_block<C>(op, x, o, ob, n)) store(ob, out_dtype, out.data(), start, n);
      else store(o, out_dtype, out.data(), start, n);
    });
  });
  return out;
}

Tensor binary(BinaryOp op, const Operand& a, const Operand& b, DType compute_dtype,
              DType out_dtype, Allocator* al, Tensor* reuse) {
  Shape shape = broadcast_or_throw("binary", operand_shape(a), operand_shape(b));
  Math m = math_of(compute_dtype);
  if (is_bitwise(op) && m != Math::i64)
    throw std::invalid_argument(std::string("bitwise op: unsupported dtype ") + dtype_name(compute_dtype));
  Tensor out = output(out_dtype, shape, al, reuse);
  Src sa = make_src(a, shape), sb = make_src(b, shape);
  dispatch_math(m, [&](auto tag) {
    using C = typename decltype(tag)::type;
    for_blocks(out.numel(), [&](int64_t start, int64_t n) {
      C x[kBlock], y[kBlock], o[kBlock];
      uint8_t ob[kBlock];
      gather<C>(sa, shape, start, n, x);
      gather<C>(sb, shape, start, n, y);
      if (binary_block<C>(op, x, y, o, ob, n)) store(ob, out_dtype, out.data(), start, n);
      else store(o, out_dtype, out.data(), start, n);
    });
  });
  return out;
}

Tensor where(const Tensor& cond, const Operand& a, const Operand& b, DType out_dtype, Allocator* al,
             Tensor* reuse) {
  require_defined(cond, "where");
  Shape shape = broadcast_or_throw("where", cond.shape(), operand_shape(a));
  shape = broadcast_or_throw("where", shape, operand_shape(b));
  Tensor out = output(out_dtype, shape, al, reuse);
  Src sc = make_src(cond, shape), sa = make_src(a, shape), sb = make_src(b, shape);
  dispatch_math(math_of(out_dtype), [&](auto tag) {
    using C = typename decltype(tag)::type;
    for_blocks(out.numel(), [&](int64_t start, int64_t n) {
      C x[kBlock], y[kBlock];
      B8 c[kBlock];
      gather<B8>(sc, shape, start, n, c);
      gather<C>(sa, shape, start, n, x);
      gather<C>(sb, shape, start, n, y);
      for (int64_t k = 0; k < n; ++k) x[k] = c[k].v ? x[k] : y[k];
      store(x, out_dtype, out.data(), start, n);
    });
  });
  return out;
}

Tensor cast(const Tensor& a, DType to, Allocator* al) {
  require_defined(a, "cast");
  Tensor out = Tensor::empty(to, a.shape(), al);
  int64_t n = a.numel();
  dispatch(a.dtype(), [&](auto from_tag) {
    using F = typename decltype(from_tag)::type;
    dispatch(to, [&](auto to_tag) {
      using T = typename decltype(to_tag)::type;
      const F* src = a.data_as<const F>();
      T* dst = out.data_as<T>();
#pragma omp parallel for schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) dst[i] = convert<T>(src[i]);
    });
  });
  return out;
}

}  // namespace tracer::rt
