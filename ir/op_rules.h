// Shape and dtype rules shared by the primitive table's meta functions and kernels.
// Every function throws OpError with a message naming the argument and the shapes involved.
#pragma once
#include <string>
#include <vector>

#include "ir/op.h"

namespace tracer::ir {

enum class UnaryRule { Same, Float, Bool, Integer };
enum class BinaryRule { Arith, TrueDiv, Compare, Logical, Bitwise };

struct BinaryTypes {
  TensorType out;
  DType compute;
};

TensorType tensor_type(const Arg& a, const char* what);
DType dtype_arg(const Arg& a, const char* what);
int64_t int_arg(const Arg& a, const char* what);
std::vector<int64_t> int_list(const Arg& a, const char* what);
int64_t normalize_dim(int64_t d, int64_t rank, const char* what);
rt::Scalar to_scalar(const Arg& a);
rt::Operand to_operand(const Arg& a);

TensorType unary_type(const Arg& a, UnaryRule r);
BinaryTypes binary_type(const Arg& a, const Arg& b, BinaryRule r);
TensorType where_type(const Arg& pred, const Arg& a, const Arg& b);
TensorType broadcast_in_dim_type(const Arg& a, const Arg& shape, const Arg& bdims);
TensorType reshape_type(const Arg& a, const Arg& shape);
TensorType transpose_type(const Arg& a, const Arg& perm);
std::vector<int64_t> normalized_perm(const Arg& a, const Arg& perm);

struct SliceSpec {
  std::vector<int64_t> start, stop, step;
};
SliceSpec slice_spec(const Arg& a, const Arg& start, const Arg& stop, const Arg& strides);
TensorType slice_type(const Arg& a, const Arg& start, const Arg& stop, const Arg& strides);
TensorType cat_type(const Arg& tensors, const Arg& dim);
std::vector<int64_t> reduce_dims(const Arg& a, const Arg& dims);
TensorType reduce_type(const Arg& a, const Arg& dims, const Arg& keepdim, bool widen_ints, const Arg& dtype);
TensorType matmul_type(const Arg& a, const Arg& b);
TensorType linear_type(const Arg& a, const Arg& w, const Arg& bias);
TensorType full_type(const Arg& shape, const Arg& fill, const Arg& device, const Arg& dtype);
TensorType iota_type(const Arg& n, const Arg& start, const Arg& step, const Arg& device, const Arg& dtype);
TensorType uniform_type(const Arg& shape, const Arg& lo, const Arg& hi, const Arg& device, const Arg& dtype);
TensorType take_type(const Arg& a, const Arg& index, const Arg& dim);
// take's dimension, normalized (negative counts from the end).
int64_t take_dim(const Arg& a, const Arg& dim);
TensorType take_backward_type(const Arg& grad, const Arg& index, const Arg& num_rows);
// attention(query, key, value, is_causal, scale): {out, lse}; checks every argument.
std::vector<TensorType> attention_types(const Arg& q, const Arg& k, const Arg& v, const Arg& causal, const Arg& scale,
                                       const Arg& mask = Arg{});
// attention_backward(grad, query, key, value, out, lse, is_causal, scale): {dq, dk, dv}.
std::vector<TensorType> attention_backward_types(const std::vector<Arg>& a);
bool bool_arg(const Arg& a, const char* what);
double number_arg(const Arg& a, const char* what);

// The result dtype of an elementwise op over these arguments under PyTorch's promotion.
DType promote_args(const std::vector<const Arg*>& args);

}  // namespace tracer::ir
