// Shape and data-movement kernels: broadcast_in_dim, reshape, permute, slice, cat, take and its
// adjoint, plus the creation ops full and iota. Most reduce to one strided copy.
#include <algorithm>
#include <numeric>

#include "runtime/kernel_util.h"
#include "runtime/kernels.h"

namespace tracer::rt {
using namespace detail;

namespace detail {
namespace {
template <class T>
void copy_row(const char* src, int64_t stride, int64_t n, char* dst) {
  const T* s = reinterpret_cast<const T*>(src);
  T* d = reinterpret_cast<T*>(dst);
  for (int64_t k = 0; k < n; ++k) d[k] = s[k * stride];
}

// Source offset of the start of row r, where rows index all but the last `skip` dims.
int64_t row_offset(int64_t r, int64_t base, const Shape& shape, const std::vector<int64_t>& strides, size_t skip) {
  int64_t off = base;
  for (size_t k = shape.size() - skip; k-- > 0;) {
    off += (r % shape[k]) * strides[k];
    r /= shape[k];
  }
  return off;
}

void copy_rows(const char* s, size_t elem, int64_t base, const Shape& shape,
               const std::vector<int64_t>& strides, char* d) {
  int64_t inner = shape.back(), istride = strides.back();
  int64_t rows = numel(shape) / inner;
#pragma omp parallel for schedule(static) if (rows * inner > 32768 && rows > 1)
  for (int64_t r = 0; r < rows; ++r) {
    const char* from = s + row_offset(r, base, shape, strides, 1) * static_cast<int64_t>(elem);
    char* to = d + r * inner * static_cast<int64_t>(elem);
    if (istride == 1) {
      std::memcpy(to, from, static_cast<size_t>(inner) * elem);
      continue;
    }
    switch (elem) {
      case 1: copy_row<uint8_t>(from, istride, inner, to); break;
      case 2: copy_row<uint16_t>(from, istride, inner, to); break;
      case 4: copy_row<uint32_t>(from, istride, inner, to); break;
      default: copy_row<uint64_t>(from, istride, inner, to); break;
    }
  }
}

// Copies in 32x32 tiles over the last two dims so both reads and writes stay in cache.
template <class T>
void copy_tiled(const T* s, int64_t base, const Shape& shape, const std::vector<int64_t>& strides, T* d) {
  constexpr int64_t kTile = 32;
  size_t nd = shape.size();
  int64_t R = shape[nd - 2], C = shape[nd - 1], sr = strides[nd - 2], sc = strides[nd - 1];
  int64_t outer = numel(shape) / (R * C), row_tiles = (R + kTile - 1) / kTile;
#pragma omp parallel for schedule(static) if (outer * R * C > 32768)
  for (int64_t t = 0; t < outer * row_tiles; ++t) {
    int64_t o = t / row_tiles, i0 = (t % row_tiles) * kTile, i1 = std::min(R, i0 + kTile);
    const T* from = s + row_offset(o, base, shape, strides, 2);
    T* to = d + o * R * C;
    for (int64_t j0 = 0; j0 < C; j0 += kTile) {
      int64_t j1 = std::min(C, j0 + kTile);
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j) to[i * C + j] = from[i * sr + j * sc];
    }
  }
}
}  // namespace

void copy_strided(const void* src, size_t elem, int64_t base, const Shape& shape_in,
                  const std::vector<int64_t>& strides_in, void* dst) {
  if (numel(shape_in) == 0) return;
  // Drop unit dims and merge dims that are contiguous with each other, so a transpose of a
  // [A, B, C] tensor becomes at most a 2-D or 3-D walk with long inner rows.
  Shape shape;
  std::vector<int64_t> strides;
  for (size_t i = 0; i < shape_in.size(); ++i) {
    if (shape_in[i] == 1) continue;
    if (!shape.empty() && strides.back() == strides_in[i] * shape_in[i]) {
      shape.back() *= shape_in[i];
      strides.back() = strides_in[i];
    } else {
      shape.push_back(shape_in[i]);
      strides.push_back(strides_in[i]);
    }
  }
  if (shape.empty()) {
    shape.push_back(1);
    strides.push_back(1);
  }
  if (shape.size() >= 2 && strides.back() != 1 && strides[shape.size() - 2] == 1) {
    // A transpose: row-by-row copying would read one element per cache line.
    switch (elem) {
      case 1: copy_tiled(static_cast<const uint8_t*>(src), base, shape, strides, static_cast<uint8_t*>(dst)); break;
      case 2: copy_tiled(static_cast<const uint16_t*>(src), base, shape, strides, static_cast<uint16_t*>(dst)); break;
      case 4: copy_tiled(static_cast<const uint32_t*>(src), base, shape, strides, static_cast<uint32_t*>(dst)); break;
      default: copy_tiled(static_cast<const uint64_t*>(src), base, shape, strides, static_cast<uint64_t*>(dst)); break;
    }
    return;
  }
  copy_rows(static_cast<const char*>(src), elem, base, shape, strides, static_cast<char*>(dst));
}
}  // namespace detail

Tensor broadcast_in_dim(const Tensor& a, const Shape& shape, const std::vector<int64_t>& bdims,
                        Allocator* al) {
  require_defined(a, "broadcast_in_dim");
  auto fail = [&](const std::string& why) {
    return std::invalid_argument("broadcast_in_dim: cannot broadcast " + shape_str(a.shape()) +
                                 " to " + shape_str(shape) + ": " + why);
  };
  if (static_cast<int64_t>(bdims.size()) != a.dim()) throw fail("need one broadcast dim per operand dim");
  std::vector<int64_t> own = contiguous_strides(a.shape());
  std::vector<int64_t> strides(shape.size(), 0);
  for (size_t i = 0; i < bdims.size(); ++i) {
    int64_t b = bdims[i];
    if (b < 0 || b >= static_cast<int64_t>(shape.size())) throw fail("broadcast dim out of range");
    if (i > 0 && b <= bdims[i - 1]) throw fail("broadcast dims must be increasing");
    if (a.shape()[i] != 1 && a.shape()[i] != shape[b]) throw fail("operand dim " + std::to_string(i) + " mismatches");
    if (a.shape()[i] != 1) strides[b] = own[i];
  }
  Tensor out = Tensor::empty(a.dtype(), shape, al);
  copy_strided(a.data(), dtype_size(a.dtype()), 0, shape, strides, out.data());
  return out;
}

Tensor reshape(const Tensor& a, const Shape& shape_in) {
  require_defined(a, "reshape");
  Shape shape = shape_in;
  // One -1 may stand for the remaining size.
  auto unknown = std::find(shape.begin(), shape.end(), -1);
  if (unknown != shape.end()) {
    *unknown = 1;
    int64_t known = numel(shape);
    *unknown = known == 0 ? 0 : a.numel() / known;
  }
  if (numel(shape) != a.numel())
    throw std::invalid_argument("reshape: cannot reshape " + shape_str(a.shape()) + " to " +
                                shape_str(shape_in) + " (element counts differ)");
  return a.view(shape);
}

namespace {
// The permuted shape and a's strides in that order, after checking perm.
Shape permuted(const Tensor& a, const std::vector<int64_t>& perm, std::vector<int64_t>* strides) {
  require_defined(a, "permute");
  std::vector<int64_t> sorted(perm);
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> expect(static_cast<size_t>(a.dim()));
  std::iota(expect.begin(), expect.end(), 0);
  if (sorted != expect)
    throw std::invalid_argument("permute: " + shape_str(perm) + " is not a permutation of the dims of " +
                                shape_str(a.shape()));
  std::vector<int64_t> own = contiguous_strides(a.shape());
  Shape shape(perm.size());
  strides->assign(perm.size(), 0);
  for (size_t i = 0; i < perm.size(); ++i) {
    shape[i] = a.shape()[perm[i]];
    (*strides)[i] = own[perm[i]];
  }
  return shape;
}
}  // namespace

Tensor permute(const Tensor& a, const std::vector<int64_t>& perm, Allocator* al) {
  std::vector<int64_t> strides;
  Shape shape = permuted(a, perm, &strides);
  Tensor out = Tensor::empty(a.dtype(), shape, al);
  copy_strided(a.data(), dtype_size(a.dtype()), 0, shape, strides, out.data());
  return out;
}

void permute_into(const Tensor& a, const std::vector<int64_t>& perm, Tensor& out) {
  std::vector<int64_t> strides;
  Shape shape = permuted(a, perm, &strides);
  if (out.dtype() != a.dtype() || out.shape() != shape)
    throw std::invalid_argument("permute: the output must be " + std::string(dtype_name(a.dtype())) + shape_str(shape) + ", got " +
                                dtype_name(out.dtype()) + shape_str(out.shape()));
  copy_strided(a.data(), dtype_size(a.dtype()), 0, shape, strides, out.data());
}

Tensor slice(const Tensor& a, const std::vector<int64_t>& start, const std::vector<int64_t>& stop,
             const std::vector<int64_t>& step, Allocator* al) {
  require_defined(a, "slice");
  size_t nd = a.shape().size();
  if (start.size() != nd || stop.size() != nd || step.size() != nd)
    throw std::invalid_argument("slice: need start/stop/step for each dim of " + shape_str(a.shape()));
  std::vector<int64_t> own = contiguous_strides(a.shape());
  Shape shape(nd);
  std::vector<int64_t> strides(nd);
  int64_t base = 0;
  for (size_t i = 0; i < nd; ++i) {
    if (step[i] <= 0 || start[i] < 0 || stop[i] < 0 || start[i] > a.shape()[i] || stop[i] > a.shape()[i])
      throw std::invalid_argument("slice: bad bounds " + std::to_string(start[i]) + ":" +
                                  std::to_string(stop[i]) + ":" + std::to_string(step[i]) +
                                  " for dim " + std::to_string(i) + " of " + shape_str(a.shape()));
    shape[i] = stop[i] > start[i] ? (stop[i] - start[i] - 1) / step[i] + 1 : 0;  // no overflow for steps near 2^63
    strides[i] = own[i] * step[i];
    base += start[i] * own[i];
  }
  Tensor out = Tensor::empty(a.dtype(), shape, al);
  if (out.numel() > 0) copy_strided(a.data(), dtype_size(a.dtype()), base, shape, strides, out.data());
  return out;
}

Tensor cat(const std::vector<Tensor>& xs, int64_t dim, Allocator* al) {
  if (xs.empty()) throw std::invalid_argument("cat: no tensors given");
  for (const Tensor& t : xs) require_defined(t, "cat");
  const Tensor& first = xs[0];
  int64_t nd = first.dim();
  if (dim < 0) dim += nd;
  if (dim < 0 || dim >= nd)
    throw std::invalid_argument("cat: dim out of range for " + shape_str(first.shape()));
  Shape shape = first.shape();
  shape[dim] = 0;
  for (const Tensor& t : xs) {
    if (t.dtype() != first.dtype())
      throw std::invalid_argument(std::string("cat: dtypes ") + dtype_name(first.dtype()) + " and " +
                                  dtype_name(t.dtype()) + " differ");
    bool ok = t.dim() == nd;
    for (int64_t i = 0; ok && i < nd; ++i) ok = i == dim || t.shape()[i] == first.shape()[i];
    if (!ok)
      throw std::invalid_argument("cat: shapes " + shape_str(first.shape()) + " and " +
                                  shape_str(t.shape()) + " do not match outside dim " + std::to_string(dim));
    shape[dim] += t.shape()[dim];
  }
  Tensor out = Tensor::empty(first.dtype(), shape, al);
  int64_t outer = 1, inner = static_cast<int64_t>(dtype_size(first.dtype()));
  for (int64_t i = 0; i < dim; ++i) outer *= shape[i];
  for (int64_t i = dim + 1; i < nd; ++i) inner *= shape[i];
  char* dst = static_cast<char*>(out.data());
  int64_t out_row = shape[dim] * inner;
  int64_t col = 0;
  for (const Tensor& t : xs) {
    int64_t chunk = t.shape()[dim] * inner;
    const char* src = static_cast<const char*>(t.data());
    if (chunk > 0)
      for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * out_row + col, src + o * chunk, chunk);
    col += chunk;
  }
  return out;
}

Tensor full(const Shape& shape, Scalar value, DType dt, Allocator* al) {
  Tensor out = Tensor::empty(dt, shape, al);
  dispatch(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v = value.is_int ? convert<T>(value.int_value) : convert<T>(value.value);
    std::fill_n(out.data_as<T>(), out.numel(), v);
  });
  return out;
}

Tensor iota(int64_t n, int64_t start, int64_t step, DType dt, Allocator* al) {
  if (n < 0) throw std::invalid_argument("iota: negative length " + std::to_string(n));
  Tensor out = Tensor::empty(dt, {n}, al);
  dispatch(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data_as<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = convert<T>(start + i * step);
  });
  return out;
}

namespace {
// Index values as int64, checked against [0, rows) up front so parallel loops cannot fail.
std::vector<int64_t> load_indices(const Tensor& index, int64_t rows, const char* what) {
  require_defined(index, what);
  if (!is_int(index.dtype()))
    throw std::invalid_argument(std::string(what) + ": index dtype must be integral, got " +
                                dtype_name(index.dtype()));
  std::vector<int64_t> idx(static_cast<size_t>(index.numel()));
  dispatch(index.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = index.data_as<const T>();
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = convert<int64_t>(p[i]);
  });
  for (int64_t v : idx)
    if (v < 0 || v >= rows)
      throw std::invalid_argument(std::string(what) + ": index " + std::to_string(v) +
                                  " out of range for " + std::to_string(rows) + " rows");
  return idx;
}
}  // namespace

Tensor take(const Tensor& table, const Tensor& index, Allocator* al, int64_t dim) {
  require_defined(table, "take");
  if (table.dim() < 1) throw std::invalid_argument("take: table must have at least one dim");
  if (dim < 0 || dim >= table.dim())
    throw std::invalid_argument("take: dimension " + std::to_string(dim) + " out of range for " + shape_str(table.shape()));
  const Shape& ts = table.shape();
  const size_t d = static_cast<size_t>(dim);
  std::vector<int64_t> idx = load_indices(index, ts[d], "take");
  // out[o, j, i] = table[o, idx[j], i]: o over the dimensions before dim, i over those after.
  Shape shape(ts.begin(), ts.begin() + dim);
  shape.insert(shape.end(), index.shape().begin(), index.shape().end());
  shape.insert(shape.end(), ts.begin() + dim + 1, ts.end());
  Tensor out = Tensor::empty(table.dtype(), shape, al);
  int64_t outer = 1, rows = ts[d];
  for (size_t k = 0; k < d; ++k) outer *= ts[k];
  size_t inner_bytes = dtype_size(table.dtype());
  for (size_t k = d + 1; k < ts.size(); ++k) inner_bytes *= static_cast<size_t>(ts[k]);
  const char* src = static_cast<const char*>(table.data());
  char* dst = static_cast<char*>(out.data());
  int64_t n = static_cast<int64_t>(idx.size());
  if (inner_bytes == 0 || outer == 0) return out;
  const int64_t total = outer * n;
#pragma omp parallel for schedule(static) if (total * static_cast<int64_t>(inner_bytes) > 262144)
  for (int64_t e = 0; e < total; ++e) {
    const int64_t o = e / n, j = e % n;
    std::memcpy(dst + e * inner_bytes, src + (o * rows + idx[static_cast<size_t>(j)]) * inner_bytes, inner_bytes);
  }
  return out;
}

namespace {
// acc[idx[n], :] += grad[n, :], parallel over column ranges: each element's additions happen in
// index order on one thread, so the result is deterministic and race-free.
template <class A, class S>
void scatter_add(const std::vector<int64_t>& idx, const S* grad, int64_t cols, A* acc) {
  int64_t n = static_cast<int64_t>(idx.size());
  constexpr int64_t kChunk = 256;
  int64_t chunks = (cols + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n * cols > 32768 && chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t c0 = c * kChunk, c1 = std::min(cols, c0 + kChunk);
    for (int64_t i = 0; i < n; ++i) {
      A* row = acc + idx[i] * cols;
      const S* g = grad + i * cols;
      for (int64_t d = c0; d < c1; ++d) row[d] += convert<A>(g[d]);
    }
  }
}
}  // namespace

Tensor take_backward(const Tensor& grad, const Tensor& index, int64_t num_rows, Allocator* al) {
  require_defined(grad, "take_backward");
  require_defined(index, "take_backward");
  bool ok = grad.dim() >= index.dim() &&
            std::equal(index.shape().begin(), index.shape().end(), grad.shape().begin());
  if (!ok)
    throw std::invalid_argument("take_backward: grad shape " + shape_str(grad.shape()) +
                                " does not start with index shape " + shape_str(index.shape()));
  if (grad.dtype() == DType::b8) throw std::invalid_argument("take_backward: bool grad unsupported");
  std::vector<int64_t> idx = load_indices(index, num_rows, "take_backward");
  Shape shape{num_rows};
  shape.insert(shape.end(), grad.shape().begin() + index.dim(), grad.shape().end());
  int64_t cols = numel(shape) / std::max<int64_t>(num_rows, 1);
  Tensor out = Tensor::empty(grad.dtype(), shape, al);
  dispatch(grad.dtype(), [&](auto tag) {
    using S = typename decltype(tag)::type;
    dispatch_math(math_of(grad.dtype()), [&](auto atag) {
      using A = typename decltype(atag)::type;
      std::vector<A> acc(static_cast<size_t>(out.numel()), A(0));
      scatter_add(idx, grad.data_as<const S>(), cols, acc.data());
      S* o = out.data_as<S>();
      for (size_t i = 0; i < acc.size(); ++i) o[i] = convert<S>(acc[i]);
    });
  });
  return out;
}

}  // namespace tracer::rt
