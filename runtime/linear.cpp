// The linear layer's matmul with a transposed weight, through BLAS.
#include "runtime/linear.h"

#include <cblas.h>

#include <stdexcept>
#include <vector>

namespace tracer::rt {

namespace {

void check(const Tensor& a, const Tensor& w, const Tensor* bias) {
  if (a.dim() < 1 || w.dim() != 2 || a.shape().back() != w.shape()[1])
    throw std::invalid_argument("linear: input " + shape_str(a.shape()) + " and weight " + shape_str(w.shape()) +
                                " are incompatible (the weight must be [out, in] with in == the input's last size)");
  if (a.dtype() != w.dtype() || (bias && bias->dtype() != a.dtype()))
    throw std::invalid_argument(std::string("linear: operands have different dtypes ") + dtype_name(a.dtype()) +
                                " and " + dtype_name(w.dtype()));
  if (bias && (bias->dim() != 1 || bias->shape()[0] != w.shape()[0]))
    throw std::invalid_argument("linear: bias " + shape_str(bias->shape()) + " does not match weight " +
                                shape_str(w.shape()));
}

std::vector<float> to_f32(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  const auto* p = t.data_as<uint16_t>();
  bool bf = t.dtype() == DType::bf16;
  int64_t n = t.numel();
#pragma omp parallel for if (n > 65536)
  for (int64_t i = 0; i < n; ++i) out[i] = bf ? bf16_to_float(p[i]) : half_to_float(p[i]);
  return out;
}

}  // namespace

Tensor linear(const Tensor& a, const Tensor& w, const Tensor* bias, Allocator* al) {
  check(a, w, bias);
  int64_t K = w.shape()[1], N = w.shape()[0], M = K ? a.numel() / K : 0;
  Shape out_shape = a.shape();
  out_shape.back() = N;
  Tensor out = Tensor::empty(a.dtype(), out_shape, al);
  if (M == 0 || N == 0) return out;
  int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
  switch (a.dtype()) {
    case DType::f32:
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a.data_as<float>(), k, w.data_as<float>(), k,
                  0.0f, out.data_as<float>(), n);
      break;
    case DType::f64:
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0, a.data_as<double>(), k, w.data_as<double>(), k,
                  0.0, out.data_as<double>(), n);
      break;
    case DType::f16:
    case DType::bf16: {
      std::vector<float> A = to_f32(a), W = to_f32(w), C(static_cast<size_t>(M * N));
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, A.data(), k, W.data(), k, 0.0f, C.data(), n);
      bool bf = a.dtype() == DType::bf16;
      if (bias) {
        std::vector<float> B = to_f32(*bias);
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) C[i * N + j] += B[j];
      }
      auto* o = out.data_as<uint16_t>();
      int64_t total = M * N;
#pragma omp parallel for if (total > 65536)
      for (int64_t i = 0; i < total; ++i) o[i] = bf ? float_to_bf16(C[i]) : float_to_half(C[i]);
      return out;
    }
    default:
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          double s = 0;
          for (int64_t q = 0; q < K; ++q) s += a.get(i * K + q) * w.get(j * K + q);
          out.set(i * N + j, s);
        }
      break;
  }
  if (bias) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) out.set(i * N + j, out.get(i * N + j) + bias->get(j));
  }
  return out;
}

}  // namespace tracer::rt
