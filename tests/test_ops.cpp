// The op table test: every primitive, on every dtype it supports, against a float64 (or int64)
// run of the same op on the same values. An op without a sample here fails the test.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>

#include "ir/op.h"
#include "runtime/kernels.h"

namespace tracer::ir {
namespace {

using rt::DType;
using Gen = std::function<std::vector<Arg>(DType dt, uint64_t seed)>;

enum class Domain { Any, Positive, Unit, AboveOne, Prob };

// Values drawn in f64, then rounded to dt: the reference run sees exactly the same numbers.
rt::Tensor input(DType dt, rt::Shape shape, uint64_t seed, Domain dom = Domain::Any) {
  double lo = dom == Domain::Positive ? 0.5 : dom == Domain::Unit ? -0.9 : dom == Domain::AboveOne ? 1.1 : dom == Domain::Prob ? 0.05 : -2.0;
  double hi = dom == Domain::Positive ? 2.0 : dom == Domain::Unit ? 0.9 : dom == Domain::AboveOne ? 3.0 : dom == Domain::Prob ? 0.95 : 2.0;
  if (!rt::is_float(dt)) {
    lo = -8;
    hi = 8;
  }
  rt::Tensor f = rt::uniform_philox(shape, lo, hi, DType::f64, seed, 7, nullptr);
  if (!rt::is_float(dt)) {
    for (int64_t i = 0; i < f.numel(); ++i) f.set(i, std::floor(f.get(i)));
    if (rt::is_bool(dt))
      for (int64_t i = 0; i < f.numel(); ++i) f.set(i, f.get(i) > 0);
  }
  return rt::cast(f, dt, nullptr);
}

Arg T(DType dt, rt::Shape s, uint64_t seed, Domain d = Domain::Any) { return Arg::of_tensor(input(dt, std::move(s), seed, d)); }
Arg ints(std::vector<int64_t> xs) {
  std::vector<Arg> a;
  for (int64_t x : xs) a.push_back(Arg::of_int(x));
  return Arg::of_seq(Arg::Kind::Tuple, std::move(a));
}

// A generator state's 16 bytes (seed, then offset, little-endian), the seed's first byte moved by s.
rt::Tensor rng_bytes(uint64_t s) {
  rt::Tensor t = rt::Tensor::empty(DType::u8, {16}, nullptr);
  for (int k = 0; k < 16; ++k) t.data_as<uint8_t>()[k] = static_cast<uint8_t>(k + 1);
  t.data_as<uint8_t>()[0] = static_cast<uint8_t>(1 + s);
  return t;
}

Arg world_of_one() { return Arg::of_seq(Arg::Kind::Tuple, {Arg::of_str("world"), Arg::of_int(1)}); }

Gen unary(Domain d = Domain::Any) {
  return [d](DType dt, uint64_t s) { return std::vector<Arg>{T(dt, {3, 17}, s, d)}; };
}
Gen binary(Domain d = Domain::Any) {
  // Broadcasting [3, 1, 5] with [4, 5], and a scalar operand in a second sample below.
  return [d](DType dt, uint64_t s) { return std::vector<Arg>{T(dt, {3, 1, 5}, s, d), T(dt, {4, 5}, s + 1, d)}; };
}

const std::map<std::string, Gen>& samples() {
  static const std::map<std::string, Gen> m = {
      {"neg", unary()}, {"abs", unary()}, {"sign", unary()}, {"floor", unary()}, {"ceil", unary()},
      {"round", unary()}, {"exp", unary()}, {"exp2", unary()}, {"expm1", unary()},
      {"log", unary(Domain::Positive)}, {"log1p", unary(Domain::Positive)}, {"log2", unary(Domain::Positive)},
      {"asin", unary(Domain::Unit)}, {"acos", unary(Domain::Unit)}, {"atan", unary()}, {"asinh", unary()},
      {"acosh", unary(Domain::AboveOne)}, {"atanh", unary(Domain::Unit)}, {"sinh", unary()}, {"cosh", unary()},
      {"tan", unary(Domain::Unit)}, {"log10", unary(Domain::Positive)}, {"erfc", unary()}, {"lgamma", unary(Domain::Positive)},
      {"trunc", unary()}, {"signbit", unary()}, {"digamma", unary(Domain::Positive)}, {"erfinv", unary(Domain::Unit)},
      {"erfcinv", unary(Domain::Positive)}, {"ndtri", unary(Domain::Prob)}, {"zeta", binary(Domain::AboveOne)},
      {"nextafter", binary()}, {"bitwise_left_shift", binary()}, {"bitwise_right_shift", binary()},
      {"sqrt", unary(Domain::Positive)}, {"rsqrt", unary(Domain::Positive)}, {"sin", unary()}, {"cos", unary()},
      {"tanh", unary()}, {"erf", unary()}, {"reciprocal", unary(Domain::Positive)}, {"logical_not", unary()},
      {"bitwise_not", unary()}, {"isfinite", unary()},
      {"add", binary()}, {"sub", binary()}, {"mul", binary()}, {"div", binary(Domain::Positive)},
      {"pow", binary(Domain::Positive)}, {"maximum", binary()}, {"minimum", binary()},
      {"remainder", binary(Domain::Positive)}, {"floor_divide", binary(Domain::Positive)}, {"atan2", binary()},
      {"fmod", binary(Domain::Positive)}, {"copysign", binary()},
      {"eq", binary()}, {"ne", binary()}, {"lt", binary()}, {"le", binary()}, {"gt", binary()}, {"ge", binary()},
      {"logical_and", binary()}, {"logical_or", binary()}, {"logical_xor", binary()},
      {"bitwise_and", binary()}, {"bitwise_or", binary()}, {"bitwise_xor", binary()},
      {"where", [](DType dt, uint64_t s) {
         return std::vector<Arg>{T(DType::b8, {4, 1}, s), T(dt, {4, 6}, s + 1), T(dt, {6}, s + 2)};
       }},
      {"convert_element_type", [](DType dt, uint64_t s) { return std::vector<Arg>{T(dt, {5, 3}, s), Arg::of_dtype(DType::f32)}; }},
      {"broadcast_in_dim", [](DType dt, uint64_t s) {
         return std::vector<Arg>{T(dt, {3, 1}, s), ints({2, 3, 4}), ints({1, 2})};
       }},
      {"reshape", [](DType dt, uint64_t s) { return std::vector<Arg>{T(dt, {4, 6}, s), ints({2, -1, 3})}; }},
      {"transpose", [](DType dt, uint64_t s) { return std::vector<Arg>{T(dt, {2, 3, 4}, s), ints({2, 0, 1})}; }},
      {"slice", [](DType dt, uint64_t s) {
         return std::vector<Arg>{T(dt, {5, 7}, s), ints({1, 0}), ints({5, 7}), ints({2, 3})};
       }},
      {"cat", [](DType dt, uint64_t s) {
         return std::vector<Arg>{Arg::of_seq(Arg::Kind::List, {T(dt, {2, 3}, s), T(dt, {2, 5}, s + 1)}), Arg::of_int(1)};
       }},
      {"sum", [](DType dt, uint64_t s) { return std::vector<Arg>{T(dt, {4, 5, 6}, s), ints({0, 2})}; }},
      {"prod", [](DType dt, uint64_t s) { return std::vector<Arg>{T(dt, {4, 3}, s, Domain::Unit), ints({1})}; }},
      {"amax", [](DType dt, uint64_t s) { return std::vector<Arg>{T(dt, {4, 5, 6}, s), ints({1})}; }},
      {"amin", [](DType dt, uint64_t s) { return std::vector<Arg>{T(dt, {4, 5, 6}, s), ints({0, 1, 2})}; }},
      {"matmul", [](DType dt, uint64_t s) { return std::vector<Arg>{T(dt, {2, 3, 8}, s), T(dt, {8, 5}, s + 1)}; }},
      {"linear", [](DType dt, uint64_t s) {
         return std::vector<Arg>{T(dt, {2, 3, 8}, s), T(dt, {5, 8}, s + 1), T(dt, {5}, s + 2)};
       }},
      {"full", [](DType dt, uint64_t) {
         return std::vector<Arg>{ints({3, 2}), Arg::of_float(1.5), Arg::none(), Arg::of_dtype(dt)};
       }},
      {"iota", [](DType dt, uint64_t) {
         return std::vector<Arg>{Arg::of_int(7), Arg::of_int(2), Arg::of_int(3), Arg::none(), Arg::of_dtype(dt)};
       }},
      {"uniform", [](DType dt, uint64_t) {
         return std::vector<Arg>{ints({4, 9}), Arg::of_float(-1.0), Arg::of_float(2.0), Arg::none(), Arg::of_dtype(dt)};
       }},
      {"uniform_philox", [](DType dt, uint64_t s) {
         return std::vector<Arg>{ints({4, 9}), Arg::of_float(0.0), Arg::of_float(1.0), Arg::none(), Arg::of_dtype(dt),
                                 Arg::of_int(static_cast<int64_t>(s)), Arg::of_int(3)};
       }},
      {"rng_state", [](DType, uint64_t) { return std::vector<Arg>{Arg::of_int(3)}; }},
      // The generator's state as 16 bytes: seed 0x0807060504030201 + s, offset 0x100f0e0d0c0b0a09.
      {"get_rng_state", [](DType, uint64_t) { return std::vector<Arg>{}; }},
      {"set_rng_state", [](DType, uint64_t s) { return std::vector<Arg>{Arg::of_tensor(rng_bytes(s))}; }},
      {"unpack_rng_state", [](DType, uint64_t s) { return std::vector<Arg>{Arg::of_tensor(rng_bytes(s))}; }},
      {"pack_rng_state", [](DType, uint64_t s) {
         return std::vector<Arg>{Arg::of_int(static_cast<int64_t>(s)), Arg::of_int(-3)};
       }},
      {"take", [](DType dt, uint64_t s) {
         rt::Tensor idx = rt::iota(4, 5, -1, DType::i64, nullptr);  // 5, 4, 3, 2
         return std::vector<Arg>{T(dt, {6, 3}, s), Arg::of_tensor(idx), Arg::of_int(0)};
       }},
      // bitcast's bits are compared in tests/lang/thunder_prims_more.trace (a float reference
      // has other bits): here f64 to i32, the last dimension doubling.
      {"bitcast", [](DType dt, uint64_t s) { return std::vector<Arg>{T(dt, {3, 4}, s), Arg::of_dtype(DType::i32)}; }},
      {"sort", [](DType dt, uint64_t s) {
         return std::vector<Arg>{T(dt, {4, 7, 3}, s), Arg::of_int(1), Arg::of_bool(true), Arg::of_bool(false)};
       }},
      {"take_backward", [](DType dt, uint64_t s) {
         rt::Tensor idx = rt::iota(4, 0, 1, DType::i64, nullptr);
         idx.set(3, 0.0);  // a repeated row accumulates
         return std::vector<Arg>{T(dt, {4, 3}, s), Arg::of_tensor(idx), Arg::of_int(5)};
       }},
      {"attention", [](DType dt, uint64_t s) {  // 5 queries, 7 keys, head size 4, value size 3
         return std::vector<Arg>{T(dt, {2, 5, 4}, s), T(dt, {2, 7, 4}, s + 1), T(dt, {2, 7, 3}, s + 2), Arg::of_bool(true),
                                 Arg::of_float(0.5)};
       }},
      {"attention_backward", [](DType dt, uint64_t s) {
         // Any out and lse: the formulas hold for all. Moderate values keep the probabilities
         // near 1 (as a real lse does), so f32 is compared within its rounding, not amplified.
         DType lse = dt == DType::f64 ? DType::f64 : DType::f32;
         return std::vector<Arg>{T(dt, {2, 5, 3}, s, Domain::Unit),     T(dt, {2, 5, 4}, s + 1, Domain::Unit),
                                 T(dt, {2, 7, 4}, s + 2, Domain::Unit), T(dt, {2, 7, 3}, s + 3, Domain::Unit),
                                 T(dt, {2, 5, 3}, s + 4, Domain::Unit), T(lse, {2, 5}, s + 5, Domain::Positive),
                                 Arg::of_bool(false),                   Arg::of_float(0.7)};
       }},
      // Collectives over a group of one rank (the single process): each rank's value is its
      // own. tests/runtime/test_comm.cpp and the CLI's launch tests run them over 2 and 4 ranks.
      {"all_gather", [](DType dt, uint64_t s) {
         return std::vector<Arg>{T(dt, {3, 5}, s), world_of_one(), Arg::of_bool(false), Arg::of_int(1)};
       }},
      {"reduce_scatter", [](DType dt, uint64_t s) {
         return std::vector<Arg>{T(dt, {4, 3}, s), Arg::of_str("sum"), world_of_one(), Arg::of_bool(false)};
       }},
      {"all_reduce", [](DType dt, uint64_t s) {
         return std::vector<Arg>{T(dt, {2, 7}, s), Arg::of_str("max"), world_of_one(), Arg::of_bool(false)};
       }},
      {"broadcast", [](DType dt, uint64_t s) {
         return std::vector<Arg>{T(dt, {6}, s), Arg::of_int(0), world_of_one(), Arg::of_bool(false)};
       }},
      {"wait", [](DType dt, uint64_t s) { return std::vector<Arg>{T(dt, {2, 3}, s)}; }},
      {"local_shard", [](DType dt, uint64_t s) { return std::vector<Arg>{T(dt, {3, 4}, s), world_of_one(), Arg::of_int(1)}; }},
      {"copy_to_tp", [](DType dt, uint64_t s) { return std::vector<Arg>{T(dt, {2, 5}, s), world_of_one()}; }},
      {"reduce_from_tp", [](DType dt, uint64_t s) { return std::vector<Arg>{T(dt, {3, 2}, s), world_of_one()}; }},
      {"gather_from_tp", [](DType dt, uint64_t s) { return std::vector<Arg>{T(dt, {2, 3}, s), world_of_one(), Arg::of_int(-1)}; }},
  };
  return m;
}

// Binds sample arguments given in parameter order (keyword-only ones by name).
std::vector<Arg> bind_all(const OpDecl& op, const std::vector<Arg>& args) {
  std::vector<Arg> pos;
  std::vector<std::pair<std::string, Arg>> kw;
  for (size_t i = 0; i < args.size(); ++i) {
    if (op.params.at(i).kw_only) kw.emplace_back(op.params[i].name, args[i]);
    else pos.push_back(args[i]);
  }
  return bind_args(op, pos, kw);
}

bool integer_only(const OpDecl& op) {
  return op.name.rfind("bitwise_", 0) == 0;
}

// Whether the op meaningfully runs on dt (float math ops on integer inputs are promoted and
// tested through the float dtypes; integer ops skip floats).
std::vector<DType> dtypes_for(const OpDecl& op) {
  if (op.name == "bitwise_left_shift" || op.name == "bitwise_right_shift") return {DType::i64, DType::i32, DType::i8, DType::u8};
  if (integer_only(op)) return {DType::i64, DType::i32, DType::i8, DType::u8, DType::b8};
  if (op.name == "nextafter") return {DType::f64, DType::f32};
  std::vector<DType> d = {DType::f64, DType::f32, DType::f16, DType::bf16};
  bool exact_ok = op.kind == OpKind::Shape || op.name == "take" || op.name == "add" || op.name == "sub" ||
                  op.name == "mul" || op.name == "maximum" || op.name == "minimum" || op.name == "neg" ||
                  op.name == "abs" || op.name == "eq" || op.name == "lt" || op.name == "where" || op.name == "sum" ||
                  op.name == "amax" || op.name == "matmul" || op.name == "full" || op.name == "iota" || op.name == "sort";
  if (exact_ok) d.insert(d.end(), {DType::i64, DType::i32});
  if (op.kind == OpKind::Random) d = {DType::f64, DType::f32, DType::f16, DType::bf16};
  if (op.name == "rng_state") d = {DType::i64};
  // (u8 states and i64 words, compared exactly: f64's reference leaves integer tensors alone)
  if (op.name == "get_rng_state" || op.name == "set_rng_state" || op.name == "unpack_rng_state" || op.name == "pack_rng_state" ||
      op.name == "bitcast")
    d = {DType::f64};
  return d;
}

std::vector<Arg> to_reference(const std::vector<Arg>& args, DType ref) {
  std::vector<Arg> out = args;
  std::function<void(Arg&)> fix = [&](Arg& a) {
    if (a.kind == Arg::Kind::Tensor && a.tensor.dtype() != DType::b8 && rt::is_float(a.tensor.dtype()) == rt::is_float(ref))
      a.tensor = rt::cast(a.tensor, ref, nullptr);
    if (a.kind == Arg::Kind::DType && (rt::is_float(a.dtype) == rt::is_float(ref))) a.dtype = ref;
    for (Arg& x : a.items) fix(x);
  };
  for (Arg& a : out) fix(a);
  return out;
}

double tolerance(DType dt) {
  switch (dt) {
    case DType::f64: return 1e-12;
    case DType::f32: return 2e-6;
    case DType::f16: return 2e-3;
    case DType::bf16: return 1.6e-2;
    default: return 0;
  }
}

void check_close(const rt::Tensor& got, const rt::Tensor& ref, DType dt, const std::string& what) {
  INFO(what);
  REQUIRE(got.shape() == ref.shape());
  double tol = tolerance(dt);
  for (int64_t i = 0; i < got.numel(); ++i) {
    double g = got.get(i), r = ref.get(i);
    if (std::isnan(r)) {
      CHECK(std::isnan(g));
      continue;
    }
    INFO("element " << i << ": got " << g << ", reference " << r);
    // Rounded outputs may differ by one unit of the output dtype near a rounding boundary.
    double slack = tol * std::max(1.0, std::fabs(r)) + (rt::is_float(dt) ? tol : 0);
    if (std::fabs(g - r) > slack) CHECK(std::fabs(g - r) <= slack);
  }
}

}  // namespace

TEST_CASE("every primitive has an op-table sample", "[ops]") {
  for (const OpDecl& op : all_ops()) {
    INFO("op " << op.name << " has no entry in tests/test_ops.cpp samples()");
    CHECK(samples().count(op.name) == 1);
  }
}

TEST_CASE("every primitive matches its float64 (int64) reference on every dtype", "[ops]") {
  for (const OpDecl& op : all_ops()) {
    auto it = samples().find(op.name);
    if (it == samples().end()) continue;  // reported by the test above
    for (DType dt : dtypes_for(op)) {
      DType ref = rt::is_float(dt) ? DType::f64 : DType::i64;
      std::vector<Arg> args = it->second(dt, 42);
      std::vector<Arg> bound = bind_all(op, args);
      std::vector<TensorType> types = infer(op, bound);
      ExecContext c1, c2;
      c1.seed = c2.seed = 5;
      std::vector<rt::Tensor> got = op.cpu(bound, c1);
      std::vector<rt::Tensor> want = op.cpu(bind_all(op, to_reference(args, ref)), c2);
      REQUIRE(got.size() == types.size());
      for (size_t k = 0; k < got.size(); ++k) {
        std::string what = op.name + " on " + rt::dtype_name(dt);
        INFO(what);
        CHECK(got[k].dtype() == types[k].dtype);
        CHECK(got[k].shape() == types[k].shape);
        // Integer results wrap in narrow dtypes: compare with the reference narrowed the same way.
        rt::Tensor w = rt::is_float(dt) ? want[k] : rt::cast(want[k], got[k].dtype(), nullptr);
        check_close(got[k], w, dt, what);
      }
    }
  }
}

TEST_CASE("elementwise ops accept a scalar operand with PyTorch's promotion", "[ops]") {
  const OpDecl& mul = *find_op("mul");
  rt::Tensor x = input(DType::bf16, {3}, 1);
  std::vector<Arg> b = bind_args(mul, {Arg::of_tensor(x), Arg::of_float(2.5)}, {});
  CHECK(infer(mul, b)[0].dtype == DType::bf16);
  ExecContext c;
  rt::Tensor y = mul.cpu(b, c)[0];
  for (int64_t i = 0; i < 3; ++i) CHECK(y.get(i) == rt::bf16_to_float(rt::float_to_bf16(float(x.get(i) * 2.5))));
  rt::Tensor n = input(DType::i32, {3}, 2);
  CHECK(infer(mul, bind_args(mul, {Arg::of_tensor(n), Arg::of_float(0.5)}, {}))[0].dtype == DType::f32);
  CHECK(infer(mul, bind_args(mul, {Arg::of_tensor(n), Arg::of_int(2)}, {}))[0].dtype == DType::i32);
}

TEST_CASE("shape errors name both shapes", "[ops]") {
  const OpDecl& add = *find_op("add");
  std::vector<Arg> b = bind_args(add, {T(DType::f32, {2, 3}, 1), T(DType::f32, {4}, 2)}, {});
  REQUIRE_THROWS_WITH(infer(add, b), Catch::Contains("[2, 3]") && Catch::Contains("[4]"));
  const OpDecl& mm = *find_op("matmul");
  REQUIRE_THROWS_WITH(infer(mm, bind_args(mm, {T(DType::f32, {2, 3}, 1), T(DType::f32, {4, 5}, 2)}, {})),
                      Catch::Contains("3 != 4"));
  REQUIRE_THROWS_WITH(infer(mm, bind_args(mm, {T(DType::f32, {2, 3}, 1), T(DType::bf16, {3, 5}, 2)}, {})),
                      Catch::Contains("f32") && Catch::Contains("bf16"));
}

TEST_CASE("argument binding names the op and the argument", "[ops]") {
  const OpDecl& sum = *find_op("sum");
  REQUIRE_THROWS_WITH(bind_args(sum, {}, {}), Catch::Contains("sum() missing required argument 'a'"));
  REQUIRE_THROWS_WITH(bind_args(sum, {Arg::none(), Arg::none()}, {{"keep", Arg::of_bool(true)}}),
                      Catch::Contains("unexpected keyword argument 'keep'"));
  REQUIRE_THROWS_WITH(bind_args(sum, {Arg::none(), Arg::none(), Arg::none()}, {}),
                      Catch::Contains("at most 2 positional"));
}

}  // namespace tracer::ir

namespace tracer::ir {

TEST_CASE("the generator's state is 16 little-endian bytes: unpack and pack invert each other, set and get round-trip", "[ops]") {
  ExecContext c;
  rt::Tensor state = rt::Tensor::empty(rt::DType::u8, {16}, nullptr);
  for (int k = 0; k < 16; ++k) state.data_as<uint8_t>()[k] = static_cast<uint8_t>(0xf0 + k);
  auto words = find_op("unpack_rng_state")->cpu({Arg::of_tensor(state)}, c);
  REQUIRE(words.size() == 2);
  CHECK(static_cast<uint64_t>(words[0].data_as<int64_t>()[0]) == 0xf7f6f5f4f3f2f1f0ULL);
  CHECK(static_cast<uint64_t>(words[1].data_as<int64_t>()[0]) == 0xfffefdfcfbfaf9f8ULL);
  auto packed = find_op("pack_rng_state")->cpu({Arg::of_tensor(words[0]), Arg::of_tensor(words[1])}, c);
  REQUIRE(packed.size() == 1);
  CHECK(std::memcmp(packed[0].data(), state.data(), 16) == 0);
  find_op("set_rng_state")->cpu({Arg::of_tensor(state)}, c);
  CHECK(c.seed == 0xf7f6f5f4f3f2f1f0ULL);
  CHECK(c.rng_offset == 0xfffefdfcfbfaf9f8ULL);
  auto got = find_op("get_rng_state")->cpu({}, c);
  CHECK(std::memcmp(got[0].data(), state.data(), 16) == 0);
}

}  // namespace tracer::ir
