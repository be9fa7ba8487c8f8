// Short human-readable summaries of tensors: dtype, shape, a few values, and their sum.
#pragma once
#include <string>

#include "runtime/tensor.h"

namespace tracer::rt {

// "f32[2, 3] [0.1, -0.5, 2, ..., 0.25] sum=3.125"
std::string summarize(const Tensor& t, int max_values = 6);
// The same with the sum of a floating-point tensor already taken (sum_f64).
std::string summarize(const Tensor& t, double float_sum, int max_values = 6);

// The sum of every element in float64, deterministic (fixed chunks, added in order) and parallel.
double sum_f64(const Tensor& t);

}  // namespace tracer::rt
