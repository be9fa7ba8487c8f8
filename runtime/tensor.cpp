// Tensor storage and the byte-counting allocator behind it.
#include "runtime/tensor.h"

#include <unistd.h>

#include <cstdlib>
#include <new>
#include <stdexcept>

#include "runtime/kernel_util.h"

#include <cstdio>

namespace tracer::rt {

std::string Allocator::bytes_text(uint64_t b) {
  const double v = static_cast<double>(b);
  char buf[48];
  if (b < 1024) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  else if (v < 1024.0 * 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", v / 1024);
  else if (v < 1024.0 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.2f MiB", v / (1024.0 * 1024));
  else std::snprintf(buf, sizeof buf, "%.1f GiB", v / (1024.0 * 1024 * 1024));
  return buf;
}


size_t Allocator::default_limit() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<size_t>(static_cast<double>(pages) * static_cast<double>(page) * 0.9);
}

void* Allocator::allocate(size_t bytes) {
  Core& c = *core_;
  if (c.limit && (bytes > c.limit || c.current.load() > c.limit - bytes))
    throw OutOfMemory("out of memory: allocating " + bytes_text(bytes) + " with " + bytes_text(c.current.load()) +
                      " in use would pass the limit of " + bytes_text(c.limit));
  // aligned_alloc requires the size to be a multiple of the alignment.
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0 || rounded < bytes) rounded = 64;
  void* p = rounded < bytes ? nullptr : c.hooks.alloc ? c.hooks.alloc(c.hooks.user, rounded, 64) : std::aligned_alloc(64, rounded);
  if (!p) throw OutOfMemory("out of memory: cannot allocate " + bytes_text(bytes));
  size_t now = c.current.fetch_add(bytes) + bytes;
  size_t peak = c.peak.load();
  while (now > peak && !c.peak.compare_exchange_weak(peak, now)) {
  }
  return p;
}

void Allocator::Core::deallocate(void* p, size_t bytes) {
  if (!p) return;
  if (hooks.free) {
    size_t rounded = (bytes + 63) / 64 * 64;
    hooks.free(hooks.user, p, rounded == 0 ? 64 : rounded);
  } else {
    std::free(p);
  }
  current.fetch_sub(bytes);
}

Allocator& Allocator::default_allocator() {
  static Allocator instance;
  return instance;
}

Storage::Storage(Allocator* a, size_t n) : bytes(n), allocator(a ? a : &Allocator::default_allocator()), core(allocator->core()) {
  // Zero-size tensors own no memory but are still defined.
  if (n > 0) data = allocator->allocate(n);
}

Storage::~Storage() {
  if (core) core->deallocate(data, bytes);
  else if (release) release();
}

Tensor Tensor::borrow(DType dt, Shape shape, void* data, std::function<void()> release) {
  Tensor t;
  size_t bytes = dtype_size(dt);
  for (int64_t d : shape) {
    if (d < 0) throw std::invalid_argument("negative size in shape " + shape_str(shape));
    if (__builtin_mul_overflow(bytes, static_cast<size_t>(d), &bytes))
      throw std::invalid_argument("a tensor of shape " + shape_str(shape) + " is too large");
  }
  t.storage_ = std::make_shared<Storage>(data, bytes, std::move(release));
  t.dtype_ = dt;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::empty(DType dt, Shape shape, Allocator* a) {
  Tensor t;
  size_t bytes = dtype_size(dt);
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0) throw std::invalid_argument("negative size in shape " + shape_str(shape));
    empty = empty || d == 0;
  }
  for (int64_t d : shape)  // a zero dimension empties any shape, however large the others
    if (!empty && __builtin_mul_overflow(bytes, static_cast<size_t>(d), &bytes))
      throw OutOfMemory("out of memory: a tensor of shape " + shape_str(shape) + " is too large");
  if (empty) bytes = 0;
  t.storage_ = std::make_shared<Storage>(a, bytes);
  t.dtype_ = dt;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::zeros(DType dt, Shape shape, Allocator* a) {
  Tensor t = empty(dt, std::move(shape), a);
  if (t.nbytes() > 0) std::memset(t.data(), 0, t.nbytes());
  return t;
}

Tensor Tensor::rows(int64_t r0, int64_t r1) const {
  if (shape_.empty() || r0 < 0 || r1 < r0 || r1 > shape_[0])
    throw std::invalid_argument("rows: [" + std::to_string(r0) + ", " + std::to_string(r1) + ") of shape " + shape_str(shape_));
  Tensor t = *this;
  size_t row_bytes = shape_[0] ? nbytes() / static_cast<size_t>(shape_[0]) : 0;
  t.offset_ = offset_ + static_cast<size_t>(r0) * row_bytes;
  t.shape_[0] = r1 - r0;
  return t;
}

Tensor Tensor::view(Shape new_shape) const {
  if (rt::numel(new_shape) != numel())
    throw std::invalid_argument("view: cannot view " + shape_str(shape_) + " as " +
                                shape_str(new_shape) + " (element counts differ)");
  Tensor t = *this;
  t.shape_ = std::move(new_shape);
  return t;
}

double Tensor::get(int64_t i) const {
  if (i < 0 || i >= numel())
    throw std::out_of_range("Tensor::get: index " + std::to_string(i) + " out of range for " +
                            shape_str(shape_));
  return detail::dispatch(dtype_, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return detail::convert<double>(data_as<const T>()[i]);
  });
}

void Tensor::set(int64_t i, double v) {
  if (i < 0 || i >= numel())
    throw std::out_of_range("Tensor::set: index " + std::to_string(i) + " out of range for " +
                            shape_str(shape_));
  detail::dispatch(dtype_, [&](auto tag) {
    using T = typename decltype(tag)::type;
    data_as<T>()[i] = detail::convert<T>(v);
  });
}

}  // namespace tracer::rt
