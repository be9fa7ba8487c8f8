// Attention on the CPU, one query row at a time (the fused form of softmax(q k^T * scale) v):
// the scores of a row exist only as one row, so memory is O(S) per thread instead of the
// O(L * S) of the decomposed form. The backward recomputes each row's probabilities from the
// saved log-sum-exp, as flash attention does.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

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

}  // namespace

std::vector<Tensor> attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale, Allocator* al) {
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
      const T *Q = q.data_as<const T>(), *Kp = k.data_as<const T>(), *V = v.data_as<const T>();
      T* O = out.data_as<T>();
      A* LSE = lse.data_as<A>();
      const int64_t rows = d.batch * d.L;
#pragma omp parallel
      {
        std::vector<A> p(static_cast<size_t>(d.S)), acc(static_cast<size_t>(d.Ev));
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
          int64_t b = r / d.L, i = r % d.L;
          const T* qi = Q + r * d.E;
          const T* kb = Kp + b * d.S * d.E;
          const T* vb = V + b * d.S * d.Ev;
          int64_t n = causal ? std::min<int64_t>(d.S, i + 1) : d.S;  // keys j <= i (top-left aligned)
          A m = -std::numeric_limits<A>::infinity();
          for (int64_t j = 0; j < n; ++j) {
            A s = 0;
            for (int64_t e = 0; e < d.E; ++e) s += convert<A>(qi[e]) * convert<A>(kb[j * d.E + e]);
            p[j] = s * static_cast<A>(scale);
            m = std::max(m, p[j]);
          }
          A l = 0;
          std::fill(acc.begin(), acc.end(), A(0));
          for (int64_t j = 0; j < n; ++j) {
            A w = std::exp(p[j] - m);
            l += w;
            for (int64_t e = 0; e < d.Ev; ++e) acc[e] += w * convert<A>(vb[j * d.Ev + e]);
          }
          A inv = l > 0 ? A(1) / l : A(0);
          for (int64_t e = 0; e < d.Ev; ++e) O[r * d.Ev + e] = convert<T>(acc[e] * inv);
          LSE[r] = n > 0 ? m + std::log(l) : -std::numeric_limits<A>::infinity();
        }
      }
    }
  });
  return {out, lse};
}

std::vector<Tensor> attention_backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                                       const Tensor& lse, bool causal, double scale, Allocator* al) {
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
      const T *Q = q.data_as<const T>(), *Kp = k.data_as<const T>(), *V = v.data_as<const T>(), *G = g.data_as<const T>(),
              *O = o.data_as<const T>();
      T *DQ = dq.data_as<T>(), *DK = dk.data_as<T>(), *DV = dv.data_as<T>();
      std::vector<A> lse_a(static_cast<size_t>(d.batch * d.L));
      dispatch(lse.dtype(), [&](auto ltag) {
        using LT = typename decltype(ltag)::type;
        const LT* src = lse.data_as<const LT>();
        for (size_t i = 0; i < lse_a.size(); ++i) lse_a[i] = convert<A>(src[i]);
      });
      const A sc = static_cast<A>(scale);
      // Each batch (head) is independent; within one, the key gradients sum over query rows in
      // order, so results do not depend on the thread count.
#pragma omp parallel
      {
        std::vector<A> p(static_cast<size_t>(d.S)), ds(static_cast<size_t>(d.S)), dqi(static_cast<size_t>(d.E));
        std::vector<A> dka, dva;
#pragma omp for schedule(dynamic)
        for (int64_t b = 0; b < d.batch; ++b) {
          const T* kb = Kp + b * d.S * d.E;
          const T* vb = V + b * d.S * d.Ev;
          dka.assign(static_cast<size_t>(d.S * d.E), A(0));
          dva.assign(static_cast<size_t>(d.S * d.Ev), A(0));
          for (int64_t i = 0; i < d.L; ++i) {
            int64_t r = b * d.L + i;
            const T *qi = Q + r * d.E, *gi = G + r * d.Ev, *oi = O + r * d.Ev;
            int64_t n = causal ? std::min<int64_t>(d.S, i + 1) : d.S;
            A delta = 0;  // sum_e g * o: the softmax backward's row term
            for (int64_t e = 0; e < d.Ev; ++e) delta += convert<A>(gi[e]) * convert<A>(oi[e]);
            for (int64_t j = 0; j < n; ++j) {
              A s = 0;
              for (int64_t e = 0; e < d.E; ++e) s += convert<A>(qi[e]) * convert<A>(kb[j * d.E + e]);
              p[j] = std::exp(s * sc - lse_a[r]);
              A dp = 0;
              for (int64_t e = 0; e < d.Ev; ++e) dp += convert<A>(gi[e]) * convert<A>(vb[j * d.Ev + e]);
              ds[j] = p[j] * (dp - delta);
            }
            std::fill(dqi.begin(), dqi.end(), A(0));
            for (int64_t j = 0; j < n; ++j) {
              for (int64_t e = 0; e < d.Ev; ++e) dva[j * d.Ev + e] += p[j] * convert<A>(gi[e]);
              for (int64_t e = 0; e < d.E; ++e) {
                dqi[e] += ds[j] * convert<A>(kb[j * d.E + e]);
                dka[j * d.E + e] += ds[j] * convert<A>(qi[e]);
              }
            }
            for (int64_t e = 0; e < d.E; ++e) DQ[r * d.E + e] = convert<T>(dqi[e] * sc);
          }
          for (int64_t x = 0; x < d.S * d.E; ++x) DK[b * d.S * d.E + x] = convert<T>(dka[x] * sc);
          for (int64_t x = 0; x < d.S * d.Ev; ++x) DV[b * d.S * d.Ev + x] = convert<T>(dva[x]);
        }
      }
    }
  });
  return {dq, dk, dv};
}

}  // namespace tracer::rt
