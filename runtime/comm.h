// Communicators of a distributed job (DESIGN section 5, docs/distributed.md): one interface for
// the collectives, over CPU tensors with Gloo (TCP; the plugin libtracer_gloo.so, loaded at run
// time). Knows nothing of the language. These run when called (the CPU executor issues a
// collective and hands its result to the wait); CUDA tensors have their own interface, NCCL's,
// asynchronous on a communication stream (runtime/nccl.h).
#pragma once
#include <memory>
#include <string>

#include "runtime/store.h"
#include "runtime/tensor.h"

namespace tracer::rt::dist {

enum class ReduceOp { sum, avg, max, min };

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // t becomes the reduction of every rank's t (avg: the sum divided by size, floats only).
  virtual void all_reduce(Tensor& t, ReduceOp op) = 0;
  // out ([size * d0, ...]) becomes every rank's in ([d0, ...]) in rank order along dim 0.
  virtual void all_gather(const Tensor& in, Tensor& out) = 0;
  // out ([d0 / size, ...]) becomes this rank's slice (dim 0) of the reduction of every rank's in.
  virtual void reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) = 0;
  // t becomes root's t.
  virtual void broadcast(Tensor& t, int root) = 0;
  virtual void barrier() = 0;
};

// Gloo over TCP among the job's ranks, meeting through the store under prefix. The plugin is
// $TRACER_GLOO_PLUGIN, else libtracer_gloo.so beside the running program, else the search
// path's. Throws StoreError with the reason (no plugin, a rank missing, Gloo's own errors).
std::unique_ptr<Communicator> open_gloo(StoreClient& store, const JobEnv& job, Millis timeout, const std::string& host = "127.0.0.1",
                                        const std::string& prefix = "gloo");

}  // namespace tracer::rt::dist
