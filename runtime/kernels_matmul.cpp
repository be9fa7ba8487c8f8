// Matrix multiplication with NumPy matmul semantics (1-D operands, broadcast batch dims).
// Floats go through BLAS (f16/bf16 via f32 copies); integers use a plain loop that wraps.
#include <cblas.h>

#include <algorithm>

#include "runtime/kernel_util.h"
#include "runtime/kernels.h"

namespace tracer::rt {
using namespace detail;

namespace {
struct MatmulPlan {
  int64_t M = 0, K = 0, N = 0;
  bool ta = false, tb = false;  // a is stored as [..., K, M], b as [..., N, K]
  Shape out_shape;
  std::vector<int64_t> a_batch, b_batch;  // matrix index in a and b for each output batch
};

[[noreturn]] void fail(const Tensor& a, const Tensor& b, const std::string& why) {
  throw std::invalid_argument("matmul: shapes " + shape_str(a.shape()) + " and " +
                              shape_str(b.shape()) + " are incompatible (" + why + ")");
}

// For each output batch index, the index of the matrix in an operand with batch dims `own`.
std::vector<int64_t> batch_indices(const Shape& own, const Shape& batch) {
  std::vector<int64_t> own_st = contiguous_strides(own);
  size_t lead = batch.size() - own.size();
  int64_t n = numel(batch);
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, idx = 0;
    for (size_t d = batch.size(); d-- > 0;) {
      int64_t c = rem % batch[d];
      rem /= batch[d];
      if (d >= lead && own[d - lead] != 1) idx += c * own_st[d - lead];
    }
    out[static_cast<size_t>(i)] = idx;
  }
  return out;
}

Shape logical_shape(const Tensor& t, bool transposed) {
  Shape s = t.shape();
  if (transposed) std::swap(s[s.size() - 1], s[s.size() - 2]);
  return s;
}

MatmulPlan make_plan(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  if (a.dim() == 0 || b.dim() == 0) fail(a, b, "0-d operand");
  if ((ta && a.dim() < 2) || (tb && b.dim() < 2)) fail(a, b, "a transposed operand needs 2 dimensions");
  Shape as = logical_shape(a, ta), bs = logical_shape(b, tb);
  bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);
  if (b_vec) bs.push_back(1);
  MatmulPlan p;
  p.ta = ta;
  p.tb = tb;
  p.M = as[as.size() - 2];
  p.K = as.back();
  p.N = bs.back();
  int64_t kb = bs[bs.size() - 2];
  if (p.K != kb) fail(a, b, std::to_string(p.K) + " != " + std::to_string(kb));
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  std::optional<Shape> batch = broadcast_shapes(ab, bb);
  if (!batch) fail(a, b, "batch dims " + shape_str(ab) + " and " + shape_str(bb) + " cannot be broadcast");
  p.a_batch = batch_indices(ab, *batch);
  p.b_batch = batch_indices(bb, *batch);
  p.out_shape = *batch;
  if (!a_vec) p.out_shape.push_back(p.M);
  if (!b_vec) p.out_shape.push_back(p.N);
  return p;
}

// C[M, N] = op(A) op(B); a transposed A is stored [K, M], a transposed B [N, K] (row-major).
void gemm(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K, bool ta, bool tb) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(M),
              static_cast<int>(N), static_cast<int>(K), 1.0f, A, static_cast<int>(ta ? M : K), B,
              static_cast<int>(tb ? K : N), 0.0f, C, static_cast<int>(N));
}
void gemm(const double* A, const double* B, double* C, int64_t M, int64_t N, int64_t K, bool ta, bool tb) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(M),
              static_cast<int>(N), static_cast<int>(K), 1.0, A, static_cast<int>(ta ? M : K), B,
              static_cast<int>(tb ? K : N), 0.0, C, static_cast<int>(N));
}

template <class F>
void blas_matmul(const MatmulPlan& p, const F* A, const F* B, F* C) {
  int64_t nb = static_cast<int64_t>(p.a_batch.size());
  int64_t out_n = nb * p.M * p.N;
  if (out_n == 0) return;
  if (p.K == 0) {
    std::fill_n(C, out_n, F(0));
    return;
  }
  // When b is shared by every batch and a's batches are in order, stack them into one tall gemm.
  bool stack = !p.ta;
  for (int64_t i = 0; i < nb && stack; ++i) stack = p.b_batch[i] == 0 && p.a_batch[i] == i;
  if (stack) {
    gemm(A, B, C, nb * p.M, p.N, p.K, false, p.tb);
    return;
  }
  for (int64_t i = 0; i < nb; ++i)
    gemm(A + p.a_batch[i] * p.M * p.K, B + p.b_batch[i] * p.K * p.N, C + i * p.M * p.N, p.M, p.N, p.K, p.ta,
         p.tb);
}

template <class T>
void int_matmul(const MatmulPlan& p, const T* A, const T* B, T* C) {
  int64_t nb = static_cast<int64_t>(p.a_batch.size());
  int64_t rows = nb * p.M;
#pragma omp parallel for schedule(static) if (rows * p.N * p.K > 32768)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t bi = r / p.M, i = r % p.M;
    const T* a = A + (p.a_batch[bi] * p.M + i) * p.K;
    const T* b = B + p.b_batch[bi] * p.K * p.N;
    // Unsigned accumulation wraps on overflow instead of being undefined.
    std::vector<uint64_t> acc(static_cast<size_t>(p.N), 0);
    const T* a_t = A + p.a_batch[bi] * p.M * p.K + i;  // column i of a stored [K, M]
    for (int64_t k = 0; k < p.K; ++k) {
      uint64_t aik = static_cast<uint64_t>(static_cast<int64_t>(p.ta ? a_t[k * p.M] : a[k]));
      for (int64_t j = 0; j < p.N; ++j) {
        T bkj = p.tb ? b[j * p.K + k] : b[k * p.N + j];
        acc[j] += aik * static_cast<uint64_t>(static_cast<int64_t>(bkj));
      }
    }
    for (int64_t j = 0; j < p.N; ++j) C[r * p.N + j] = static_cast<T>(static_cast<int64_t>(acc[j]));
  }
}

template <class H>
std::vector<float> to_f32(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  const H* p = t.data_as<const H>();
  for (size_t i = 0; i < v.size(); ++i) v[i] = convert<float>(p[i]);
  return v;
}
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, Allocator* al, bool transpose_a, bool transpose_b) {
  require_defined(a, "matmul");
  require_defined(b, "matmul");
  if (a.dtype() != b.dtype())
    throw std::invalid_argument(std::string("matmul: dtypes ") + dtype_name(a.dtype()) + " and " +
                                dtype_name(b.dtype()) + " differ");
  if (a.dtype() == DType::b8) throw std::invalid_argument("matmul: b8 operands are not supported");
  MatmulPlan p = make_plan(a, b, transpose_a, transpose_b);
  const int64_t limit = std::numeric_limits<int>::max();
  if (std::max({p.M, p.N, p.K, int64_t(p.a_batch.size()) * p.M}) > limit)
    throw std::invalid_argument("matmul: dimensions too large for BLAS");
  Tensor out = Tensor::empty(a.dtype(), p.out_shape, al);
  dispatch(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      blas_matmul<T>(p, a.data_as<const T>(), b.data_as<const T>(), out.data_as<T>());
    } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BF16>) {
      std::vector<float> fa = to_f32<T>(a), fb = to_f32<T>(b);
      std::vector<float> fc(static_cast<size_t>(out.numel()));
      blas_matmul<float>(p, fa.data(), fb.data(), fc.data());
      T* o = out.data_as<T>();
      for (size_t i = 0; i < fc.size(); ++i) o[i] = convert<T>(fc[i]);
    } else if constexpr (std::is_integral_v<T>) {
      int_matmul<T>(p, a.data_as<const T>(), b.data_as<const T>(), out.data_as<T>());
    }
  });
  return out;
}

}  // namespace tracer::rt
