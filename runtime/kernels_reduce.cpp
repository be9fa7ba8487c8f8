// Reductions (sum, prod, amax, amin) over a set of dims. Each output element reduces a strided
// sub-block of the input, accumulating in double for floats and int64 for integers and bools.
#include <algorithm>

#include "runtime/kernel_util.h"
#include "runtime/kernels.h"

namespace tracer::rt {
using namespace detail;

namespace {
struct Plan {
  Shape kept, kept_shape_out;  // kept dims of the input; the output shape (keepdim applied)
  std::vector<int64_t> kept_strides;
  Shape red;                   // reduced dims, outermost first
  std::vector<int64_t> red_strides;
  int64_t red_count = 1;
};

Plan make_plan(const Shape& in, const std::vector<int64_t>& dims, bool keepdim) {
  Plan p;
  std::vector<int64_t> st = contiguous_strides(in);
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= static_cast<int64_t>(in.size()) || (i > 0 && dims[i] <= dims[i - 1]))
      throw std::invalid_argument("reduce: dims " + shape_str(dims) +
                                  " must be sorted, unique and valid for " + shape_str(in));
  }
  for (size_t d = 0; d < in.size(); ++d) {
    bool reduced = std::binary_search(dims.begin(), dims.end(), static_cast<int64_t>(d));
    if (reduced) {
      p.red.push_back(in[d]);
      p.red_strides.push_back(st[d]);
      p.red_count *= in[d];
      if (keepdim) p.kept_shape_out.push_back(1);
    } else {
      p.kept.push_back(in[d]);
      p.kept_strides.push_back(st[d]);
      p.kept_shape_out.push_back(in[d]);
    }
  }
  return p;
}

template <class A>
struct Acc {
  ReduceOp op;
  A init() const {
    switch (op) {
      case ReduceOp::sum: return A(0);
      case ReduceOp::prod: return A(1);
      // Floats start at infinities so that all -inf inputs still reduce to -inf.
      case ReduceOp::amax:
        return std::is_floating_point_v<A> ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::lowest();
      case ReduceOp::amin:
        return std::is_floating_point_v<A> ? std::numeric_limits<A>::infinity() : std::numeric_limits<A>::max();
    }
    return A(0);
  }
  A step(A acc, A v) const {
    if constexpr (std::is_floating_point_v<A>) {
      switch (op) {
        case ReduceOp::sum: return acc + v;
        case ReduceOp::prod: return acc * v;
        // NaN propagates: once acc is NaN it stays, and a NaN v replaces acc.
        case ReduceOp::amax: return (std::isnan(acc) || acc >= v) ? acc : v;
        case ReduceOp::amin: return (std::isnan(acc) || acc <= v) ? acc : v;
      }
    } else {
      // Integer sums and products wrap like PyTorch's instead of overflowing (UB).
      using U = std::make_unsigned_t<A>;
      switch (op) {
        case ReduceOp::sum: return static_cast<A>(static_cast<U>(acc) + static_cast<U>(v));
        case ReduceOp::prod: return static_cast<A>(static_cast<U>(acc) * static_cast<U>(v));
        case ReduceOp::amax: return std::max(acc, v);
        case ReduceOp::amin: return std::min(acc, v);
      }
    }
    return acc;
  }
};

// Offset of reduced element r (row-major over the reduced dims) from an output's base.
inline int64_t red_offset(const Plan& p, int64_t r) {
  int64_t off = 0;
  for (size_t k = p.red.size(); k-- > 0;) {
    off += (r % p.red[k]) * p.red_strides[k];
    r /= p.red[k];
  }
  return off;
}

// When the innermost input dim is kept, reduce whole contiguous rows into a row of accumulators
// (same per-output order as run_reduce, so results are identical, but cache-friendly).
template <class A, class S, class O>
void run_reduce_rows(ReduceOp op, const Plan& p, const S* in, O* out, int64_t n_out) {
  Acc<A> acc_op{op};
  constexpr int64_t kChunk = 512;
  int64_t width = p.kept.back(), groups = n_out / width;
  int64_t chunks = (width + kChunk - 1) / kChunk;
  size_t nk = p.kept.size() - 1;
#pragma omp parallel for schedule(static) if (n_out * p.red_count > 32768 && groups * chunks > 1)
  for (int64_t t = 0; t < groups * chunks; ++t) {
    int64_t g = t / chunks, c0 = (t % chunks) * kChunk, c1 = std::min(width, c0 + kChunk);
    int64_t base = c0, rem = g;
    for (size_t k = nk; k-- > 0;) {
      base += (rem % p.kept[k]) * p.kept_strides[k];
      rem /= p.kept[k];
    }
    A acc[kChunk];
    std::fill_n(acc, c1 - c0, acc_op.init());
    for (int64_t r = 0; r < p.red_count; ++r) {
      const S* row = in + base + red_offset(p, r);
      for (int64_t w = 0; w < c1 - c0; ++w) acc[w] = acc_op.step(acc[w], convert<A>(row[w]));
    }
    for (int64_t w = 0; w < c1 - c0; ++w) out[g * width + c0 + w] = convert<O>(acc[w]);
  }
}

template <class A, class S, class O>
void run_reduce(ReduceOp op, const Plan& p, const S* in, O* out, int64_t n_out) {
  Acc<A> acc_op{op};
  int64_t inner = p.red.empty() ? 1 : p.red.back();
  int64_t istride = p.red.empty() ? 1 : p.red_strides.back();
  int64_t outer_red = p.red_count / std::max<int64_t>(inner, 1);
  size_t nk = p.kept.size(), nr = p.red.empty() ? 0 : p.red.size() - 1;
#pragma omp parallel for schedule(static) if (n_out * p.red_count > 32768 && n_out > 1)
  for (int64_t o = 0; o < n_out; ++o) {
    int64_t base = 0, rem = o;
    for (size_t k = nk; k-- > 0;) {
      base += (rem % p.kept[k]) * p.kept_strides[k];
      rem /= p.kept[k];
    }
    A acc = acc_op.init();
    for (int64_t r = 0; r < outer_red; ++r) {
      int64_t off = base, rr = r;
      for (size_t k = nr; k-- > 0;) {
        off += (rr % p.red[k]) * p.red_strides[k];
        rr /= p.red[k];
      }
      const S* row = in + off;
      for (int64_t i = 0; i < inner; ++i) acc = acc_op.step(acc, convert<A>(row[i * istride]));
    }
    out[o] = convert<O>(acc);
  }
}
}  // namespace

Tensor reduce(ReduceOp op, const Tensor& a, const std::vector<int64_t>& dims, bool keepdim,
              DType out_dtype, Allocator* al) {
  require_defined(a, "reduce");
  Plan p = make_plan(a.shape(), dims, keepdim);
  if ((op == ReduceOp::amax || op == ReduceOp::amin) && p.red_count == 0)
    throw std::invalid_argument(std::string("reduce: ") + (op == ReduceOp::amax ? "amax" : "amin") +
                                " of an empty reduction over dims " + shape_str(dims) + " of " +
                                shape_str(a.shape()));
  Tensor out = Tensor::empty(out_dtype, p.kept_shape_out, al);
  Math m = is_float(a.dtype()) ? Math::f64 : Math::i64;
  dispatch(a.dtype(), [&](auto in_tag) {
    using S = typename decltype(in_tag)::type;
    dispatch(out_dtype, [&](auto out_tag) {
      using O = typename decltype(out_tag)::type;
      dispatch_math(m, [&](auto acc_tag) {
        using A = typename decltype(acc_tag)::type;
        if constexpr (!std::is_same_v<A, float>) {
          bool rows = !p.kept.empty() && p.kept_strides.back() == 1 && out.numel() > 0;
          if (rows) run_reduce_rows<A>(op, p, a.data_as<const S>(), out.data_as<O>(), out.numel());
          else run_reduce<A>(op, p, a.data_as<const S>(), out.data_as<O>(), out.numel());
        }
      });
    });
  });
  return out;
}

}  // namespace tracer::rt
