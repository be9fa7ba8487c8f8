// The primitive op table: parameters, shape/dtype rules and CPU kernels of every primitive.
// This file is the one place an op is declared; codegen and the interpreter derive from it.
#include <cstring>
#include <algorithm>
#include <unordered_map>

#include "ir/op.h"
#include "ir/op_rules.h"
#include "runtime/linear.h"

namespace tracer::ir {
namespace {

using K = Arg::Kind;
using rt::BinaryOp;
using rt::UnaryOp;

ParamSpec req(const char* n) { return {n, true, {}, false}; }
ParamSpec opt(const char* n, Arg d) { return {n, false, std::move(d), false}; }
ParamSpec kw(const char* n, Arg d) { return {n, false, std::move(d), true}; }
ParamSpec kwreq(const char* n) { return {n, true, {}, true}; }

rt::Allocator* alloc(ExecContext& c) { return c.allocator; }
std::vector<rt::Tensor> one(rt::Tensor t) { return {std::move(t)}; }

// ---- elementwise ----

template <UnaryOp U, UnaryRule R>
std::vector<TensorType> meta_unary(const std::vector<Arg>& a) { return {unary_type(a[0], R)}; }

template <UnaryOp U, UnaryRule R>
std::vector<rt::Tensor> cpu_unary(const std::vector<Arg>& a, ExecContext& c) {
  TensorType t = unary_type(a[0], R);
  return one(rt::unary(U, a[0].tensor, t.dtype, alloc(c), c.reuse));
}

template <BinaryOp B, BinaryRule R>
std::vector<TensorType> meta_binary(const std::vector<Arg>& a) {
  return {binary_type(a[0], a[1], R).out};
}

template <BinaryOp B, BinaryRule R>
std::vector<rt::Tensor> cpu_binary(const std::vector<Arg>& a, ExecContext& c) {
  BinaryTypes t = binary_type(a[0], a[1], R);
  return one(rt::binary(B, to_operand(a[0]), to_operand(a[1]), t.compute, t.out.dtype, alloc(c), c.reuse));
}

// nextafter steps in the storage dtype: f32 or f64 (a 16-bit float computed in f32 would round
// back to where it started).
std::vector<TensorType> meta_nextafter(const std::vector<Arg>& a) {
  BinaryTypes t = binary_type(a[0], a[1], BinaryRule::Arith);
  if (t.out.dtype != rt::DType::f32 && t.out.dtype != rt::DType::f64)
    throw OpError(std::string("expected f32 or f64 operands, got ") + rt::dtype_name(t.out.dtype));
  return {t.out};
}

// Shifts take integers, not bools (as PyTorch).
std::vector<TensorType> meta_shift(const std::vector<Arg>& a) {
  BinaryTypes t = binary_type(a[0], a[1], BinaryRule::Bitwise);
  if (t.out.dtype == rt::DType::b8) throw OpError("expected integer tensors, got b8");
  return {t.out};
}
std::vector<rt::Tensor> cpu_nextafter(const std::vector<Arg>& a, ExecContext& c) {
  TensorType t = meta_nextafter(a)[0];
  return one(rt::binary(BinaryOp::nextafter, to_operand(a[0]), to_operand(a[1]), t.dtype, t.dtype, alloc(c), c.reuse));
}
template <BinaryOp B>
std::vector<rt::Tensor> cpu_shift(const std::vector<Arg>& a, ExecContext& c) {
  TensorType t = meta_shift(a)[0];
  return one(rt::binary(B, to_operand(a[0]), to_operand(a[1]), t.dtype, t.dtype, alloc(c), c.reuse));
}

std::vector<TensorType> meta_where(const std::vector<Arg>& a) { return {where_type(a[0], a[1], a[2])}; }
std::vector<rt::Tensor> cpu_where(const std::vector<Arg>& a, ExecContext& c) {
  TensorType t = where_type(a[0], a[1], a[2]);
  rt::Tensor cond = a[0].tensor;
  if (cond.dtype() != rt::DType::b8) cond = rt::cast(cond, rt::DType::b8, alloc(c));
  return one(rt::where(cond, to_operand(a[1]), to_operand(a[2]), t.dtype, alloc(c), c.reuse));
}

std::vector<TensorType> meta_convert(const std::vector<Arg>& a) {
  TensorType t = tensor_type(a[0], "a");
  t.dtype = dtype_arg(a[1], "dtype");
  return {t};
}
std::vector<rt::Tensor> cpu_convert(const std::vector<Arg>& a, ExecContext& c) {
  return one(rt::cast(a[0].tensor, a[1].dtype, alloc(c)));
}

// bitcast: the bytes of a read as dtype. Of one size the shape stays; otherwise the last dimension
// scales by the sizes' ratio (it must divide evenly), as Thunder's prims.bitcast and torch's view(dtype).
TensorType bitcast_type(const Arg& src, const Arg& dtype) {
  auto nm = [](rt::DType d) { return std::string(rt::dtype_name(d)); };
  TensorType t = tensor_type(src, "src");
  rt::DType to = dtype_arg(dtype, "dtype");
  size_t from_size = rt::dtype_size(t.dtype), to_size = rt::dtype_size(to);
  if (t.dtype == rt::DType::b8 || to == rt::DType::b8)
    throw OpError("bool tensors hold one of two values, not bits (got " + nm(t.dtype) + " to " + nm(to) + ")");
  if (from_size != to_size) {
    if (t.shape.empty()) throw OpError("a 0-d tensor keeps its size; " + nm(t.dtype) + " and " + nm(to) + " differ in size");
    int64_t& last = t.shape.back();
    if (to_size > from_size) {
      int64_t f = static_cast<int64_t>(to_size / from_size);
      if (last % f != 0)
        throw OpError("the last dimension (" + std::to_string(last) + ") must be a multiple of " + std::to_string(f) + " to read " + nm(t.dtype) + " as " + nm(to));
      last /= f;
    } else {
      last *= static_cast<int64_t>(from_size / to_size);
    }
  }
  t.dtype = to;
  return t;
}
std::vector<TensorType> meta_bitcast(const std::vector<Arg>& a) { return {bitcast_type(a[0], a[1])}; }
std::vector<rt::Tensor> cpu_bitcast(const std::vector<Arg>& a, ExecContext& c) {
  TensorType t = bitcast_type(a[0], a[1]);
  rt::Tensor out = rt::Tensor::empty(t.dtype, t.shape, alloc(c));
  if (out.nbytes() > 0) std::memcpy(out.data(), a[0].tensor.data(), out.nbytes());
  return one(std::move(out));
}

// ---- shape ----

std::vector<TensorType> meta_broadcast_in_dim(const std::vector<Arg>& a) {
  return {broadcast_in_dim_type(a[0], a[1], a[2])};
}
std::vector<rt::Tensor> cpu_broadcast_in_dim(const std::vector<Arg>& a, ExecContext& c) {
  TensorType t = broadcast_in_dim_type(a[0], a[1], a[2]);
  return one(rt::broadcast_in_dim(a[0].tensor, t.shape, int_list(a[2], "broadcast_dimensions"), alloc(c)));
}

std::vector<TensorType> meta_reshape(const std::vector<Arg>& a) { return {reshape_type(a[0], a[1])}; }
std::vector<rt::Tensor> cpu_reshape(const std::vector<Arg>& a, ExecContext&) {
  return one(rt::reshape(a[0].tensor, reshape_type(a[0], a[1]).shape));
}

std::vector<TensorType> meta_transpose(const std::vector<Arg>& a) { return {transpose_type(a[0], a[1])}; }
std::vector<rt::Tensor> cpu_transpose(const std::vector<Arg>& a, ExecContext& c) {
  transpose_type(a[0], a[1]);
  return one(rt::permute(a[0].tensor, normalized_perm(a[0], a[1]), alloc(c)));
}

std::vector<TensorType> meta_slice(const std::vector<Arg>& a) { return {slice_type(a[0], a[1], a[2], a[3])}; }
std::vector<rt::Tensor> cpu_slice(const std::vector<Arg>& a, ExecContext& c) {
  SliceSpec s = slice_spec(a[0], a[1], a[2], a[3]);
  return one(rt::slice(a[0].tensor, s.start, s.stop, s.step, alloc(c)));
}

std::vector<TensorType> meta_cat(const std::vector<Arg>& a) { return {cat_type(a[0], a[1])}; }
std::vector<rt::Tensor> cpu_cat(const std::vector<Arg>& a, ExecContext& c) {
  TensorType t = cat_type(a[0], a[1]);
  std::vector<rt::Tensor> xs;
  for (const Arg& x : a[0].items) xs.push_back(x.tensor);
  int64_t d = normalize_dim(a[1].i, static_cast<int64_t>(t.shape.size()), "dim");
  return one(rt::cat(xs, d, alloc(c)));
}

// ---- reductions ----

template <rt::ReduceOp R>
std::vector<TensorType> meta_reduce(const std::vector<Arg>& a) {
  return {reduce_type(a[0], a[1], a[2], R == rt::ReduceOp::sum || R == rt::ReduceOp::prod, a.size() > 3 ? a[3] : Arg())};
}
template <rt::ReduceOp R>
std::vector<rt::Tensor> cpu_reduce(const std::vector<Arg>& a, ExecContext& c) {
  TensorType t = meta_reduce<R>(a)[0];
  std::vector<int64_t> dims = reduce_dims(a[0], a[1]);
  return one(rt::reduce(R, a[0].tensor, dims, a[2].b, t.dtype, alloc(c)));
}

// ---- matmul ----

std::vector<TensorType> meta_matmul(const std::vector<Arg>& a) { return {matmul_type(a[0], a[1])}; }
std::vector<rt::Tensor> cpu_matmul(const std::vector<Arg>& a, ExecContext& c) {
  return one(rt::matmul(a[0].tensor, a[1].tensor, alloc(c), c.matmul_transposed[0], c.matmul_transposed[1]));
}

std::vector<TensorType> meta_linear(const std::vector<Arg>& a) { return {linear_type(a[0], a[1], a[2])}; }
std::vector<rt::Tensor> cpu_linear(const std::vector<Arg>& a, ExecContext& c) {
  linear_type(a[0], a[1], a[2]);
  return one(rt::linear(a[0].tensor, a[1].tensor, a[2].kind == K::None ? nullptr : &a[2].tensor, alloc(c)));
}

// ---- creation and random ----

std::vector<TensorType> meta_full(const std::vector<Arg>& a) { return {full_type(a[0], a[1], a[2], a[3])}; }
std::vector<rt::Tensor> cpu_full(const std::vector<Arg>& a, ExecContext& c) {
  TensorType t = full_type(a[0], a[1], a[2], a[3]);
  return one(rt::full(t.shape, to_scalar(a[1]), t.dtype, alloc(c)));
}

std::vector<TensorType> meta_iota(const std::vector<Arg>& a) { return {iota_type(a[0], a[1], a[2], a[3], a[4])}; }
std::vector<rt::Tensor> cpu_iota(const std::vector<Arg>& a, ExecContext& c) {
  TensorType t = iota_type(a[0], a[1], a[2], a[3], a[4]);
  return one(rt::iota(a[0].i, a[1].i, a[2].i, t.dtype, alloc(c)));
}

std::vector<TensorType> meta_uniform(const std::vector<Arg>& a) { return {uniform_type(a[0], a[1], a[2], a[3], a[4])}; }
std::vector<rt::Tensor> cpu_uniform(const std::vector<Arg>& a, ExecContext& c) {
  TensorType t = uniform_type(a[0], a[1], a[2], a[3], a[4]);
  uint64_t offset = c.rng_offset++;
  return one(rt::uniform_philox(t.shape, a[1].number(), a[2].number(), t.dtype, c.seed, offset, alloc(c)));
}

// seed and offset: Python ints, or 0-d integer tensors (the philox pass threads them as values).
int64_t rng_word(const Arg& a, const char* what) {
  // Read exactly: through double, seeds of 2^53 and more would round (the GPU reads them exactly).
  if (a.kind == K::Tensor && a.tensor.dtype() == rt::DType::i64) return a.tensor.data_as<int64_t>()[0];
  if (a.kind == K::Tensor) return static_cast<int64_t>(a.tensor.get(0));
  if (a.kind == K::Proxy) return 0;
  return int_arg(a, what);
}

void check_rng_word(const Arg& a, const char* what) {
  if (a.is_tensorish()) {
    TensorType t = arg_type(a);
    if (!t.shape.empty() || !rt::is_int(t.dtype))
      throw OpError(std::string("argument '") + what + "' must be an int or a 0-d integer tensor, got " + t.str());
    return;
  }
  int_arg(a, what);
}

std::vector<TensorType> meta_uniform_philox(const std::vector<Arg>& a) {
  check_rng_word(a[5], "seed");
  check_rng_word(a[6], "offset");
  return {uniform_type(a[0], a[1], a[2], a[3], a[4])};
}
std::vector<rt::Tensor> cpu_uniform_philox(const std::vector<Arg>& a, ExecContext& c) {
  TensorType t = meta_uniform_philox(a)[0];
  return one(rt::uniform_philox(t.shape, a[1].number(), a[2].number(), t.dtype,
                                static_cast<uint64_t>(rng_word(a[5], "seed")),
                                static_cast<uint64_t>(rng_word(a[6], "offset")), alloc(c)));
}

// The generator's seed and offset as 0-d i64 tensors; the offset then advances by `draws`.
std::vector<TensorType> meta_rng_state(const std::vector<Arg>& a) {
  if (int_arg(a[0], "draws") < 0) throw OpError("draws must be non-negative");
  TensorType t;
  t.dtype = DType::i64;
  t.device = a[1].kind == K::Str ? a[1].s : "cpu";
  return {t, t};
}
std::vector<rt::Tensor> cpu_rng_state(const std::vector<Arg>& a, ExecContext& c) {
  rt::Tensor seed = rt::full({}, rt::Scalar{double(c.seed), static_cast<int64_t>(c.seed), true}, DType::i64, alloc(c));
  rt::Tensor off = rt::full({}, rt::Scalar{double(c.rng_offset), static_cast<int64_t>(c.rng_offset), true}, DType::i64, alloc(c));
  c.rng_offset += static_cast<uint64_t>(a[0].i);
  return {seed, off};
}

// The generator's state as a value, as Thunder's RNG executor and PyTorch hold it: 16 bytes on the
// host, the seed then the offset, each a little-endian u64 (get, set, and their (un)packing).
TensorType rng_state_bytes_type() {
  TensorType t;
  t.dtype = DType::u8;
  t.shape = {16};
  t.device = "cpu";
  return t;
}
void check_rng_state_bytes(const Arg& a) {
  if (!a.is_tensorish()) throw OpError("argument 'state' must be the generator's state, a u8[16] tensor");
  TensorType t = arg_type(a);
  if (t.dtype != DType::u8 || t.shape != rt::Shape{16})
    throw OpError("argument 'state' must be the generator's state, a u8[16] tensor (seed and offset), got " + t.str());
}
rt::Tensor rng_state_bytes(uint64_t seed, uint64_t offset, ExecContext& c) {
  rt::Tensor t = rt::Tensor::empty(DType::u8, {16}, alloc(c));
  auto* b = t.data_as<uint8_t>();
  for (int k = 0; k < 8; ++k) {
    b[k] = static_cast<uint8_t>(seed >> (8 * k));
    b[8 + k] = static_cast<uint8_t>(offset >> (8 * k));
  }
  return t;
}
void read_rng_state_bytes(const rt::Tensor& t, uint64_t* seed, uint64_t* offset) {
  const auto* b = t.data_as<uint8_t>();
  *seed = *offset = 0;
  for (int k = 0; k < 8; ++k) {
    *seed |= static_cast<uint64_t>(b[k]) << (8 * k);
    *offset |= static_cast<uint64_t>(b[8 + k]) << (8 * k);
  }
}
std::vector<TensorType> meta_get_rng_state(const std::vector<Arg>&) { return {rng_state_bytes_type()}; }
std::vector<rt::Tensor> cpu_get_rng_state(const std::vector<Arg>&, ExecContext& c) {
  return one(rng_state_bytes(c.seed, c.rng_offset, c));
}
std::vector<TensorType> meta_set_rng_state(const std::vector<Arg>& a) {
  check_rng_state_bytes(a[0]);
  return {rng_state_bytes_type()};
}
std::vector<rt::Tensor> cpu_set_rng_state(const std::vector<Arg>& a, ExecContext& c) {
  read_rng_state_bytes(a[0].tensor, &c.seed, &c.rng_offset);
  return one(rng_state_bytes(c.seed, c.rng_offset, c));
}
std::vector<TensorType> meta_unpack_rng_state(const std::vector<Arg>& a) {
  check_rng_state_bytes(a[0]);
  TensorType t;
  t.dtype = DType::i64;
  t.device = "cpu";
  return {t, t};
}
std::vector<rt::Tensor> cpu_unpack_rng_state(const std::vector<Arg>& a, ExecContext& c) {
  uint64_t seed = 0, offset = 0;
  read_rng_state_bytes(a[0].tensor, &seed, &offset);
  auto word = [&](uint64_t w) {
    rt::Tensor t = rt::Tensor::empty(DType::i64, {}, alloc(c));
    t.data_as<int64_t>()[0] = static_cast<int64_t>(w);
    return t;
  };
  return {word(seed), word(offset)};
}
std::vector<TensorType> meta_pack_rng_state(const std::vector<Arg>& a) {
  check_rng_word(a[0], "seed");
  check_rng_word(a[1], "offset");
  return {rng_state_bytes_type()};
}
std::vector<rt::Tensor> cpu_pack_rng_state(const std::vector<Arg>& a, ExecContext& c) {
  return one(rng_state_bytes(static_cast<uint64_t>(rng_word(a[0], "seed")), static_cast<uint64_t>(rng_word(a[1], "offset")), c));
}

// ---- gather ----

std::vector<TensorType> meta_take(const std::vector<Arg>& a) { return {take_type(a[0], a[1], a[2])}; }
std::vector<rt::Tensor> cpu_take(const std::vector<Arg>& a, ExecContext& c) {
  take_type(a[0], a[1], a[2]);
  return one(rt::take(a[0].tensor, a[1].tensor, alloc(c), take_dim(a[0], a[2])));
}

std::vector<TensorType> meta_take_backward(const std::vector<Arg>& a) {
  return {take_backward_type(a[0], a[1], a[2])};
}
std::vector<rt::Tensor> cpu_take_backward(const std::vector<Arg>& a, ExecContext& c) {
  take_backward_type(a[0], a[1], a[2]);
  return one(rt::take_backward(a[0].tensor, a[1].tensor, a[2].i, alloc(c)));
}

std::vector<TensorType> meta_attention(const std::vector<Arg>& a) { return attention_types(a[0], a[1], a[2], a[3], a[4], a[5]); }
std::vector<rt::Tensor> cpu_attention(const std::vector<Arg>& a, ExecContext& c) {
  attention_types(a[0], a[1], a[2], a[3], a[4], a[5]);
  return rt::attention(a[0].tensor, a[1].tensor, a[2].tensor, a[3].b, a[4].number(), alloc(c), a[5].kind == K::None ? nullptr : &a[5].tensor);
}

std::vector<TensorType> meta_attention_backward(const std::vector<Arg>& a) { return attention_backward_types(a); }
std::vector<rt::Tensor> cpu_attention_backward(const std::vector<Arg>& a, ExecContext& c) {
  attention_backward_types(a);
  return rt::attention_backward(a[0].tensor, a[1].tensor, a[2].tensor, a[3].tensor, a[4].tensor, a[5].tensor, a[6].b,
                                a[7].number(), alloc(c), a[8].kind == K::None ? nullptr : &a[8].tensor);
}

// sort(a, dim=-1, descending=False, stable=False, *, out=None): values and i64 positions, a's shape.
int64_t sort_dim(const std::vector<Arg>& a) {
  TensorType t = tensor_type(a[0], "a");
  int64_t rank = static_cast<int64_t>(t.shape.size());
  int64_t d = int_arg(a[1], "dim");
  int64_t n = std::max<int64_t>(rank, 1);
  if (d < -n || d >= n) throw OpError("dimension " + std::to_string(d) + " is out of range for a tensor of " + std::to_string(rank) + " dimensions");
  if (a[4].kind != K::None) throw OpError("out= is not supported (only out=None)");
  if (a[2].kind != K::Bool || a[3].kind != K::Bool) throw OpError("descending and stable must be bools");
  return d < 0 ? d + n : d;
}
std::vector<TensorType> meta_sort(const std::vector<Arg>& a) {
  sort_dim(a);
  TensorType v = tensor_type(a[0], "a"), i = v;
  i.dtype = rt::DType::i64;
  return {v, i};
}
std::vector<rt::Tensor> cpu_sort(const std::vector<Arg>& a, ExecContext& c) {
  int64_t d = sort_dim(a);
  return rt::sort(a[0].tensor, d, a[2].b, alloc(c));
}

#define UN(name, U, R, doc) \
  {name, OpKind::Elementwise, {req("a")}, &meta_unary<UnaryOp::U, UnaryRule::R>, &cpu_unary<UnaryOp::U, UnaryRule::R>, doc, {}}
#define BIN(name, B, R, doc)                                                     \
  {name, OpKind::Elementwise, {req("a"), req("b")}, &meta_binary<BinaryOp::B, BinaryRule::R>, \
   &cpu_binary<BinaryOp::B, BinaryRule::R>, doc, {}}

// The table leaves OpDecl's last fields (ns, signature: for an embedding host's ops) at their
// defaults.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
std::vector<OpDecl> make_table() {
  const Arg kNone, kFalse = Arg::of_bool(false), kZero = Arg::of_int(0), kOne = Arg::of_int(1);
  return {
      UN("neg", neg, Same, "Elementwise negation."),
      UN("abs", abs, Same, "Elementwise absolute value."),
      UN("sign", sign, Same, "Elementwise sign (-1, 0 or 1)."),
      UN("floor", floor, Same, "Elementwise floor."),
      UN("ceil", ceil, Same, "Elementwise ceiling."),
      UN("round", round, Same, "Elementwise rounding, half to even."),
      UN("exp", exp, Float, "Elementwise e**a."),
      UN("exp2", exp2, Float, "Elementwise 2**a."),
      UN("expm1", expm1, Float, "Elementwise e**a - 1."),
      UN("log", log, Float, "Elementwise natural logarithm."),
      UN("log1p", log1p, Float, "Elementwise log(1 + a)."),
      UN("log2", log2, Float, "Elementwise base-2 logarithm."),
      UN("sqrt", sqrt, Float, "Elementwise square root."),
      UN("rsqrt", rsqrt, Float, "Elementwise 1 / sqrt(a)."),
      UN("sin", sin, Float, "Elementwise sine."),
      UN("cos", cos, Float, "Elementwise cosine."),
      UN("tanh", tanh, Float, "Elementwise hyperbolic tangent."),
      UN("erf", erf, Float, "Elementwise error function."),
      UN("reciprocal", reciprocal, Float, "Elementwise 1 / a."),
      UN("logical_not", logical_not, Bool, "Elementwise logical not (result b8)."),
      UN("bitwise_not", bitwise_not, Integer, "Elementwise bitwise not of an integer or bool tensor."),
      UN("isfinite", isfinite, Bool, "Elementwise test for finite values (result b8)."),
      UN("signbit", signbit, Bool, "Elementwise test of the sign bit (result b8; true for -0.0 and negative values)."),
      UN("trunc", trunc, Same, "Elementwise rounding toward zero."),
      UN("asin", asin, Float, "Elementwise arcsine."),
      UN("acos", acos, Float, "Elementwise arccosine."),
      UN("atan", atan, Float, "Elementwise arctangent."),
      UN("asinh", asinh, Float, "Elementwise inverse hyperbolic sine."),
      UN("acosh", acosh, Float, "Elementwise inverse hyperbolic cosine."),
      UN("atanh", atanh, Float, "Elementwise inverse hyperbolic tangent."),
      UN("sinh", sinh, Float, "Elementwise hyperbolic sine."),
      UN("cosh", cosh, Float, "Elementwise hyperbolic cosine."),
      UN("tan", tan, Float, "Elementwise tangent."),
      UN("log10", log10, Float, "Elementwise base-10 logarithm."),
      UN("erfc", erfc, Float, "Elementwise complementary error function, 1 - erf(a)."),
      UN("lgamma", lgamma, Float, "Elementwise natural logarithm of the absolute value of the gamma function."),
      UN("digamma", digamma, Float, "Elementwise digamma function, the derivative of lgamma (-inf at +0, NaN at the negative integers)."),
      UN("erfinv", erfinv, Float, "Elementwise inverse of erf on [-1, 1] (+-inf at +-1, NaN outside)."),
      UN("erfcinv", erfcinv, Float, "Elementwise inverse of erfc on [0, 2] (+inf at 0, -inf at 2, NaN outside)."),
      UN("ndtri", ndtri, Float, "Elementwise quantile function of the standard normal distribution, on [0, 1]."),
      BIN("add", add, Arith, "Elementwise a + b with broadcasting and type promotion."),
      BIN("sub", sub, Arith, "Elementwise a - b."),
      BIN("mul", mul, Arith, "Elementwise a * b."),
      BIN("div", div, TrueDiv, "Elementwise true division a / b (integers give f32)."),
      BIN("pow", pow, Arith, "Elementwise a ** b."),
      BIN("maximum", maximum, Arith, "Elementwise maximum (NaN propagates)."),
      BIN("minimum", minimum, Arith, "Elementwise minimum (NaN propagates)."),
      BIN("remainder", remainder, Arith, "Elementwise Python-style remainder (sign of b)."),
      BIN("floor_divide", floor_div, Arith, "Elementwise floor division."),
      BIN("atan2", atan2, TrueDiv, "Elementwise atan2(a, b)."),
      BIN("fmod", fmod, Arith, "Elementwise C-style remainder of truncated division (the sign of a; integers by zero give 0)."),
      BIN("copysign", copysign, TrueDiv, "Elementwise |a| with the sign of b (integers give f32)."),
      BIN("zeta", zeta, TrueDiv, "Elementwise Hurwitz zeta function, the sum over k >= 0 of (b + k)^-a (a > 1; integers give f32)."),
      {"nextafter", OpKind::Elementwise, {req("a"), req("b")}, &meta_nextafter, &cpu_nextafter,
       "Elementwise the next representable value after a toward b (f32 or f64).", {}},
      {"bitwise_left_shift", OpKind::Elementwise, {req("a"), req("b")}, &meta_shift, &cpu_shift<BinaryOp::shift_left>,
       "Elementwise a << b of integer tensors (a count below 0 or from the width on gives 0).", {}},
      {"bitwise_right_shift", OpKind::Elementwise, {req("a"), req("b")}, &meta_shift, &cpu_shift<BinaryOp::shift_right>,
       "Elementwise arithmetic a >> b of integer tensors (a count below 0 or from the width on gives a's sign, 0 or -1).",
       {}},
      BIN("eq", eq, Compare, "Elementwise a == b (result b8)."),
      BIN("ne", ne, Compare, "Elementwise a != b (result b8)."),
      BIN("lt", lt, Compare, "Elementwise a < b (result b8)."),
      BIN("le", le, Compare, "Elementwise a <= b (result b8)."),
      BIN("gt", gt, Compare, "Elementwise a > b (result b8)."),
      BIN("ge", ge, Compare, "Elementwise a >= b (result b8)."),
      BIN("logical_and", logical_and, Logical, "Elementwise logical and (result b8)."),
      BIN("logical_or", logical_or, Logical, "Elementwise logical or (result b8)."),
      BIN("logical_xor", logical_xor, Logical, "Elementwise logical xor (result b8)."),
      BIN("bitwise_and", bitwise_and, Bitwise, "Elementwise bitwise and of integer or bool tensors."),
      BIN("bitwise_or", bitwise_or, Bitwise, "Elementwise bitwise or of integer or bool tensors."),
      BIN("bitwise_xor", bitwise_xor, Bitwise, "Elementwise bitwise xor of integer or bool tensors."),
      {"where", OpKind::Elementwise, {req("pred"), req("a"), req("b")}, &meta_where, &cpu_where,
       "Elementwise selection: a where pred is true, else b (broadcasting all three).", {}},
      {"convert_element_type", OpKind::Elementwise, {req("a"), req("dtype")}, &meta_convert, &cpu_convert,
       "Casts a to dtype (floats to integers truncate toward zero).", {"cast"}},
      {"bitcast", OpKind::Other, {req("src"), req("dtype")}, &meta_bitcast, &cpu_bitcast,
       "The bytes of src read as dtype (the last dimension scales when the sizes differ; no gradient).", {}},
      {"broadcast_in_dim", OpKind::Shape, {req("a"), req("shape"), req("broadcast_dimensions")},
       &meta_broadcast_in_dim, &cpu_broadcast_in_dim,
       "Broadcasts a to shape; dimension i of a becomes dimension broadcast_dimensions[i].", {}},
      {"reshape", OpKind::Shape, {req("a"), req("shape")}, &meta_reshape, &cpu_reshape,
       "Reshapes a (one dimension may be -1).", {}},
      {"transpose", OpKind::Shape, {req("a"), req("permutation")}, &meta_transpose, &cpu_transpose,
       "Permutes the dimensions of a.", {"permute"}},
      {"slice", OpKind::Shape, {req("a"), req("start_indices"), req("end_indices"), opt("strides", kNone)},
       &meta_slice, &cpu_slice, "Takes a[start:end:stride] in every dimension.", {}},
      {"cat", OpKind::Shape, {req("tensors"), opt("dim", kZero)}, &meta_cat, &cpu_cat,
       "Concatenates tensors along dim.", {}},
      {"sum", OpKind::Reduction, {req("a"), req("dims"), kw("keepdim", kFalse), kw("dtype", kNone)},
       &meta_reduce<rt::ReduceOp::sum>, &cpu_reduce<rt::ReduceOp::sum>,
       "Sums over dims (integers and bools sum to i64).", {}},
      {"prod", OpKind::Reduction, {req("a"), req("dims"), kw("keepdim", kFalse), kw("dtype", kNone)},
       &meta_reduce<rt::ReduceOp::prod>, &cpu_reduce<rt::ReduceOp::prod>, "Product over dims.", {}},
      {"amax", OpKind::Reduction, {req("a"), req("dims"), kw("keepdim", kFalse)},
       &meta_reduce<rt::ReduceOp::amax>, &cpu_reduce<rt::ReduceOp::amax>, "Maximum over dims.", {}},
      {"amin", OpKind::Reduction, {req("a"), req("dims"), kw("keepdim", kFalse)},
       &meta_reduce<rt::ReduceOp::amin>, &cpu_reduce<rt::ReduceOp::amin>, "Minimum over dims.", {}},
      {"matmul", OpKind::Matmul, {req("a"), req("b")}, &meta_matmul, &cpu_matmul,
       "Matrix product with NumPy's rules (batched, broadcasting batch dimensions).", {}},
      {"linear", OpKind::Matmul, {req("a"), req("w"), opt("bias", kNone)}, &meta_linear, &cpu_linear,
       "a @ w.T + bias for a weight w of shape [out, in], without transposing w in memory.", {}},
      {"full", OpKind::Creation, {req("shape"), req("fill_value"), kw("device", kNone), kw("dtype", kNone)},
       &meta_full, &cpu_full, "A tensor of shape filled with fill_value.", {}},
      {"iota", OpKind::Creation,
       {req("length"), kw("start", kZero), kw("step", kOne), kw("device", kNone), kw("dtype", Arg::of_dtype(DType::i64))},
       &meta_iota, &cpu_iota, "start, start + step, ... (length values).", {}},
      {"uniform", OpKind::Random,
       {req("shape"), opt("minval", Arg::of_float(0.0)), opt("maxval", Arg::of_float(1.0)), kw("device", kNone),
        kw("dtype", Arg::of_dtype(DType::f32))},
       &meta_uniform, &cpu_uniform, "Uniform random numbers in [minval, maxval) from the stateful generator.", {}},
      {"uniform_philox", OpKind::Random,
       {req("shape"), opt("minval", Arg::of_float(0.0)), opt("maxval", Arg::of_float(1.0)), kw("device", kNone),
        kw("dtype", Arg::of_dtype(DType::f32)), kwreq("seed"), kwreq("offset")},
       &meta_uniform_philox, &cpu_uniform_philox,
       "Uniform random numbers, a pure function of (shape, seed, offset) by Philox4x32-10.", {}},
      {"rng_state", OpKind::Random, {req("draws"), kw("device", kNone)}, &meta_rng_state, &cpu_rng_state,
       "seed, offset = rng_state(draws): the generator's state as 0-d i64 tensors, then advances its offset by "
       "draws (the philox pass makes every random op stateless with it).", {}},
      {"get_rng_state", OpKind::Random, {}, &meta_get_rng_state, &cpu_get_rng_state,
       "state = get_rng_state(): the generator's seed and offset as 16 bytes (u8[16], little-endian u64s), as "
       "Thunder's and PyTorch's RNG states are; nothing advances.", {}},
      {"set_rng_state", OpKind::Random, {req("state")}, &meta_set_rng_state, &cpu_set_rng_state,
       "set_rng_state(state): makes a u8[16] state (seed, offset) the generator's, for the draws after it; "
       "returns the state set (passes keep it though nothing reads it).", {}},
      {"unpack_rng_state", OpKind::Random, {req("state")}, &meta_unpack_rng_state, &cpu_unpack_rng_state,
       "seed, offset = unpack_rng_state(state): a u8[16] state's seed and offset as 0-d i64 tensors.", {}},
      {"pack_rng_state", OpKind::Random, {req("seed"), req("offset")}, &meta_pack_rng_state, &cpu_pack_rng_state,
       "state = pack_rng_state(seed, offset): the u8[16] state of a seed and offset (ints or 0-d integer tensors).", {}},
      {"take", OpKind::Gather, {req("a"), req("index"), opt("dim", kZero)}, &meta_take, &cpu_take,
       "Gathers a along dim at index (rows for dim 0): the result has shape a.shape[:dim] + index.shape + a.shape[dim+1:].", {}},
      {"take_backward", OpKind::Gather, {req("grad"), req("index"), req("num_rows")}, &meta_take_backward,
       &cpu_take_backward, "The adjoint of take: adds the rows of grad into zeros at index.", {"index_add_rows"}},
      {"sort", OpKind::Other, {req("a"), opt("dim", Arg::of_int(-1)), opt("descending", kFalse), opt("stable", kFalse), kw("out", kNone)},
       &meta_sort, &cpu_sort,
       "values, indices = sort(a, dim=-1, descending=False, stable=False): a's elements along dim in order, and their "
       "positions there (i64). Always stable (equal values keep their order, either direction); NaN sorts above every "
       "number, as PyTorch's. On the GPU a bitonic kernel, a block a line (lines over 4096 elements sort on the host).", {}},
      {"attention", OpKind::Other, {req("query"), req("key"), req("value"), req("is_causal"), req("scale"), opt("attn_mask", kNone)},
       &meta_attention, &cpu_attention,
       "out, lse = attention(query, key, value, is_causal, scale, attn_mask=None): softmax(query @ key^T * scale + mask) "
       "@ value over the last two dimensions, fused (the scores never exist whole; a flash-attention kernel on the GPU), "
       "and lse the log-sum-exp of each query row's scaled, masked scores. is_causal masks key j > query i; attn_mask "
       "broadcasts to [..., L, S]: a b8 mask keeps the scores where true, a floating-point one is added.", {}},
      {"attention_backward", OpKind::Other,
       {req("grad"), req("query"), req("key"), req("value"), req("out"), req("lse"), req("is_causal"), req("scale"),
        opt("attn_mask", kNone)},
       &meta_attention_backward, &cpu_attention_backward,
       "dq, dk, dv = attention_backward(grad, query, key, value, out, lse, is_causal, scale, attn_mask=None): the "
       "gradients of attention for query, key and value, recomputing the probabilities from lse (the mask's own "
       "gradient, where it needs one, is computed apart: stdlib/passes/grad.trace).", {}},
  };
}
#pragma GCC diagnostic pop

}  // namespace

std::vector<OpDecl> dist_ops();  // ir/ops_dist.cpp: the collectives

namespace {

std::vector<OpDecl> full_table() {
  std::vector<OpDecl> t = make_table();
  for (OpDecl& op : dist_ops()) t.push_back(std::move(op));
  return t;
}

}  // namespace

const std::vector<OpDecl>& all_ops() {
  static const std::vector<OpDecl> table = full_table();
  return table;
}

const OpDecl* find_op(const std::string& name) {
  static const std::unordered_map<std::string, const OpDecl*> index = [] {
    std::unordered_map<std::string, const OpDecl*> m;
    for (const OpDecl& op : all_ops()) {
      m.emplace(op.name, &op);
      for (const std::string& a : op.aliases) m.emplace(a, &op);
    }
    return m;
  }();
  auto it = index.find(name);
  return it == index.end() ? nullptr : it->second;
}

std::vector<Arg> bind_args(const OpDecl& op, std::vector<Arg> positional,
                           std::vector<std::pair<std::string, Arg>> keywords) {
  size_t max_pos = 0;
  for (const ParamSpec& p : op.params)
    if (!p.kw_only) ++max_pos;
  if (positional.size() > max_pos)
    throw OpError(op.name + "() takes at most " + std::to_string(max_pos) + " positional argument" +
                  (max_pos == 1 ? "" : "s") + " but " + std::to_string(positional.size()) + " were given");
  std::vector<Arg> bound(op.params.size());
  std::vector<bool> given(op.params.size(), false);
  for (size_t i = 0; i < positional.size(); ++i) {
    bound[i] = std::move(positional[i]);
    given[i] = true;
  }
  for (auto& kv : keywords) {
    const std::string& name = kv.first;  // (a structured binding cannot be captured before C++20)
    Arg& value = kv.second;
    auto it = std::find_if(op.params.begin(), op.params.end(), [&](const ParamSpec& p) { return p.name == name; });
    if (it == op.params.end()) throw OpError(op.name + "() got an unexpected keyword argument '" + name + "'");
    size_t i = static_cast<size_t>(it - op.params.begin());
    if (given[i]) throw OpError(op.name + "() got multiple values for argument '" + name + "'");
    bound[i] = std::move(value);
    given[i] = true;
  }
  for (size_t i = 0; i < op.params.size(); ++i) {
    if (given[i]) continue;
    if (op.params[i].required)
      throw OpError(op.name + "() missing required argument '" + op.params[i].name + "'");
    bound[i] = op.params[i].default_value;
  }
  return bound;
}

namespace {

// The distribution of an op's results (docs/distributed.md): the collectives state theirs (their
// meta functions); the stateful random draws may differ between ranks; otherwise per rank if any
// tensor read differs between ranks (per rank, or a sharded operand: what is computed from this
// rank's slice is its own), else not known if any tensor read is not, else the same on every
// rank (constants are).
void propagate_dist(const OpDecl& op, const std::vector<Arg>& bound, std::vector<TensorType>& out) {
  static const std::unordered_map<std::string, bool> collective = {
      {"all_gather", true}, {"reduce_scatter", true}, {"all_reduce", true}, {"broadcast", true}, {"wait", true},
      {"local_shard", true}, {"copy_to_tp", true}, {"reduce_from_tp", true}, {"gather_from_tp", true}};
  if (collective.count(op.name) && op.ns == "prims") return;
  Dist d = Dist::replicated;
  if (op.name == "uniform" || op.name == "rng_state") d = Dist::per_rank;
  bool unknown = false;
  for (const Arg& a : bound)
    for_each_proxy(a, [&](const ProxyPtr& p) {
      if (p->type.dist == Dist::unknown) unknown = true;
      else if (p->type.dist != Dist::replicated) d = Dist::per_rank;
    });
  for (TensorType& t : out) {
    t.dist = d == Dist::per_rank ? d : unknown ? Dist::unknown : d;
    t.shard_dim = 0;
  }
}

}  // namespace

std::vector<TensorType> infer(const OpDecl& op, const std::vector<Arg>& bound) {
  try {
    // A FUTURE (an asynchronous collective's pending result) is read by prims.wait alone.
    if (op.name != "wait")
      for (size_t i = 0; i < bound.size(); ++i)
        for_each_proxy(bound[i], [&](const ProxyPtr& p) {
          if (p->type.future)
            throw OpError(p->name + " is a FUTURE (the pending result of a collective): prims.wait(" + p->name + ") gives its tensor");
        });
    for (size_t i = 0; i < bound.size(); ++i)
      for_each_proxy(bound[i], [&](const ProxyPtr& p) {
        if (!p->written_over.empty())
          throw OpError(p->name + " was written over by " + p->written_over + ", and tracer's traces are functional: read the tensor " +
                        p->written_over + " returned instead (as Thunder's functionalized traces do)");
        if (stale_alias(p)) {
          const ProxyPtr& r = view_root(p);
          throw OpError(p->name + (p == r ? " was written in place through one of its views"
                                           : " is a view of " + r->name + ", which was written in place through an alias") +
                        " after " + p->name + " was made, and tracer's traces are functional: read the tensor the in-place op "
                        "returned, or pass " + p->name + " through prims.update_aliases first (as Thunder's traces do)");
        }
      });
    std::vector<TensorType> out = op.meta(bound);
    propagate_dist(op, bound, out);
    return out;
  } catch (const OpError& e) {
    throw OpError(op.name + ": " + e.what());
  }
}

}  // namespace tracer::ir
