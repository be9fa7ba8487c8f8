// Dense, contiguous, row-major tensors on the CPU, and the allocator that counts their bytes.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "runtime/dtype.h"

namespace tracer::rt {

// Thrown when an allocation fails or would pass the allocator's limit.
struct OutOfMemory : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Where an Allocator takes its memory from (an embedding host's callbacks; the C API). alloc
// returns `size` bytes aligned to `align` or null; free gets the pointer and the same size.
struct AllocHooks {
  void* (*alloc)(void* user, size_t size, size_t align) = nullptr;
  void (*free)(void* user, void* ptr, size_t size) = nullptr;
  void* user = nullptr;
};

// Counts live and peak bytes of tensor storage. One per runtime context; no globals.
class Allocator {
 public:
  // The counters and hooks. Every storage the allocator makes shares them, so a tensor may
  // outlive the Allocator object (an embedding host's state closed while another holds one of
  // its tensors) and still give its memory back where it came from.
  struct Core {
    std::atomic<size_t> current{0};
    std::atomic<size_t> peak{0};
    size_t limit = 0;
    AllocHooks hooks;
    void deallocate(void* p, size_t bytes);
  };
  Allocator() : core_(std::make_shared<Core>()) {}
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;
  // Memory from hooks instead of the C library (set before the first allocation).
  void set_hooks(const AllocHooks& h) { core_->hooks = h; }
  void* allocate(size_t bytes);          // 64-byte aligned; throws OutOfMemory
  // Allocations that would take the live bytes past limit fail with OutOfMemory instead of
  // letting the operating system kill the process later. 0: no limit.
  void set_limit(size_t bytes) { core_->limit = bytes; }
  size_t limit() const { return core_->limit; }
  // 90% of the machine's physical memory.
  static size_t default_limit();
  // Bytes in the unit that suits them ("512 B", "3.2 KiB", "95.37 MiB", "21.2 GiB"), for messages.
  static std::string bytes_text(uint64_t b);
  void deallocate(void* p, size_t bytes) { core_->deallocate(p, bytes); }
  size_t current_bytes() const { return core_->current; }
  size_t peak_bytes() const { return core_->peak; }
  void reset_peak() { core_->peak = core_->current.load(); }
  const std::shared_ptr<Core>& core() const { return core_; }
  // Process-wide fallback used when no allocator is given (counts too).
  static Allocator& default_allocator();

 private:
  std::shared_ptr<Core> core_;
};

struct Storage {
  void* data = nullptr;
  size_t bytes = 0;
  Allocator* allocator = nullptr;     // null for borrowed memory (the one that made it, while it lives)
  std::shared_ptr<Allocator::Core> core;  // where the memory goes back (it outlives the Allocator)
  std::function<void()> release;      // borrowed memory: what gives it back
  Storage(Allocator* a, size_t n);
  // Memory tracer does not own (an embedding host's, a DLPack producer's): never written into
  // by an op reusing its inputs' buffers; release runs when the last tensor over it goes.
  Storage(void* p, size_t n, std::function<void()> rel) : data(p), bytes(n), release(std::move(rel)) {}
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

class Tensor {
 public:
  Tensor() = default;
  // Uninitialized contents; allocator null means Allocator::default_allocator().
  static Tensor empty(DType dt, Shape shape, Allocator* a = nullptr);
  static Tensor zeros(DType dt, Shape shape, Allocator* a = nullptr);
  // A tensor over memory tracer does not own (see Storage's borrowing constructor). data must
  // hold numel(shape) elements of dt, aligned to the element size.
  static Tensor borrow(DType dt, Shape shape, void* data, std::function<void()> release);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const { return rt::numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  void* data() const { return storage_ ? static_cast<char*>(storage_->data) + offset_ : nullptr; }
  template <class T> T* data_as() const { return static_cast<T*>(data()); }
  Allocator* allocator() const { return storage_ ? storage_->allocator : nullptr; }
  // Whether this tensor is the only reference to all of its storage (no view, no other owner):
  // then a caller that is done with it may let an op write its output there.
  bool sole_owner() const {
    return storage_ && storage_->allocator && storage_.use_count() == 1 && offset_ == 0 && nbytes() == storage_->bytes;
  }
  bool borrowed() const { return storage_ && !storage_->allocator; }

  // Same storage, new shape with equal numel (no copy).
  Tensor view(Shape new_shape) const;
  // Rows [r0, r1) of dimension 0, sharing storage (no copy).
  Tensor rows(int64_t r0, int64_t r1) const;
  // Element i (flat index) converted to double / written from double.
  double get(int64_t i) const;
  void set(int64_t i, double v);

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;  // bytes into the storage (row views)
  DType dtype_ = DType::f32;
  Shape shape_;
};

}  // namespace tracer::rt
