// Tests of the runtime's dtypes, tensors, elementwise, shape and reduction kernels.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/cudnn.h"
#include "runtime/dtype.h"
#include "runtime/kernels.h"
#include "tests/runtime/helpers.h"

using namespace tracer::rt;
using namespace tracer::rt::test;
using V = std::vector<double>;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST_CASE("dtype sizes and names", "[runtime][dtype]") {
  CHECK(dtype_size(DType::f64) == 8);
  CHECK(dtype_size(DType::bf16) == 2);
  CHECK(dtype_size(DType::b8) == 1);
  CHECK(std::string(dtype_name(DType::bf16)) == "bf16");
  CHECK(dtype_from_name("float32") == DType::f32);
  CHECK(dtype_from_name("bfloat16") == DType::bf16);
  CHECK(dtype_from_name("half") == DType::f16);
  CHECK(dtype_from_name("long") == DType::i64);
  CHECK(dtype_from_name("int") == DType::i32);
  CHECK(dtype_from_name("bool8") == DType::b8);
  CHECK(dtype_from_name("u8") == DType::u8);
  CHECK_FALSE(dtype_from_name("complex64").has_value());
  for (int i = 0; i < kDTypeCount; ++i) {
    DType t = static_cast<DType>(i);
    CHECK(dtype_from_name(dtype_name(t)) == t);
    CHECK(int(is_float(t)) + int(is_int(t)) + int(is_bool(t)) == 1);
  }
}

TEST_CASE("type promotion follows PyTorch", "[runtime][dtype]") {
  CHECK(promote(DType::f16, DType::bf16) == DType::f32);
  CHECK(promote(DType::bf16, DType::f16) == DType::f32);
  CHECK(promote(DType::f32, DType::f64) == DType::f64);
  CHECK(promote(DType::bf16, DType::f32) == DType::f32);
  CHECK(promote(DType::i64, DType::f16) == DType::f16);
  CHECK(promote(DType::i32, DType::bf16) == DType::bf16);
  CHECK(promote(DType::i8, DType::i32) == DType::i32);
  CHECK(promote(DType::u8, DType::i64) == DType::i64);
  CHECK(promote(DType::u8, DType::i8) == DType::i32);
  CHECK(promote(DType::b8, DType::u8) == DType::u8);
  CHECK(promote(DType::b8, DType::b8) == DType::b8);
  CHECK(promote(DType::b8, DType::f16) == DType::f16);
  CHECK(promote_with_scalar(DType::i32, ScalarKind::Float) == DType::f32);
  CHECK(promote_with_scalar(DType::b8, ScalarKind::Float) == DType::f32);
  CHECK(promote_with_scalar(DType::f16, ScalarKind::Float) == DType::f16);
  CHECK(promote_with_scalar(DType::bf16, ScalarKind::Int) == DType::bf16);
  CHECK(promote_with_scalar(DType::i8, ScalarKind::Int) == DType::i8);
  CHECK(promote_with_scalar(DType::b8, ScalarKind::Int) == DType::i64);
  CHECK(promote_with_scalar(DType::b8, ScalarKind::Bool) == DType::b8);
}

TEST_CASE("shape broadcasting", "[runtime][dtype]") {
  CHECK(broadcast_shapes({2, 1, 3}, {4, 3}) == Shape{2, 4, 3});
  CHECK(broadcast_shapes({}, {5}) == Shape{5});
  CHECK(broadcast_shapes({0}, {1}) == Shape{0});
  CHECK(broadcast_shapes({3, 1}, {1, 4}) == Shape{3, 4});
  CHECK_FALSE(broadcast_shapes({2}, {3}).has_value());
  CHECK(shape_str({2, 3}) == "[2, 3]");
  CHECK(shape_str({}) == "[]");
  CHECK(numel({}) == 1);
  CHECK(numel({4, 0}) == 0);
}

static float f_of_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

TEST_CASE("bf16 conversion rounds to nearest even", "[runtime][dtype]") {
  CHECK(float_to_bf16(1.0f) == 0x3f80);
  CHECK(float_to_bf16(-2.0f) == 0xc000);
  CHECK(float_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);       // tie -> even (down)
  CHECK(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);   // tie -> even (up)
  CHECK(float_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)) == 0x3f81);
  CHECK(float_to_bf16(std::numeric_limits<float>::infinity()) == 0x7f80);
  CHECK(float_to_bf16(-std::numeric_limits<float>::infinity()) == 0xff80);
  CHECK(float_to_bf16(std::numeric_limits<float>::max()) == 0x7f80);  // rounds up to Inf
  CHECK(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
  CHECK(std::isnan(bf16_to_float(float_to_bf16(f_of_bits(0x7f800001)))));  // low-payload NaN stays NaN
  CHECK(bf16_to_float(0x3fc0) == 1.5f);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = bf16_to_float(static_cast<uint16_t>(h));
    if (!std::isnan(f)) REQUIRE(float_to_bf16(f) == h);
  }
}

TEST_CASE("f16 conversion rounds to nearest even with subnormals", "[runtime][dtype]") {
  CHECK(float_to_half(1.0f) == 0x3c00);
  CHECK(float_to_half(-0.0f) == 0x8000);
  CHECK(float_to_half(65504.0f) == 0x7bff);
  CHECK(float_to_half(65519.0f) == 0x7bff);
  CHECK(float_to_half(65520.0f) == 0x7c00);
  CHECK(float_to_half(1e6f) == 0x7c00);
  CHECK(float_to_half(-std::numeric_limits<float>::infinity()) == 0xfc00);
  CHECK(float_to_half(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
  CHECK(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
  CHECK(float_to_half(std::ldexp(1.0f, -14)) == 0x0400);
  CHECK(float_to_half(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(float_to_half(std::ldexp(1.0f, -25)) == 0x0000);          // tie -> even zero
  CHECK(float_to_half(1.5f * std::ldexp(1.0f, -25)) == 0x0001);
  CHECK(float_to_half(3.0f * std::ldexp(1.0f, -25)) == 0x0002);   // 1.5 units -> 2
  CHECK(float_to_half(5.0f * std::ldexp(1.0f, -25)) == 0x0002);   // 2.5 units -> 2
  CHECK(float_to_half(std::ldexp(1023.5f, -24)) == 0x0400);       // carries into the normals
  CHECK(half_to_float(0x0001) == std::ldexp(1.0f, -24));
  CHECK(half_to_float(0x83ff) == -std::ldexp(1023.0f, -24));
  CHECK(std::isnan(half_to_float(float_to_half(std::nanf("")))));
  CHECK(std::isinf(half_to_float(0x7c00)));
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = half_to_float(static_cast<uint16_t>(h));
    if (!std::isnan(f)) REQUIRE(float_to_half(f) == h);
  }
#ifdef __FLT16_MAX__
  // Against the compiler's own conversion over many bit patterns, subnormals included.
  for (uint64_t b = 0; b < 0x100000000ull; b += 0x1fd3) {
    float f = f_of_bits(static_cast<uint32_t>(b));
    if (std::isnan(f)) continue;
    _Float16 ref = static_cast<_Float16>(f);
    uint16_t bits;
    std::memcpy(&bits, &ref, 2);
    REQUIRE(float_to_half(f) == bits);
  }
#endif
}

TEST_CASE("allocator counts bytes and aligns", "[runtime][tensor]") {
  Allocator al;
  {
    Tensor t = Tensor::empty(DType::f32, {10}, &al);
    CHECK(reinterpret_cast<uintptr_t>(t.data()) % 64 == 0);
    CHECK(al.current_bytes() == 40);
    Tensor u = Tensor::zeros(DType::f64, {3}, &al);
    CHECK(al.current_bytes() == 64);
    CHECK(values(u) == V{0, 0, 0});
    CHECK(u.allocator() == &al);
  }
  CHECK(al.current_bytes() == 0);
  CHECK(al.peak_bytes() == 64);
  al.reset_peak();
  CHECK(al.peak_bytes() == 0);
  Tensor z = Tensor::empty(DType::f32, {0, 5}, &al);
  CHECK(z.defined());
  CHECK(z.numel() == 0);
  CHECK(z.nbytes() == 0);
  CHECK(al.current_bytes() == 0);
  CHECK_FALSE(Tensor().defined());
  CHECK_THROWS_AS(Tensor::empty(DType::f32, {-1}), std::invalid_argument);
}

TEST_CASE("tensor get/set convert through double for every dtype", "[runtime][tensor]") {
  for (int i = 0; i < kDTypeCount; ++i) {
    DType dt = static_cast<DType>(i);
    Tensor t = Tensor::empty(dt, {3});
    t.set(0, 2.5);
    t.set(1, -3.75);
    t.set(2, 0);
    INFO(dtype_name(dt));
    if (is_float(dt)) CHECK(values(t) == V{2.5, -3.75, 0});
    else if (dt == DType::b8) CHECK(values(t) == V{1, 1, 0});
    else if (dt == DType::u8) CHECK(values(t) == V{2, 253, 0});
    else CHECK(values(t) == V{2, -3, 0});
  }
  Tensor t = make(DType::i32, {2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor v = t.view({3, 2});
  CHECK(v.data() == t.data());
  CHECK(v.shape() == Shape{3, 2});
  CHECK_THROWS(t.view({4}));
  CHECK_THROWS(t.get(6));
}

TEST_CASE("binary ops broadcast tensors and scalars", "[runtime][elementwise]") {
  Tensor a = make(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = make(DType::f32, {3}, {10, 20, 30});
  Tensor c = binary(BinaryOp::add, a, b, DType::f32, DType::f32, nullptr);
  CHECK(c.shape() == Shape{2, 3});
  CHECK(values(c) == V{11, 22, 33, 14, 25, 36});
  Tensor col = make(DType::f32, {2, 1}, {100, 200});
  CHECK(values(binary(BinaryOp::sub, col, b, DType::f32, DType::f32, nullptr)) ==
        V{90, 80, 70, 190, 180, 170});
  CHECK(values(binary(BinaryOp::mul, sf(2), a, DType::f32, DType::f32, nullptr)) == V{2, 4, 6, 8, 10, 12});
  Tensor s = binary(BinaryOp::add, sf(1.5), si(2), DType::f32, DType::f32, nullptr);
  CHECK(s.shape() == Shape{});
  CHECK(values(s) == V{3.5});
  CHECK_THROWS_AS(binary(BinaryOp::add, a, make(DType::f32, {2}, {1, 2}), DType::f32, DType::f32, nullptr),
                  std::invalid_argument);
}

TEST_CASE("binary ops on a large broadcast run in parallel correctly", "[runtime][elementwise]") {
  const int64_t rows = 300, cols = 257;
  Tensor a = Tensor::empty(DType::f32, {rows, cols});
  for (int64_t i = 0; i < a.numel(); ++i) a.data_as<float>()[i] = static_cast<float>(i);
  Tensor b = Tensor::empty(DType::f16, {rows, 1});
  for (int64_t r = 0; r < rows; ++r) b.set(r, static_cast<double>(r));
  Tensor c = binary(BinaryOp::add, a, b, DType::f32, DType::f64, nullptr);
  bool ok = true;
  for (int64_t i = 0; i < c.numel(); ++i)
    ok = ok && c.data_as<double>()[i] == static_cast<double>(static_cast<float>(i) + static_cast<float>(i / cols));
  CHECK(ok);
}

TEST_CASE("integer and float division semantics", "[runtime][elementwise]") {
  Tensor x = make(DType::i64, {4}, {7, -7, 7, -7});
  Tensor y = make(DType::i64, {4}, {2, 2, -2, -2});
  CHECK(values(binary(BinaryOp::div, x, y, DType::f32, DType::f32, nullptr)) == V{3.5, -3.5, -3.5, 3.5});
  CHECK(values(binary(BinaryOp::floor_div, x, y, DType::i64, DType::i64, nullptr)) == V{3, -4, -4, 3});
  CHECK(values(binary(BinaryOp::remainder, x, y, DType::i64, DType::i64, nullptr)) == V{1, 1, -1, -1});
  Tensor fx = make(DType::f64, {4}, {7.5, -7.5, 7.5, -7.5});
  Tensor fy = make(DType::f64, {4}, {2, 2, -2, -2});
  CHECK(values(binary(BinaryOp::floor_div, fx, fy, DType::f64, DType::f64, nullptr)) == V{3, -4, -4, 3});
  CHECK(values(binary(BinaryOp::remainder, fx, fy, DType::f64, DType::f64, nullptr)) == V{1.5, 0.5, -0.5, -1.5});
  CHECK(values(binary(BinaryOp::pow, make(DType::i64, {3}, {3, 2, -2}), make(DType::i64, {3}, {4, 40, 3}),
                      DType::i64, DType::i64, nullptr)) == V{81, 1099511627776.0, -8});
  CHECK(values(binary(BinaryOp::pow, make(DType::f32, {2}, {4, 2}), sf(0.5), DType::f32, DType::f32, nullptr)) ==
        V{2, std::sqrt(2.0f)});
  CHECK(values(binary(BinaryOp::atan2, sf(1), sf(1), DType::f64, DType::f64, nullptr))[0] == Approx(M_PI / 4));
}

TEST_CASE("comparisons, logical and bitwise ops", "[runtime][elementwise]") {
  Tensor a = make(DType::i32, {4}, {1, 2, 3, 4});
  Tensor b = make(DType::f32, {4}, {2, 2, 2, 2});
  Tensor lt = binary(BinaryOp::lt, a, b, DType::f32, DType::b8, nullptr);
  CHECK(lt.dtype() == DType::b8);
  CHECK(values(lt) == V{1, 0, 0, 0});
  CHECK(values(binary(BinaryOp::ge, a, b, DType::f32, DType::b8, nullptr)) == V{0, 1, 1, 1});
  CHECK(values(binary(BinaryOp::eq, a, si(3), DType::i32, DType::b8, nullptr)) == V{0, 0, 1, 0});
  Tensor p = make(DType::b8, {4}, {0, 1, 0, 1});
  Tensor q = make(DType::b8, {4}, {0, 0, 1, 1});
  CHECK(values(binary(BinaryOp::logical_and, p, q, DType::b8, DType::b8, nullptr)) == V{0, 0, 0, 1});
  CHECK(values(binary(BinaryOp::logical_or, p, q, DType::b8, DType::b8, nullptr)) == V{0, 1, 1, 1});
  CHECK(values(binary(BinaryOp::logical_xor, p, q, DType::b8, DType::b8, nullptr)) == V{0, 1, 1, 0});
  CHECK(values(binary(BinaryOp::bitwise_and, a, si(6), DType::i32, DType::i32, nullptr)) == V{0, 2, 2, 4});
  CHECK(values(binary(BinaryOp::bitwise_xor, a, si(1), DType::i32, DType::i32, nullptr)) == V{0, 3, 2, 5});
  CHECK_THROWS_AS(binary(BinaryOp::bitwise_or, b, b, DType::f32, DType::f32, nullptr), std::invalid_argument);
  Tensor n = make(DType::f32, {3}, {1, kNaN, 5});
  V mx = values(binary(BinaryOp::maximum, n, sf(2), DType::f32, DType::f32, nullptr));
  CHECK(mx[0] == 2);
  CHECK(std::isnan(mx[1]));
  CHECK(mx[2] == 5);
}

TEST_CASE("unary ops", "[runtime][elementwise]") {
  Tensor x = make(DType::f32, {4}, {0, 0.5, -1.5, 2.5});
  CHECK(values(unary(UnaryOp::sigmoid, x, DType::f32, nullptr))[0] == 0.5);
  CHECK(values(unary(UnaryOp::erf, x, DType::f32, nullptr))[1] == static_cast<float>(std::erf(0.5f)));
  CHECK(values(unary(UnaryOp::round, x, DType::f32, nullptr)) == V{0, 0, -2, 2});
  CHECK(values(unary(UnaryOp::floor, x, DType::f32, nullptr)) == V{0, 0, -2, 2});
  CHECK(values(unary(UnaryOp::ceil, x, DType::f32, nullptr)) == V{0, 1, -1, 3});
  CHECK(values(unary(UnaryOp::abs, x, DType::f32, nullptr)) == V{0, 0.5, 1.5, 2.5});
  CHECK(values(unary(UnaryOp::sign, x, DType::f32, nullptr)) == V{0, 1, -1, 1});
  CHECK(values(unary(UnaryOp::rsqrt, make(DType::f64, {1}, {4}), DType::f64, nullptr)) == V{0.5});
  Tensor i = make(DType::i64, {3}, {0, 1, 2});
  Tensor e = unary(UnaryOp::exp, i, DType::f32, nullptr);
  CHECK(e.dtype() == DType::f32);
  CHECK(values(e) == V{1, std::exp(1.0f), std::exp(2.0f)});
  CHECK(values(unary(UnaryOp::neg, i, DType::i64, nullptr)) == V{0, -1, -2});
  CHECK(values(unary(UnaryOp::bitwise_not, make(DType::i32, {2}, {5, -1}), DType::i32, nullptr)) == V{-6, 0});
  CHECK(values(unary(UnaryOp::bitwise_not, make(DType::b8, {2}, {0, 1}), DType::b8, nullptr)) == V{1, 0});
  Tensor f = make(DType::f16, {4}, {1, kInf, kNaN, -kInf});
  Tensor fin = unary(UnaryOp::isfinite, f, DType::b8, nullptr);
  CHECK(fin.dtype() == DType::b8);
  CHECK(values(fin) == V{1, 0, 0, 0});
  CHECK(values(unary(UnaryOp::logical_not, make(DType::f32, {2}, {0, 3}), DType::b8, nullptr)) == V{1, 0});
  // f16 math happens in f32 and rounds once on store.
  Tensor h = make(DType::f16, {1}, {1.0 / 3});
  float h_in = half_to_float(float_to_half(1.0f / 3));
  CHECK(values(unary(UnaryOp::exp, h, DType::f16, nullptr))[0] == half_to_float(float_to_half(std::exp(h_in))));
}

TEST_CASE("where broadcasts all three operands", "[runtime][elementwise]") {
  Tensor cond = make(DType::b8, {2, 1}, {1, 0});
  Tensor a = make(DType::f32, {1, 3}, {1, 2, 3});
  Tensor w = where(cond, a, sf(-1), DType::f32, nullptr);
  CHECK(w.shape() == Shape{2, 3});
  CHECK(values(w) == V{1, 2, 3, -1, -1, -1});
  Tensor w2 = where(make(DType::b8, {3}, {0, 1, 0}), si(7), make(DType::i32, {2, 3}, {1, 2, 3, 4, 5, 6}),
                    DType::i32, nullptr);
  CHECK(values(w2) == V{1, 7, 3, 4, 7, 6});
}

TEST_CASE("cast between dtypes", "[runtime][elementwise]") {
  Tensor x = make(DType::f32, {5}, {-2.7, 2.7, 0.1, 0, 1e10});
  CHECK(values(cast(x, DType::i32, nullptr)) == V{-2, 2, 0, 0, 1410065408 /* 1e10 wrapped to 32 bits */});
  CHECK(values(cast(x, DType::i64, nullptr)) == V{-2, 2, 0, 0, 1e10});
  CHECK(values(cast(x, DType::b8, nullptr)) == V{1, 1, 1, 0, 1});
  Tensor b = cast(make(DType::f32, {2}, {1.0f + 1.0f / 256, 3.0}), DType::bf16, nullptr);
  CHECK(values(b) == V{1, 3});
  CHECK(values(cast(make(DType::i64, {2}, {2049, -5}), DType::f16, nullptr)) == V{2048, -5});
  CHECK(values(cast(make(DType::b8, {2}, {1, 0}), DType::f64, nullptr)) == V{1, 0});
  CHECK(values(cast(make(DType::i32, {2}, {-1, 256}), DType::u8, nullptr)) == V{255, 0});
}

TEST_CASE("broadcast_in_dim, reshape, permute", "[runtime][shape]") {
  Tensor v = make(DType::f32, {3}, {1, 2, 3});
  CHECK(values(broadcast_in_dim(v, {2, 3}, {1}, nullptr)) == V{1, 2, 3, 1, 2, 3});
  CHECK(values(broadcast_in_dim(v, {3, 2}, {0}, nullptr)) == V{1, 1, 2, 2, 3, 3});
  Tensor c = make(DType::i64, {2, 1}, {5, 6});
  CHECK(values(broadcast_in_dim(c, {2, 3}, {0, 1}, nullptr)) == V{5, 5, 5, 6, 6, 6});
  CHECK(values(broadcast_in_dim(make(DType::f16, {}, {4}), {2, 2}, {}, nullptr)) == V{4, 4, 4, 4});
  CHECK_THROWS_AS(broadcast_in_dim(v, {2, 4}, {1}, nullptr), std::invalid_argument);

  Tensor r = reshape(v, {3, 1});
  CHECK(r.data() == v.data());
  CHECK(reshape(v, {1, -1}).shape() == Shape{1, 3});
  CHECK_THROWS_AS(reshape(v, {2, 2}), std::invalid_argument);

  Tensor t = Tensor::empty(DType::i32, {2, 3, 4});
  for (int64_t i = 0; i < 24; ++i) t.set(i, static_cast<double>(i));
  Tensor p = permute(t, {2, 0, 1}, nullptr);
  REQUIRE(p.shape() == Shape{4, 2, 3});
  bool ok = true;
  for (int64_t k = 0; k < 4; ++k)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j) ok = ok && p.get((k * 2 + i) * 3 + j) == static_cast<double>(i * 12 + j * 4 + k);
  CHECK(ok);
  CHECK_THROWS_AS(permute(t, {0, 0, 1}, nullptr), std::invalid_argument);
}

TEST_CASE("slice and cat", "[runtime][shape]") {
  Tensor t = Tensor::empty(DType::f64, {4, 5});
  for (int64_t i = 0; i < 20; ++i) t.set(i, static_cast<double>(i));
  Tensor s = slice(t, {1, 0}, {4, 5}, {2, 2}, nullptr);
  CHECK(s.shape() == Shape{2, 3});
  CHECK(values(s) == V{5, 7, 9, 15, 17, 19});
  CHECK(slice(t, {2, 0}, {2, 5}, {1, 1}, nullptr).shape() == Shape{0, 5});

  Tensor a = make(DType::f32, {2, 1}, {1, 2});
  Tensor b = make(DType::f32, {2, 2}, {3, 4, 5, 6});
  Tensor c = cat({a, b}, 1, nullptr);
  CHECK(c.shape() == Shape{2, 3});
  CHECK(values(c) == V{1, 3, 4, 2, 5, 6});
  CHECK(values(cat({a, a}, 0, nullptr)) == V{1, 2, 1, 2});
  CHECK(cat({a, a}, -1, nullptr).shape() == Shape{2, 2});
  CHECK_THROWS_AS(cat({a, make(DType::f64, {2, 1}, {1, 2})}, 1, nullptr), std::invalid_argument);
  CHECK_THROWS_WITH(cat({a, make(DType::f32, {3, 1}, {1, 2, 3})}, 1, nullptr),
                    Catch::Contains("[2, 1]") && Catch::Contains("[3, 1]"));
}

TEST_CASE("full and iota", "[runtime][shape]") {
  CHECK(values(full({2, 2}, sf(1.5), DType::bf16, nullptr)) == V{1.5, 1.5, 1.5, 1.5});
  CHECK(values(full({3}, si(-4), DType::i8, nullptr)) == V{-4, -4, -4});
  CHECK(values(full({2}, sf(1), DType::b8, nullptr)) == V{1, 1});
  CHECK(values(iota(4, 10, -3, DType::i64, nullptr)) == V{10, 7, 4, 1});
  CHECK(values(iota(3, 0, 1, DType::f32, nullptr)) == V{0, 1, 2});
}

TEST_CASE("take and take_backward", "[runtime][shape]") {
  Tensor table = make(DType::f32, {4, 2}, {0, 1, 10, 11, 20, 21, 30, 31});
  Tensor idx = make(DType::i32, {2, 2}, {1, 3, 0, 1});
  Tensor g = take(table, idx, nullptr);
  CHECK(g.shape() == Shape{2, 2, 2});
  CHECK(values(g) == V{10, 11, 30, 31, 0, 1, 10, 11});
  CHECK(values(take(table, make(DType::u8, {}, {2}), nullptr)) == V{20, 21});
  CHECK_THROWS_AS(take(table, make(DType::i64, {1}, {4}), nullptr), std::invalid_argument);
  CHECK_THROWS_AS(take(table, make(DType::f32, {1}, {0}), nullptr), std::invalid_argument);

  Tensor grad = make(DType::f32, {3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor gi = make(DType::i64, {3}, {1, 1, 0});
  Tensor tb = take_backward(grad, gi, 3, nullptr);
  CHECK(tb.shape() == Shape{3, 2});
  CHECK(values(tb) == V{5, 6, 4, 6, 0, 0});
  Tensor gh = take_backward(cast(grad, DType::bf16, nullptr), gi, 2, nullptr);
  CHECK(gh.dtype() == DType::bf16);
  CHECK(values(gh) == V{5, 6, 4, 6});

  // Many rows hit the same index across a wide row: deterministic and exact for small ints.
  const int64_t n = 200, cols = 600;
  Tensor big = full({n, cols}, sf(1), DType::f32, nullptr);
  Tensor bi = Tensor::empty(DType::i64, {n});
  for (int64_t i = 0; i < n; ++i) bi.set(i, static_cast<double>(i % 3));
  V bv = values(take_backward(big, bi, 3, nullptr));
  CHECK(bv[0] == 67);
  CHECK(bv[cols] == 67);
  CHECK(bv[2 * cols + cols - 1] == 66);
}

TEST_CASE("reductions with keepdim", "[runtime][reduce]") {
  Tensor a = make(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor s = reduce(ReduceOp::sum, a, {1}, true, DType::f32, nullptr);
  CHECK(s.shape() == Shape{2, 1});
  CHECK(values(s) == V{6, 15});
  Tensor s0 = reduce(ReduceOp::sum, a, {0}, false, DType::f32, nullptr);
  CHECK(s0.shape() == Shape{3});
  CHECK(values(s0) == V{5, 7, 9});
  Tensor all = reduce(ReduceOp::sum, a, {0, 1}, false, DType::f64, nullptr);
  CHECK(all.shape() == Shape{});
  CHECK(values(all) == V{21});
  CHECK(reduce(ReduceOp::sum, a, {0, 1}, true, DType::f32, nullptr).shape() == Shape{1, 1});
  CHECK(values(reduce(ReduceOp::prod, a, {1}, false, DType::f32, nullptr)) == V{6, 120});
  CHECK(values(reduce(ReduceOp::amax, a, {0}, false, DType::f32, nullptr)) == V{4, 5, 6});
  CHECK(values(reduce(ReduceOp::amin, a, {1}, false, DType::f32, nullptr)) == V{1, 4});

  Tensor t = Tensor::empty(DType::i32, {2, 3, 4});
  for (int64_t i = 0; i < 24; ++i) t.set(i, static_cast<double>(i));
  Tensor r = reduce(ReduceOp::sum, t, {0, 2}, true, DType::i64, nullptr);
  CHECK(r.shape() == Shape{1, 3, 1});
  CHECK(values(r) == V{0 + 1 + 2 + 3 + 12 + 13 + 14 + 15, 4 + 5 + 6 + 7 + 16 + 17 + 18 + 19,
                       8 + 9 + 10 + 11 + 20 + 21 + 22 + 23});

  Tensor bools = make(DType::b8, {4}, {1, 0, 1, 1});
  Tensor cnt = reduce(ReduceOp::sum, bools, {0}, false, DType::i64, nullptr);
  CHECK(cnt.dtype() == DType::i64);
  CHECK(values(cnt) == V{3});
}

TEST_CASE("reductions: NaN, infinities, empties, precision", "[runtime][reduce]") {
  Tensor n = make(DType::f32, {3}, {1, kNaN, 3});
  CHECK(std::isnan(values(reduce(ReduceOp::amax, n, {0}, false, DType::f32, nullptr))[0]));
  CHECK(std::isnan(values(reduce(ReduceOp::amin, n, {0}, false, DType::f32, nullptr))[0]));
  Tensor ninf = make(DType::f64, {2}, {-kInf, -kInf});
  CHECK(values(reduce(ReduceOp::amax, ninf, {0}, false, DType::f64, nullptr)) == V{-kInf});
  Tensor empty = Tensor::empty(DType::f32, {2, 0});
  CHECK_THROWS_AS(reduce(ReduceOp::amax, empty, {1}, false, DType::f32, nullptr), std::invalid_argument);
  CHECK(values(reduce(ReduceOp::sum, empty, {1}, false, DType::f32, nullptr)) == V{0, 0});
  CHECK(values(reduce(ReduceOp::prod, empty, {1}, false, DType::f32, nullptr)) == V{1, 1});
  CHECK_THROWS_AS(reduce(ReduceOp::sum, empty, {1, 0}, false, DType::f32, nullptr), std::invalid_argument);
  // 2^24 + 1 + 1 ... is lost in f32 accumulation but not in f64.
  const int64_t len = 100000;
  Tensor big = full({len}, sf(1), DType::f32, nullptr);
  big.set(0, 16777216.0);
  CHECK(values(reduce(ReduceOp::sum, big, {0}, false, DType::f64, nullptr)) == V{16777216.0 + len - 1});
  // Many outputs reduced in parallel.
  Tensor m = full({4000, 30}, sf(0.5), DType::bf16, nullptr);
  V mv = values(reduce(ReduceOp::sum, m, {1}, false, DType::f32, nullptr));
  CHECK(std::all_of(mv.begin(), mv.end(), [](double x) { return x == 15; }));
}

TEST_CASE("large permutes and reductions agree across code paths", "[runtime][shape][reduce]") {
  const int64_t B = 3, R = 70, C = 1100;
  Tensor x = Tensor::empty(DType::f32, {B, R, C});
  V src = ramp(static_cast<size_t>(B * R * C), 9);
  for (int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = static_cast<float>(src[i]);
  Tensor xt = permute(x, {0, 2, 1}, nullptr);
  REQUIRE(xt.shape() == Shape{B, C, R});
  bool ok = true;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c)
        ok = ok && xt.data_as<float>()[(b * C + c) * R + r] == x.data_as<float>()[(b * R + r) * C + c];
  CHECK(ok);
  // Reducing the middle dim of x walks contiguous rows; reducing the last dim of xt walks each
  // output separately. Both add in the same order, so the results match bitwise.
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::amax, ReduceOp::prod}) {
    Tensor r1 = reduce(op, x, {1}, false, DType::f32, nullptr);
    Tensor r2 = reduce(op, xt, {2}, false, DType::f32, nullptr);
    REQUIRE(r1.shape() == Shape{B, C});
    CHECK(std::memcmp(r1.data(), r2.data(), r1.nbytes()) == 0);
  }
}

TEST_CASE("cuDNN: a library that is not there is named in the error; problems key every layout", "[runtime][cudnn]") {
  const char* before = std::getenv("TRACER_CUDNN_LIBRARY");
  std::string saved = before ? before : "";
  setenv("TRACER_CUDNN_LIBRARY", "/nonexistent/dir/libcudnn.so.9", 1);
  int version = 0;
  std::string file;
  std::string why = cuda::Cudnn::probe(&version, &file);
  CHECK(why.find("/nonexistent/dir/libcudnn.so.9") != std::string::npos);
  CHECK(why.find("TRACER_CUDNN_LIBRARY") != std::string::npos);
  if (before) {
    setenv("TRACER_CUDNN_LIBRARY", saved.c_str(), 1);
  } else {
    unsetenv("TRACER_CUDNN_LIBRARY");
  }
  // Where this machine has a cuDNN, it is a 9.x one with the backend API.
  if (cuda::Cudnn::probe(&version, &file).empty()) CHECK(version >= 90000);
  using P = cuda::AttentionProblem;
  P a = P::contiguous(DType::bf16, 2, 3, 64, 80, 64, 64, true, 0.125f);
  CHECK(a.q == P::Strides{3 * 64 * 64, 64 * 64, 64, 1});
  CHECK(a.k == P::Strides{3 * 80 * 64, 80 * 64, 64, 1});
  P b = a;
  b.q = {64 * 3 * 3 * 64, 64, 3 * 3 * 64, 1};  // read out of a [b, s, 3, h, d] buffer
  CHECK(a.key(false) != b.key(false));
  P c = a;
  c.causal = false;
  CHECK(a.key(false) != c.key(false));
  P d = a;
  d.dq = b.q;  // only the backward reads the gradients' strides
  CHECK(a.key(false) == d.key(false));
  CHECK(a.key(true) != d.key(true));
  CHECK(a.key(true) != a.key(false));
}

TEST_CASE("cuDNN: the attention graphs are the ones cuDNN's fused engines recognise", "[runtime][cudnn]") {
  // The tags are cuDNN's own names of these graphs, as its errors print them (PyTorch issue
  // 145580 for the causal forward, ComfyUI issue 9947 without a mask) and Thunder's issue 625 for
  // the backward (that one with a bias, whose ADD and dBias reduction we have not).
  using P = cuda::AttentionProblem;
  std::vector<std::string> tensors;
  P causal = P::contiguous(DType::bf16, 2, 3, 64, 80, 64, 64, true, 0.125f);
  CHECK(cuda::Cudnn::graph_tag(causal, false, &tensors) ==
        "Matmul_MUL_GEN_INDEX_GEN_INDEX_CMP_GE_BINARY_SELECT_Reduction_SUB_EXP_Reduction_LOG_ADD_DIV_Matmul_");
  // q, kᵀ (k's strides swapped), v, the output, the statistics packed [b, h, s_q, 1] in f32 (type 0),
  // the scale and -inf by value; bf16 is type 9.
  std::vector<std::string> want = {
      "uid 1 type 9 dims 2 3 64 64 strides 12288 4096 64 1", "uid 13 type 0 dims 1 1 1 1 strides 1 1 1 1 by value",
      "uid 2 type 9 dims 2 3 64 80 strides 15360 5120 1 64", "uid 3 type 9 dims 2 3 80 64 strides 15360 5120 64 1",
      "uid 4 type 9 dims 2 3 64 64 strides 12288 4096 64 1", "uid 5 type 0 dims 2 3 64 1 strides 192 64 1 1",
      "uid 6 type 0 dims 1 1 1 1 strides 1 1 1 1 by value"};
  CHECK(tensors == want);
  // The intermediates' types: P in the I/O type for the second product; the mask's indices
  // INT32 (type 4) along rows (axis 2) and columns (axis 3), compared as BOOLEAN (type 11).
  std::string detail;
  tensors.clear();
  cuda::Cudnn::graph_tag(causal, false, &tensors, &detail);
  auto line = [&](const std::string& d, const std::string& op) {
    for (size_t at = d.find(op + " "); at != std::string::npos; at = d.find("\n" + op + " ", at + 1)) return d.substr(at, d.find('\n', at + 1) - at);
    return std::string();
  };
  CHECK_THAT(line(detail, "DIV"), Catch::EndsWith(":9,2,3,64,80/15360,5120,80,1, prec 0"));
  CHECK_THAT(detail, Catch::Contains("prec 4 axis 2") && Catch::Contains("prec 4 axis 3"));
  CHECK_THAT(line(detail, "CMP_GE"), Catch::EndsWith(":11,2,3,64,80/15360,5120,80,1, prec 11"));
  detail.clear();
  cuda::Cudnn::graph_tag(causal, true, &tensors, &detail);
  // Pᵀ and dSᵀ: the scores' transposes by strides, in the I/O type.
  CHECK(detail.find(":9,2,3,80,64/15360,5120,1,80,") != std::string::npos);
  P full = P::contiguous(DType::f16, 1, 2, 33, 33, 128, 128, false, 0.1f);
  tensors.clear();
  CHECK(cuda::Cudnn::graph_tag(full, false, &tensors) == "Matmul_MUL_Reduction_SUB_EXP_Reduction_LOG_ADD_DIV_Matmul_");
  CHECK(tensors.at(0) == "uid 1 type 2 dims 1 2 33 128 strides 8448 4224 128 1");  // f16 is type 2
  tensors.clear();
  CHECK(cuda::Cudnn::graph_tag(full, true, &tensors) ==
        "MUL_Reduction_MUL_Matmul_MUL_SUB_EXP_Reshape_Matmul_Matmul_SUB_MUL_MUL_Reshape_Matmul_Reshape_Matmul_IDENTITY_");
  tensors.clear();
  CHECK(cuda::Cudnn::graph_tag(causal, true, &tensors) ==
        "MUL_Reduction_MUL_Matmul_MUL_SUB_GEN_INDEX_GEN_INDEX_CMP_GE_BINARY_SELECT_EXP_Reshape_Matmul_Matmul_SUB_MUL_MUL_Reshape_"
        "Matmul_Reshape_Matmul_IDENTITY_");
  // An additive mask (bias, uid 15) of the I/O type, [1, h, s_q, s_kv]: the ADD right after the
  // scale, as in the backward's tag of Thunder's issue 625 (Matmul_MUL_ADD_SUB_EXP); a plan of its own.
  P biased = causal;
  biased.bias = true;
  biased.bias_h = 3;
  biased.bias_s = {3 * 64 * 80, 64 * 80, 80, 1};
  tensors.clear();
  CHECK(cuda::Cudnn::graph_tag(biased, false, &tensors) ==
        "Matmul_MUL_ADD_GEN_INDEX_GEN_INDEX_CMP_GE_BINARY_SELECT_Reduction_SUB_EXP_Reduction_LOG_ADD_DIV_Matmul_");
  CHECK(std::find(tensors.begin(), tensors.end(), "uid 15 type 9 dims 1 3 64 80 strides 15360 5120 80 1") != tensors.end());
  tensors.clear();
  CHECK(cuda::Cudnn::graph_tag(biased, true, &tensors) ==
        "MUL_Reduction_MUL_Matmul_MUL_ADD_SUB_GEN_INDEX_GEN_INDEX_CMP_GE_BINARY_SELECT_EXP_Reshape_Matmul_Matmul_SUB_MUL_MUL_Reshape_"
        "Matmul_Reshape_Matmul_IDENTITY_");
  CHECK(biased.key(false) != causal.key(false));
  CHECK(biased.key(true) != causal.key(true));
  // The backward's f32 blocks are packed whatever the operands' strides: row sums (11) and the dq
  // accumulator (12); vᵀ by swapped strides; the gradients where the problem says.
  P strided = causal;
  strided.q = strided.dq = {64 * 3 * 3 * 64, 64, 3 * 3 * 64, 1};
  tensors.clear();
  cuda::Cudnn::graph_tag(strided, true, &tensors);
  auto has = [&](const std::string& t) { return std::find(tensors.begin(), tensors.end(), t) != tensors.end(); };
  CHECK(has("uid 11 type 0 dims 2 3 64 1 strides 192 64 1 1"));
  CHECK(has("uid 12 type 0 dims 2 3 64 64 strides 12288 4096 64 1"));
  CHECK(has("uid 3 type 9 dims 2 3 64 80 strides 15360 5120 1 64"));
  CHECK(has("uid 1 type 9 dims 2 3 64 64 strides 36864 64 576 1"));
  CHECK(has("uid 8 type 9 dims 2 3 64 64 strides 36864 64 576 1"));
}
