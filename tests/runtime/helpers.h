// Small helpers for the runtime tests: building tensors from values and reading them back.
#pragma once
#include <vector>

#include "runtime/kernels.h"
#include "runtime/tensor.h"

namespace tracer::rt::test {

inline Tensor make(DType dt, Shape shape, const std::vector<double>& values) {
  Tensor t = Tensor::empty(dt, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, values.at(static_cast<size_t>(i)));
  return t;
}

inline std::vector<double> values(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.get(i);
  return v;
}

inline Scalar sf(double v) { return Scalar{v, 0, false}; }
inline Scalar si(int64_t v) { return Scalar{static_cast<double>(v), v, true}; }

// Deterministic pseudo-random values in [-1, 1) for test inputs.
inline std::vector<double> ramp(size_t n, uint32_t seed = 1) {
  std::vector<double> v(n);
  uint32_t s = seed * 2654435761u + 12345u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<double>(s >> 8) / 8388608.0 - 1.0;
  }
  return v;
}

}  // namespace tracer::rt::test
