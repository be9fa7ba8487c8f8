// linear(a, w, bias) = a @ w.T + bias without materializing w.T (BLAS reads w transposed).
#pragma once
#include "runtime/tensor.h"

namespace tracer::rt {

// a: [..., K], w: [N, K], bias: [N] or null; result [..., N] in a's dtype (all three share it).
// f16/bf16 are computed in f32 (scratch buffers are not counted by the allocator).
Tensor linear(const Tensor& a, const Tensor& w, const Tensor* bias, Allocator* al);

}  // namespace tracer::rt
