// The communicator for CUDA tensors (docs/distributed.md, "Communicators"): NCCL, loaded at run
// time like the CUDA driver, so that the same binary runs where NCCL is absent. Knows nothing
// of the language. Each collective is enqueued on the stream it is given (a CUstream: the
// device's communication stream, in the GPU executor) and returns at once; the caller orders it
// against its other work with events.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "runtime/comm.h"
#include "runtime/dtype.h"
#include "runtime/store.h"

namespace tracer::rt::dist {

class DeviceCommunicator {
 public:
  virtual ~DeviceCommunicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Device pointers (CUdeviceptr) and counts of elements of dt; stream is a CUstream.
  // out (count elements) becomes the reduction of every rank's in (in == out: in place).
  virtual void all_reduce(uint64_t in, uint64_t out, size_t count, DType dt, ReduceOp op, void* stream) = 0;
  // out (size * count elements) becomes every rank's in (count elements), in rank order.
  virtual void all_gather(uint64_t in, uint64_t out, size_t count, DType dt, void* stream) = 0;
  // out (count elements) becomes this rank's slice of the reduction of every rank's in (size * count).
  virtual void reduce_scatter(uint64_t in, uint64_t out, size_t count, DType dt, ReduceOp op, void* stream) = 0;
  // buf (count elements) becomes root's buf.
  virtual void broadcast(uint64_t buf, size_t count, DType dt, int root, void* stream) = 0;
  // Whether a collective issued so far failed on the device side (a rank gone, a network error):
  // throws StoreError with NCCL's message if so.
  virtual void check() = 0;
};

// NCCL among the job's ranks, on the device whose context is current: rank 0 makes the unique
// id and hands it to the others through the store (under prefix), then every rank joins the
// communicator. The library is $TRACER_NCCL_LIBRARY, else libnccl.so.2 from the search path,
// else the CUDA toolkit's. Throws StoreError with what is missing (no library, a rank that
// never came within timeout, NCCL's own errors). ordinal is the device's (for messages).
std::unique_ptr<DeviceCommunicator> open_nccl(StoreClient& store, const JobEnv& job, int ordinal, Millis timeout,
                                              const std::string& prefix = "nccl");

}  // namespace tracer::rt::dist
