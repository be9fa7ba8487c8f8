// Attention on the CPU, one block of 64 query rows at a time (the fused form of
// softmax(q k^T * scale) v): a block's scores exist only as that block, so memory is O(64 * S)
// per thread instead of the O(L * S) of the decomposed form, and the products are BLAS gemms.
// The backward recomputes each block's probabilities from the saved log-sum-exp, as flash
// attention does, and sums the key gradients over the blocks of a head in order (deterministic
// for any thread count).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <cblas.h>

#include "runtime/kernel_util.h"
#include "runtime/kernels.h"

namespace tracer::rt {
namespace {

using namespace detail;

struct Dims {
  int64_t batch = 1, L = 0, S = 0, E = 0, Ev = 0;
};

Dims attention_dims(const Tensor& q, const Tensor& k, const Tensor& v, const char* who) {
  require_defined(q, who);
  require_defined(k, who);
  require_defined(v, who);
  const Shape &qs = q.shape(), &ks = k.shape(), &vs = v.shape();
  if (qs.size() < 2 || ks.size() != qs.size() || vs.size() != qs.size())
    throw std::invalid_argument(std::string(who) + ": query, key and value need the same rank (2 or more), got " +
                                shape_str(qs) + ", " + shape_str(ks) + ", " + shape_str(vs));
  if (!std::equal(qs.begin(), qs.end() - 2, ks.begin()) || !std::equal(qs.begin(), qs.end() - 2, vs.begin()))
    throw std::invalid_argument(std::string(who) + ": query, key and value need the same batch dimensions, got " +
                                shape_str(qs) + ", " + shape_str(ks) + ", " + shape_str(vs));
  Dims d;
  for (size_t i = 0; i + 2 < qs.size(); ++i) d.batch *= qs[i];
  d.L = qs[qs.size() - 2];
  d.E = qs.back();
  d.S = ks[ks.size() - 2];
  d.Ev = vs.back();
  if (ks.back() != d.E || vs[vs.size() - 2] != d.S)
    throw std::invalid_argument(std::string(who) + ": key must be [..., S, E] and value [..., S, Ev] for query [..., L, E], got " +
                                shape_str(qs) + ", " + shape_str(ks) + ", " + shape_str(vs));
  if (q.dtype() != k.dtype() || q.dtype() != v.dtype() || !is_float(q.dtype()))
    throw std::invalid_argument(std::string(who) + ": query, key and value need one floating-point dtype");
  return d;
}

constexpr int64_t kBlock = 64;  // query rows per block

// C[M, N] (row stride ldc) = alpha * op(A) op(B) + beta * C, row-major; op(A) is [M, K] (stored
// [K, M] when ta), op(B) is [K, N] (stored [N, K] when tb).
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
          int64_t ldb, float beta, float* C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(M),
              static_cast<int>(N), static_cast<int>(K), alpha, A, static_cast<int>(lda), B, static_cast<int>(ldb), beta, C,
              static_cast<int>(ldc));
}
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda, const double* B,
          int64_t ldb, double beta, double* C, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(M),
              static_cast<int>(N), static_cast<int>(K), alpha, A, static_cast<int>(lda), B, static_cast<int>(ldb), beta, C,
              static_cast<int>(ldc));
}

// n values of p in the math type A: p itself when it is stored as A, else converted into buf.
template <class A, class T>
const A* as_math(const T* p, int64_t n, std::vector<A>& buf) {
  if constexpr (std::is_same_v<A, T>) {
    return p;
  } else {
    buf.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) buf[static_cast<size_t>(i)] = convert<A>(p[i]);
    return buf.data();
  }
}

// The mask's elements as the math type A, read through its broadcast to [batch..., L, S]: 0 or
// -inf for a b8 mask (kept where true), the value for a floating-point one.
template <class A>
struct MaskView {
  std::vector<A> values;               // the mask itself, converted
  std::vector<int64_t> batch_offset;   // per flattened batch index
  int64_t sL = 0, sS = 0;              // strides of the query and key dimensions (0: broadcast)
  bool on = false;
  A at(int64_t b, int64_t i, int64_t j) const { return values[static_cast<size_t>(batch_offset[static_cast<size_t>(b)] + i * sL + j * sS)]; }
};

template <class A>
MaskView<A> mask_view(const Tensor* mask, const Shape& qshape, const Dims& d, const char* who) {
  MaskView<A> m;
  if (!mask) return m;
  require_defined(*mask, who);
  const Shape& ms = mask->shape();
  Shape full(qshape.begin(), qshape.end() - 1);
  full.push_back(d.S);  // [batch..., L, S]
  if (ms.size() > full.size())
    throw std::invalid_argument(std::string(who) + ": the mask " + shape_str(ms) + " has more dimensions than the scores " + shape_str(full));
  const size_t off = full.size() - ms.size();
  std::vector<int64_t> stride(full.size(), 0);
  int64_t st = 1;
  for (size_t i = ms.size(); i-- > 0;) {
    if (ms[i] != 1 && ms[i] != full[off + i])
      throw std::invalid_argument(std::string(who) + ": the mask " + shape_str(ms) + " does not broadcast to the scores " + shape_str(full));
    stride[off + i] = ms[i] == 1 ? 0 : st;
    st *= ms[i];
  }
  if (mask->dtype() != DType::b8 && !is_float(mask->dtype()))
    throw std::invalid_argument(std::string(who) + ": the mask must be b8 or floating-point, got " + dtype_name(mask->dtype()));
  m.values.resize(static_cast<size_t>(mask->numel()));
  dispatch(mask->dtype(), [&](auto tag) {
    using M = typename decltype(tag)::type;
    const M* src = mask->data_as<const M>();
    for (size_t i = 0; i < m.values.size(); ++i) {
      if constexpr (std::is_same_v<M, B8>) m.values[i] = src[i].v ? A(0) : -std::numeric_limits<A>::infinity();
      else if constexpr (std::is_floating_point_v<M> || std::is_same_v<M, Half> || std::is_same_v<M, BF16>) m.values[i] = convert<A>(src[i]);
    }
  });
  m.sL = stride[full.size() - 2];
  m.sS = stride[full.size() - 1];
  m.batch_offset.assign(static_cast<size_t>(d.batch), 0);
  for (int64_t b = 0; b < d.batch; ++b) {
    int64_t rest = b, o = 0;
    for (size_t i = full.size() - 2; i-- > 0;) {
      o += (rest % full[i]) * stride[i];
      rest /= full[i];
    }
    m.batch_offset[static_cast<size_t>(b)] = o;
  }
  m.on = true;
  return m;
}

}  // namespace

std::vector<Tensor> attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale, Allocator* al,
                              const Tensor* mask) {
  Dims d = attention_dims(q, k, v, "attention");
  Shape os = q.shape();
  os.back() = d.Ev;
  Shape ls(q.shape().begin(), q.shape().end() - 1);
  DType lse_dtype = q.dtype() == DType::f64 ? DType::f64 : DType::f32;
  Tensor out = Tensor::empty(q.dtype(), os, al), lse = Tensor::empty(lse_dtype, ls, al);
  dispatch(q.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BF16>) {
      using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
      const T* Q = q.data_as<const T>();
      T* O = out.data_as<T>();
      A* LSE = lse.data_as<A>();
      std::vector<A> kbuf, vbuf;  // keys and values in the math type (16-bit inputs only)
      const A* K = as_math<A>(k.data_as<const T>(), k.numel(), kbuf);
      const A* V = as_math<A>(v.data_as<const T>(), v.numel(), vbuf);
      const MaskView<A> mv = mask_view<A>(mask, q.shape(), d, "attention");
      const int64_t blocks = (d.L + kBlock - 1) / kBlock;
#pragma omp parallel
      {
        std::vector<A> qbuf, sc(static_cast<size_t>(kBlock * d.S)), acc(static_cast<size_t>(kBlock * d.Ev)), inv(kBlock);
#pragma omp for schedule(dynamic)
        for (int64_t task = 0; task < d.batch * blocks; ++task) {
          const int64_t b = task / blocks, i0 = (task % blocks) * kBlock, bq = std::min(kBlock, d.L - i0);
          const A* qb = as_math<A>(Q + (b * d.L + i0) * d.E, bq * d.E, qbuf);
          // Keys past the block's last query are masked for all its rows when causal.
          const int64_t ncol = causal ? std::min(d.S, i0 + bq) : d.S;
          if (ncol > 0 && d.E > 0)
            gemm(false, true, bq, ncol, d.E, static_cast<A>(scale), qb, d.E, K + b * d.S * d.E, d.E, A(0), sc.data(), ncol);
          else
            std::fill(sc.begin(), sc.end(), A(0));
          for (int64_t r = 0; r < bq; ++r) {
            A* row = sc.data() + r * ncol;
            const int64_t n = causal ? std::min(d.S, i0 + r + 1) : d.S;  // keys j <= i (top-left aligned)
            A m = -std::numeric_limits<A>::infinity(), l = 0;
            if (mv.on)
              for (int64_t j = 0; j < n; ++j) row[j] += mv.at(b, i0 + r, j);
            for (int64_t j = 0; j < n; ++j) m = std::max(m, row[j]);
            for (int64_t j = 0; j < n; ++j) {
              row[j] = std::exp(row[j] - m);
              l += row[j];
            }
            for (int64_t j = n; j < ncol; ++j) row[j] = 0;
            inv[static_cast<size_t>(r)] = l > 0 ? A(1) / l : A(0);
            // (Every key masked: m = -inf, and NaN follows, as softmax over -inf gives.)
            LSE[b * d.L + i0 + r] = n > 0 ? m + std::log(l) : -std::numeric_limits<A>::infinity();
          }
          if (ncol > 0 && d.Ev > 0)
            gemm(false, false, bq, d.Ev, ncol, A(1), sc.data(), ncol, V + b * d.S * d.Ev, d.Ev, A(0), acc.data(), d.Ev);
          else
            std::fill(acc.begin(), acc.end(), A(0));
          for (int64_t r = 0; r < bq; ++r)
            for (int64_t e = 0; e < d.Ev; ++e)
              O[(b * d.L + i0 + r) * d.Ev + e] = convert<T>(acc[static_cast<size_t>(r * d.Ev + e)] * inv[static_cast<size_t>(r)]);
        }
      }
    }
  });
  return {out, lse};
}

std::vector<Tensor> attention_backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                                       const Tensor& lse, bool causal, double scale, Allocator* al, const Tensor* mask) {
  Dims d = attention_dims(q, k, v, "attention_backward");
  require_defined(g, "attention_backward");
  require_defined(o, "attention_backward");
  require_defined(lse, "attention_backward");
  if (g.shape() != o.shape() || g.dtype() != q.dtype() || o.dtype() != q.dtype() || o.shape().back() != d.Ev ||
      lse.numel() != d.batch * d.L)
    throw std::invalid_argument("attention_backward: grad and out must be " + shape_str(o.shape()) +
                                " of the query's dtype and lse hold one value per query row");
  Tensor dq = Tensor::empty(q.dtype(), q.shape(), al), dk = Tensor::empty(k.dtype(), k.shape(), al),
         dv = Tensor::empty(v.dtype(), v.shape(), al);
  dispatch(q.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BF16>) {
      using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
      const T *Q = q.data_as<const T>(), *G = g.data_as<const T>(), *Op = o.data_as<const T>();
      T *DQ = dq.data_as<T>(), *DK = dk.data_as<T>(), *DV = dv.data_as<T>();
      std::vector<A> lse_a(static_cast<size_t>(d.batch * d.L)), kbuf, vbuf;
      dispatch(lse.dtype(), [&](auto ltag) {
        using LT = typename decltype(ltag)::type;
        const LT* src = lse.data_as<const LT>();
        for (size_t i = 0; i < lse_a.size(); ++i) lse_a[i] = convert<A>(src[i]);
      });
      const A* K = as_math<A>(k.data_as<const T>(), k.numel(), kbuf);
      const A* V = as_math<A>(v.data_as<const T>(), v.numel(), vbuf);
      const A sc = static_cast<A>(scale);
      const MaskView<A> mv = mask_view<A>(mask, q.shape(), d, "attention_backward");
      // One head per task: its key gradients sum over its query blocks in order.
#pragma omp parallel
      {
        std::vector<A> qbuf, gbuf, obuf, p(static_cast<size_t>(kBlock * d.S)), ds(static_cast<size_t>(kBlock * d.S)),
            dqb(static_cast<size_t>(kBlock * d.E)), dka(static_cast<size_t>(d.S * d.E)), dva(static_cast<size_t>(d.S * d.Ev));
#pragma omp for schedule(dynamic)
        for (int64_t b = 0; b < d.batch; ++b) {
          const A *Kb = K + b * d.S * d.E, *Vb = V + b * d.S * d.Ev;
          std::fill(dka.begin(), dka.end(), A(0));
          std::fill(dva.begin(), dva.end(), A(0));
          for (int64_t i0 = 0; i0 < d.L; i0 += kBlock) {
            const int64_t bq = std::min(kBlock, d.L - i0), row0 = b * d.L + i0;
            const A* qb = as_math<A>(Q + row0 * d.E, bq * d.E, qbuf);
            const A* gb = as_math<A>(G + row0 * d.Ev, bq * d.Ev, gbuf);
            const A* ob = as_math<A>(Op + row0 * d.Ev, bq * d.Ev, obuf);
            const int64_t ncol = causal ? std::min(d.S, i0 + bq) : d.S;
            if (ncol == 0 || d.E == 0 || d.Ev == 0) {
              for (int64_t x = 0; x < bq * d.E; ++x) DQ[row0 * d.E + x] = convert<T>(A(0));
              continue;
            }
            gemm(false, true, bq, ncol, d.E, sc, qb, d.E, Kb, d.E, A(0), p.data(), ncol);   // scaled scores
            gemm(false, true, bq, ncol, d.Ev, A(1), gb, d.Ev, Vb, d.Ev, A(0), ds.data(), ncol);  // dP = g v^T
            for (int64_t r = 0; r < bq; ++r) {
              const int64_t n = causal ? std::min(d.S, i0 + r + 1) : d.S;
              A delta = 0;  // sum_e g * o: the softmax backward's row term
              for (int64_t e = 0; e < d.Ev; ++e) delta += gb[r * d.Ev + e] * ob[r * d.Ev + e];
              A *pr = p.data() + r * ncol, *dr = ds.data() + r * ncol;
              const A l = lse_a[static_cast<size_t>(row0 + r)];
              for (int64_t j = 0; j < n; ++j) {
                pr[j] = std::exp((mv.on ? pr[j] + mv.at(b, i0 + r, j) : pr[j]) - l);
                dr[j] = pr[j] * (dr[j] - delta);
              }
              for (int64_t j = n; j < ncol; ++j) pr[j] = dr[j] = 0;
            }
            gemm(false, false, bq, d.E, ncol, sc, ds.data(), ncol, Kb, d.E, A(0), dqb.data(), d.E);   // dq = dS k * scale
            gemm(true, false, ncol, d.E, bq, A(1), ds.data(), ncol, qb, d.E, A(1), dka.data(), d.E);   // dk += dS^T q
            gemm(true, false, ncol, d.Ev, bq, A(1), p.data(), ncol, gb, d.Ev, A(1), dva.data(), d.Ev);  // dv += P^T g
            for (int64_t x = 0; x < bq * d.E; ++x) DQ[row0 * d.E + x] = convert<T>(dqb[static_cast<size_t>(x)]);
          }
          for (int64_t x = 0; x < d.S * d.E; ++x) DK[b * d.S * d.E + x] = convert<T>(dka[static_cast<size_t>(x)] * sc);
          for (int64_t x = 0; x < d.S * d.Ev; ++x) DV[b * d.S * d.Ev + x] = convert<T>(dva[static_cast<size_t>(x)]);
        }
      }
    }
  });
  return {dq, dk, dv};
}

}  // namespace tracer::rt
