// Private helpers shared by the CPU kernels: storage types per dtype, dtype dispatch, value
// conversion between storage types, strides, and a strided copy used by the shape ops.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/tensor.h"

namespace tracer::rt::detail {

// Distinct wrapper types so templates can tell the 16-bit floats and bool apart from integers.
struct Half { uint16_t bits; };
struct BF16 { uint16_t bits; };
struct B8 { uint8_t v; };

template <class T> struct Tag { using type = T; };

// Calls f(Tag<StorageType>{}) for the storage type of dt.
template <class F>
decltype(auto) dispatch(DType dt, F&& f) {
  switch (dt) {
    case DType::f64: return f(Tag<double>{});
    case DType::f32: return f(Tag<float>{});
    case DType::f16: return f(Tag<Half>{});
    case DType::bf16: return f(Tag<BF16>{});
    case DType::i64: return f(Tag<int64_t>{});
    case DType::i32: return f(Tag<int32_t>{});
    case DType::i8: return f(Tag<int8_t>{});
    case DType::u8: return f(Tag<uint8_t>{});
    case DType::b8: return f(Tag<B8>{});
  }
  throw std::invalid_argument("invalid dtype");
}

// Unpacks a storage value to a plain arithmetic type (float for the 16-bit floats).
inline float unpack(Half h) { return half_to_float(h.bits); }
inline float unpack(BF16 h) { return bf16_to_float(h.bits); }
inline int64_t unpack(B8 b) { return b.v != 0; }
template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
inline T unpack(T v) { return v; }

// Float to integer truncates toward zero like PyTorch; NaN and out-of-range values (undefined
// behaviour in C++) saturate instead.
template <class I, class F>
inline I float_to_int(F x) {
  if (std::isnan(x)) return 0;
  if (x >= static_cast<F>(9.2233720368547758e18)) return static_cast<I>(INT64_MAX);
  if (x <= static_cast<F>(-9.2233720368547758e18)) return static_cast<I>(INT64_MIN);
  return static_cast<I>(static_cast<int64_t>(x));
}

// Converts any storage or arithmetic value to storage/arithmetic type To.
template <class To, class From>
inline To convert(From from) {
  auto v = unpack(from);
  using V = decltype(v);
  if constexpr (std::is_same_v<To, Half>) {
    return Half{float_to_half(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<To, BF16>) {
    return BF16{float_to_bf16(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<To, B8>) {
    return B8{static_cast<uint8_t>(v != 0)};
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<V>) {
    return float_to_int<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

// The type arithmetic happens in for values stored as dt.
enum class Math { f32, f64, i64 };
inline Math math_of(DType dt) {
  if (dt == DType::f64) return Math::f64;
  return is_float(dt) ? Math::f32 : Math::i64;
}
template <class F>
decltype(auto) dispatch_math(Math m, F&& f) {
  if (m == Math::f64) return f(Tag<double>{});
  if (m == Math::f32) return f(Tag<float>{});
  return f(Tag<int64_t>{});
}

inline std::vector<int64_t> contiguous_strides(const Shape& s) {
  std::vector<int64_t> st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

inline void require_defined(const Tensor& t, const char* what) {
  if (!t.defined()) throw std::invalid_argument(std::string(what) + ": undefined tensor");
}

inline Allocator* or_default(Allocator* a) { return a ? a : &Allocator::default_allocator(); }

// Copies the strided view (src + base, strides in elements, shape `shape`) into contiguous dst.
void copy_strided(const void* src, size_t elem, int64_t base, const Shape& shape,
                  const std::vector<int64_t>& strides, void* dst);

}  // namespace tracer::rt::detail
