// CPU kernels: the reference implementation of every primitive. Inputs are contiguous tensors;
// outputs are freshly allocated from the given allocator. Errors (bad shapes, dtypes) throw
// std::invalid_argument with a message naming both shapes or dtypes.
#pragma once
#include <cstdint>
#include <variant>
#include <vector>

#include "runtime/tensor.h"

namespace tracer::rt {

enum class UnaryOp {
  neg, abs, exp, log, log1p, sqrt, rsqrt, sin, cos, tanh, erf, reciprocal, sigmoid,
  logical_not, bitwise_not, sign, floor, ceil, round, expm1, exp2, log2, isfinite,
  asin, acos, atan, asinh, acosh, atanh, sinh, cosh, tan, log10, trunc, erfc, lgamma, signbit,
  digamma, erfinv, erfcinv, ndtri,
};
enum class BinaryOp {
  add, sub, mul, div, pow, maximum, minimum, remainder, floor_div, atan2, fmod, copysign,
  eq, ne, lt, le, gt, ge,              // result b8
  logical_and, logical_or, logical_xor, // result b8
  bitwise_and, bitwise_or, bitwise_xor,
  shift_left, shift_right,  // integers: PyTorch's bitwise_left_shift, bitwise_right_shift
  zeta, nextafter,          // floats
};

// An elementwise operand: a tensor or a scalar (kept as double, or int64 for exact integers).
struct Scalar {
  double value = 0;
  int64_t int_value = 0;
  bool is_int = false;
};
using Operand = std::variant<Tensor, Scalar>;

// Computes in f32 for f16/bf16 (f64 for f64, int64 for integers) and stores as out_dtype.
// compute_dtype is the dtype the inputs are converted to before the op (the promoted type);
// for comparisons out_dtype is b8.
// reuse: a buffer the output may be written into when it has the output's dtype and shape (the
// caller's promise: nobody else reads it afterwards). It may be one of the operands: element i of
// the output depends only on element i of each same-shaped operand, and every block is read
// before it is written. Left untouched when it does not fit.
Tensor unary(UnaryOp op, const Tensor& a, DType out_dtype, Allocator* al, Tensor* reuse = nullptr);
Tensor binary(BinaryOp op, const Operand& a, const Operand& b, DType compute_dtype,
              DType out_dtype, Allocator* al, Tensor* reuse = nullptr);
Tensor where(const Tensor& cond, const Operand& a, const Operand& b, DType out_dtype, Allocator* al,
             Tensor* reuse = nullptr);
Tensor cast(const Tensor& a, DType to, Allocator* al);

// Shape ops (each returns a new contiguous tensor; reshape may share storage).
Tensor broadcast_in_dim(const Tensor& a, const Shape& shape, const std::vector<int64_t>& bdims,
                        Allocator* al);
Tensor reshape(const Tensor& a, const Shape& shape);
Tensor permute(const Tensor& a, const std::vector<int64_t>& perm, Allocator* al);
// The same into out, which has the permuted shape and a's dtype.
void permute_into(const Tensor& a, const std::vector<int64_t>& perm, Tensor& out);
// Python-style slice per dimension: start, stop (already clamped, non-negative), step > 0.
Tensor slice(const Tensor& a, const std::vector<int64_t>& start, const std::vector<int64_t>& stop,
             const std::vector<int64_t>& step, Allocator* al);
Tensor cat(const std::vector<Tensor>& xs, int64_t dim, Allocator* al);

enum class ReduceOp { sum, amax, amin, prod };
// dims sorted, unique, non-negative. Accumulates sums in f64 (f32 for large f32 inputs is
// also fine, but the result must match a float64 reference within the documented tolerance).
Tensor reduce(ReduceOp op, const Tensor& a, const std::vector<int64_t>& dims, bool keepdim,
              DType out_dtype, Allocator* al);

// Batched matmul with broadcasting of batch dims (NumPy matmul rules, 1-D operands allowed).
// f32/f64 through BLAS; f16/bf16 converted to f32, multiplied, converted back; integers naive.
// transpose_a / transpose_b: the operand is stored as the transpose of its last two dimensions
// (BLAS reads it transposed; nothing is copied).
Tensor matmul(const Tensor& a, const Tensor& b, Allocator* al, bool transpose_a = false,
              bool transpose_b = false);

Tensor full(const Shape& shape, Scalar value, DType dt, Allocator* al);
// 0, 1, ..., n-1 times step plus start, as dt.
Tensor iota(int64_t n, int64_t start, int64_t step, DType dt, Allocator* al);

// Philox4x32-10. For element i of the output, block j = i / 4, word w = i % 4:
//   counter = {lo32(j), hi32(j), lo32(offset), hi32(offset)}, key = {lo32(seed), hi32(seed)},
//   u = (philox(counter, key)[w] >> 8) * 2^-24   in [0, 1),
//   value = low + (high - low) * u   (computed in f32, f64 for f64 outputs), stored as dt.
// A pure function of (shape, seed, offset); independent of threading.
// start: the draw's elements from flat index start on (a block of a fused group); shape is the
// block's.
Tensor uniform_philox(const Shape& shape, double low, double high, DType dt, uint64_t seed,
                      uint64_t offset, Allocator* al, uint64_t start = 0);
void philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]);

// Gathers along dim: out[o..., i..., r...] = table[o..., index[i...], r...] (index integer, any
// shape; the result's shape is table.shape[:dim] + index.shape + table.shape[dim+1:]; dim 0
// gathers rows). Out-of-range indices throw.
Tensor take(const Tensor& table, const Tensor& index, Allocator* al, int64_t dim = 0);
// The adjoint of take: out = zeros(shape); out[index[i...], :] += grad[i..., :].
Tensor take_backward(const Tensor& grad, const Tensor& index, int64_t num_rows, Allocator* al);

// Sorts each line of a along dim (stable; NaN above every number): {values, their positions
// along dim as i64}. A 0-d tensor is its own sort.
std::vector<Tensor> sort(const Tensor& a, int64_t dim, bool descending, Allocator* al);

// Fused attention over the last two dimensions: out = softmax(q k^T * scale) v, row by row, and
// lse = the log-sum-exp of each row's scaled scores (what the backward needs). q [..., L, E],
// k [..., S, E], v [..., S, Ev] with equal batch dimensions and one float dtype; causal masks
// key j > query i (top-left aligned). lse is f32 (f64 for f64 inputs). Returns {out, lse}.
// mask (optional): broadcast to [..., L, S] (right-aligned, dimensions equal or 1); a b8 mask keeps
// the scores where it is true (the others are -inf), a floating-point one is added to the scaled
// scores. A row with every key masked gives NaN, as softmax over -inf does.
std::vector<Tensor> attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale, Allocator* al,
                              const Tensor* mask = nullptr);
// Its gradients {dq, dk, dv} for the cotangent g of out, from the saved out and lse (and the
// forward's mask).
std::vector<Tensor> attention_backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                                       const Tensor& lse, bool causal, double scale, Allocator* al, const Tensor* mask = nullptr);

}  // namespace tracer::rt
