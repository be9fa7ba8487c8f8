// Communicators of a distributed job (DESIGN section 5, docs/distributed.md): one interface for
// the collectives, over CPU tensors with Gloo (TCP; the plugin libtracer_gloo.so, loaded at run
// time). Knows nothing of the language. A communicator's collectives are called directly
// (they return when done) or submitted (submit: they run on the communicator's own thread in the
// order submitted, and the Work returned is waited on), so that CPU ranks compute while their
// collectives travel; CUDA tensors have their own interface, NCCL's, asynchronous on a
// communication stream (runtime/nccl.h).
#pragma once
#include <functional>
#include <future>
#include <memory>
#include <string>

#include "runtime/store.h"
#include "runtime/tensor.h"

namespace tracer::rt::dist {

enum class ReduceOp { sum, avg, max, min };

// A submitted collective: wait() blocks until it is done and rethrows its error, if any. A
// default-constructed Work is done.
class Work {
 public:
  Work() = default;
  explicit Work(std::shared_future<void> f) : f_(std::move(f)) {}
  void wait() const {
    if (f_.valid()) f_.get();
  }
  bool done() const { return !f_.valid() || f_.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }

 private:
  std::shared_future<void> f_;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  // Runs fn(*this) after every collective submitted before it, and returns its Work. Here: at
  // once, on the caller's thread; an asynchronous communicator (make_async) runs it on its own
  // thread. Whatever fn reads or writes must stay alive until the Work is done (capture tensors
  // by value: they are counted handles).
  virtual Work submit(std::function<void(Communicator&)> fn);
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

// Runs inner's collectives on a thread of their own, in the order submitted. The direct calls submit
// and wait, so they keep their place in that order. A collective's error goes to its Work (after
// a lost peer, Gloo fails the ones that follow too, within its timeout). Destroying it
// drops what has not started (its Work reports a broken promise) and waits for the one running.
std::unique_ptr<Communicator> make_async(std::unique_ptr<Communicator> inner);

// Gloo over TCP among the job's ranks, meeting through the store under prefix, asynchronous
// (make_async). The plugin is
// $TRACER_GLOO_PLUGIN, else libtracer_gloo.so beside the running program, else the search
// path's. Throws StoreError with the reason (no plugin, a rank missing, Gloo's own errors).
std::unique_ptr<Communicator> open_gloo(StoreClient& store, const JobEnv& job, Millis timeout, const std::string& host = "127.0.0.1",
                                        const std::string& prefix = "gloo");

}  // namespace tracer::rt::dist
