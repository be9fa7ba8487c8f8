// The device's copies, staged uploads, pinned host memory and events (runtime/cuda.h); the
// driver's entry points as runtime/cuda.cpp loaded them (runtime/cuda_driver.h).
#include <cstring>

#include "runtime/cuda_driver.h"

namespace tracer::rt::cuda {

namespace {
constexpr unsigned kEventDisableTiming = 2;  // CU_EVENT_DISABLE_TIMING
}  // namespace

// Staged uploads: src is copied into a pinned block, the device copies from there in stream
// order, and an event says when the block may be reused, so the host never waits for the device
// (a copy from pageable memory may: the driver can synchronize with the stream to stage it).
// Blocks are powers of two from 4 KiB, kept for reuse, up to kStagingLimit bytes in all.
namespace {
constexpr size_t kStagingLimit = size_t{256} << 20, kStagingMin = 4096;
}

void Device::copy_to_device_async(DevPtr dst, const void* src, size_t bytes) {
  if (!bytes) return;
  if (capturing_ || !api_->host_alloc || !api_->host_free || !api_->event_query || bytes > kStagingLimit / 4) {
    // A capture records the copy (its source is read at each replay); a large upload waits.
    check(api_->htod_async(dst, src, bytes, stream_), "cuMemcpyHtoDAsync");
    if (!capturing_ && bytes > kStagingLimit / 4) check(api_->stream_sync(stream_), "cuStreamSynchronize");
    return;
  }
  for (size_t i = 0; i < staging_busy_.size();) {  // blocks whose copies have run are free again
    if (api_->event_query(static_cast<CUevent>(staging_busy_[i].event)) == 0) {
      staging_free_.push_back(staging_busy_[i]);
      staging_busy_.erase(staging_busy_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  auto best = staging_free_.end();
  for (auto it = staging_free_.begin(); it != staging_free_.end(); ++it)
    if (it->bytes >= bytes && (best == staging_free_.end() || it->bytes < best->bytes)) best = it;
  Staging s;
  if (best != staging_free_.end()) {
    s = *best;
    staging_free_.erase(best);
  } else {
    size_t n = kStagingMin;
    while (n < bytes) n <<= 1;
    if (staging_bytes_ + n > kStagingLimit) {  // full: wait for the copies, give every block back
      check(api_->stream_sync(stream_), "cuStreamSynchronize");
      for (auto* list : {&staging_free_, &staging_busy_})
        for (const Staging& b : *list) {
          api_->host_free(b.host);
          api_->event_destroy(static_cast<CUevent>(b.event));
        }
      staging_free_.clear();
      staging_busy_.clear();
      staging_bytes_ = 0;
    }
    check(api_->host_alloc(&s.host, n, 0), "cuMemHostAlloc");
    s.bytes = n;
    s.event = new_event();
    staging_bytes_ += n;
  }
  std::memcpy(s.host, src, bytes);
  staging_busy_.push_back(s);  // (before the calls that may throw: the destructor frees it)
  check(api_->htod_async(dst, s.host, bytes, stream_), "cuMemcpyHtoDAsync");
  record(s.event, stream_);
}

void* Device::pinned_host(size_t bytes) {
  if (!api_->host_alloc || !api_->host_free) return nullptr;
  void* p = nullptr;
  check(api_->host_alloc(&p, bytes ? bytes : 1, 0), "cuMemHostAlloc");
  return p;
}

void Device::free_pinned_host(void* p) {
  if (p) api_->host_free(p);
}

void Device::copy_to_host_async(void* pinned_dst, DevPtr src, size_t bytes) {
  if (bytes) check(api_->dtoh_async(pinned_dst, src, bytes, stream_), "cuMemcpyDtoHAsync");
}

bool Device::event_done(void* event) {
  if (!api_->event_query) {
    check(api_->event_sync(static_cast<CUevent>(event)), "cuEventSynchronize");
    return true;
  }
  int rc = api_->event_query(static_cast<CUevent>(event));
  if (rc == 600) return false;  // CUDA_ERROR_NOT_READY
  check(rc, "cuEventQuery");
  return true;
}

void Device::event_wait(void* event) { check(api_->event_sync(static_cast<CUevent>(event)), "cuEventSynchronize"); }

// Copies are ordered on the device's stream (it does not synchronize with the legacy default
// stream); the two with host memory wait for it, so the host buffer may be reused on return.
void Device::copy_to_device(DevPtr dst, const void* src, size_t bytes) {
  if (!bytes) return;
  check(api_->htod_async(dst, src, bytes, stream_), "cuMemcpyHtoDAsync");
  check(api_->stream_sync(stream_), "cuStreamSynchronize");
}
void Device::copy_to_host(void* dst, DevPtr src, size_t bytes) {
  if (!bytes) return;
  check(api_->dtoh_async(dst, src, bytes, stream_), "cuMemcpyDtoHAsync");
  check(api_->stream_sync(stream_), "cuStreamSynchronize");
}
void Device::copy_device(DevPtr dst, DevPtr src, size_t bytes) {
  if (bytes) check(api_->dtod_async(dst, src, bytes, stream_), "cuMemcpyDtoDAsync");
}

void* Device::new_event() {
  CUevent e = nullptr;
  check(api_->event_create(&e, kEventDisableTiming), "cuEventCreate");
  return e;
}

void Device::destroy_event(void* e) {
  if (e) api_->event_destroy(static_cast<CUevent>(e));
}

void Device::record(void* event, void* stream) { check(api_->event_record(static_cast<CUevent>(event), static_cast<CUstream>(stream)), "cuEventRecord"); }

void Device::stream_wait(void* stream, void* event) {
  if (!api_->stream_wait_event) throw CudaError("the CUDA driver has no cuStreamWaitEvent");
  check(api_->stream_wait_event(static_cast<CUstream>(stream), static_cast<CUevent>(event), 0), "cuStreamWaitEvent");
}

}  // namespace tracer::rt::cuda
