// Sorting along a dimension (prims.sort; Thunder's topk is its first k): a stable sort of each
// line, values and their positions. NaN sorts above every number, so it comes last ascending and
// first descending, as in PyTorch; equal values keep their order in both directions.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "runtime/kernel_util.h"
#include "runtime/kernels.h"

namespace tracer::rt {
using namespace detail;

namespace {

// Whether key x sorts before y ascending (NaN the largest; -0.0 and 0.0 equal, as PyTorch).
template <class K>
bool before(K x, K y) {
  if constexpr (std::is_floating_point_v<K>) {
    if (std::isnan(x)) return false;
    if (std::isnan(y)) return true;
  }
  return x < y;
}

}  // namespace

std::vector<Tensor> sort(const Tensor& a, int64_t dim, bool descending, Allocator* al) {
  require_defined(a, "sort");
  const Shape& shape = a.shape();
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (rank > 0 && (dim < 0 || dim >= rank))
    throw std::invalid_argument("sort: dimension " + std::to_string(dim) + " out of range for " + shape_str(shape));
  Tensor values = Tensor::empty(a.dtype(), shape, al);
  Tensor indices = Tensor::empty(DType::i64, shape, al);
  int64_t outer = 1, n = rank ? shape[static_cast<size_t>(dim)] : 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < dim) outer *= shape[static_cast<size_t>(d)];
    if (d > dim) inner *= shape[static_cast<size_t>(d)];
  }
  const int64_t lines = outer * inner;
  dispatch(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using K = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BF16> || std::is_floating_point_v<T>, double, int64_t>;
    const T* src = a.data_as<const T>();
    T* dst = values.data_as<T>();
    int64_t* pos = indices.data_as<int64_t>();
#pragma omp parallel for schedule(static) if (lines * n > 65536)
    for (int64_t line = 0; line < lines; ++line) {
      const int64_t base = (line / inner) * n * inner + line % inner;
      std::vector<K> key(static_cast<size_t>(n));
      std::vector<int64_t> order(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) key[static_cast<size_t>(j)] = convert<K>(src[base + j * inner]);
      std::iota(order.begin(), order.end(), int64_t{0});
      if (descending)
        std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return before(key[static_cast<size_t>(y)], key[static_cast<size_t>(x)]); });
      else
        std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return before(key[static_cast<size_t>(x)], key[static_cast<size_t>(y)]); });
      for (int64_t j = 0; j < n; ++j) {
        dst[base + j * inner] = src[base + order[static_cast<size_t>(j)] * inner];
        pos[base + j * inner] = order[static_cast<size_t>(j)];
      }
    }
  });
  return {values, indices};
}

}  // namespace tracer::rt
