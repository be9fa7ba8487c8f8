// Communicators (comm.h): Gloo through its plugin (runtime/gloo/plugin.cpp), loaded with dlopen.
#include "runtime/comm.h"

#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "runtime/gloo_plugin.h"
#include "runtime/kernel_util.h"

namespace tracer::rt::dist {
namespace {

int gloo_dtype(DType d, const char* who) {
  switch (d) {
    case DType::f32: return 0;
    case DType::f64: return 1;
    case DType::f16: return 2;
    case DType::bf16: return 3;
    case DType::i32: return 4;
    case DType::i64: return 5;
    case DType::i8: return 6;
    case DType::u8: return 7;
    default: throw StoreError(std::string(who) + ": Gloo has no reduction for " + dtype_name(d) + " tensors");
  }
}

// The plugin, loaded once per process.
const tracer_gloo_api* load_plugin() {
  static std::mutex m;
  static const tracer_gloo_api* api = nullptr;
  static std::string why;
  std::lock_guard<std::mutex> lock(m);
  if (api) return api;
  std::vector<std::string> tried;
  if (const char* p = std::getenv("TRACER_GLOO_PLUGIN"); p && *p) {
    tried.push_back(p);
  } else {
    char exe[PATH_MAX] = {0};
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
      std::string dir(exe, static_cast<size_t>(n));
      dir = dir.substr(0, dir.rfind('/'));
      tried.push_back(dir + "/libtracer_gloo.so");
    }
    tried.push_back("libtracer_gloo.so");
  }
  std::string errors;
  for (const auto& path : tried) {
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      errors += "\n  " + path + ": " + dlerror();
      continue;
    }
    auto entry = reinterpret_cast<const tracer_gloo_api* (*)()>(dlsym(lib, "tracer_gloo_plugin"));
    const tracer_gloo_api* a = entry ? entry() : nullptr;
    if (!a || a->abi != TRACER_GLOO_ABI) {
      errors += "\n  " + path + ": not a tracer Gloo plugin of ABI " + std::to_string(TRACER_GLOO_ABI);
      continue;
    }
    api = a;  // stays loaded for the life of the process
    return api;
  }
  throw StoreError("Gloo: no plugin (libtracer_gloo.so, built where Debian's libgloo-dev is installed; $TRACER_GLOO_PLUGIN names one):" +
                   errors);
}

struct StoreCtx {
  StoreClient* store;
  std::string prefix;
};

int store_set(void* ctx, const char* key, const char* data, size_t n, char* err, size_t errlen) {
  auto* c = static_cast<StoreCtx*>(ctx);
  try {
    c->store->set(c->prefix + "/" + key, std::string(data, n));
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(err, errlen, "%s", e.what());
    return 1;
  }
}

int store_get(void* ctx, const char* key, long timeout_ms, char** data, size_t* n, char* err, size_t errlen) {
  auto* c = static_cast<StoreCtx*>(ctx);
  try {
    std::string v = c->store->get(c->prefix + "/" + key, Millis(timeout_ms));
    *data = static_cast<char*>(std::malloc(v.size() ? v.size() : 1));
    if (!v.empty()) std::memcpy(*data, v.data(), v.size());
    *n = v.size();
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(err, errlen, "%s", e.what());
    return 1;
  }
}

class GlooCommunicator : public Communicator {
 public:
  GlooCommunicator(const tracer_gloo_api* api, void* comm, int rank, int size) : api_(api), comm_(comm), rank_(rank), size_(size) {}
  ~GlooCommunicator() override { api_->destroy(comm_); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce(Tensor& t, ReduceOp op) override {
    if (op == ReduceOp::avg && !is_float(t.dtype())) throw StoreError("all_reduce: avg needs a floating-point tensor, got " + std::string(dtype_name(t.dtype())));
    const int g = gloo_dtype(t.dtype(), "all_reduce");
    const int gop = op == ReduceOp::max ? 1 : op == ReduceOp::min ? 2 : 0;
    check(api_->all_reduce(comm_, t.data(), static_cast<size_t>(t.numel()), g, gop, err_, sizeof err_), "all_reduce");
    if (op == ReduceOp::avg) divide(t);
  }

  void all_gather(const Tensor& in, Tensor& out) override {
    Shape want = in.shape();
    if (want.empty()) want.push_back(1);
    want[0] *= size_;
    if (out.dtype() != in.dtype() || out.numel() != rt::numel(want))
      throw StoreError("all_gather: the output must be " + std::string(dtype_name(in.dtype())) + shape_str(want) + ", got " +
                       dtype_name(out.dtype()) + shape_str(out.shape()));
    check(api_->all_gather(comm_, in.data(), out.data(), static_cast<size_t>(in.numel()), gloo_dtype(in.dtype(), "all_gather"), err_, sizeof err_),
          "all_gather");
  }

  // Gloo's allreduce into a copy, then this rank's slice: correct, with twice the traffic of a
  // reduce-scatter proper (Debian's Gloo has one only as a templated algorithm, not yet used).
  void reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) override {
    if (in.shape().empty() || in.shape()[0] % size_ != 0)
      throw StoreError("reduce_scatter: dim 0 of " + shape_str(in.shape()) + " is not a multiple of the " + std::to_string(size_) + " ranks");
    Shape want = in.shape();
    want[0] /= size_;
    if (out.dtype() != in.dtype() || out.shape() != want)
      throw StoreError("reduce_scatter: the output must be " + std::string(dtype_name(in.dtype())) + shape_str(want) + ", got " +
                       dtype_name(out.dtype()) + shape_str(out.shape()));
    Tensor work = Tensor::empty(in.dtype(), in.shape());
    std::memcpy(work.data(), in.data(), in.nbytes());
    all_reduce(work, op);
    std::memcpy(out.data(), static_cast<const char*>(work.data()) + static_cast<size_t>(rank_) * out.nbytes(), out.nbytes());
  }

  void broadcast(Tensor& t, int root) override {
    if (root < 0 || root >= size_) throw StoreError("broadcast: root " + std::to_string(root) + " is not a rank of " + std::to_string(size_));
    check(api_->broadcast(comm_, t.data(), static_cast<size_t>(t.numel()), gloo_dtype(t.dtype(), "broadcast"), root, err_, sizeof err_),
          "broadcast");
  }

  void barrier() override { check(api_->barrier(comm_, err_, sizeof err_), "barrier"); }

 private:
  void check(int rc, const char* what) {
    if (rc != 0) throw StoreError(std::string("Gloo ") + what + " on rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ": " + err_);
  }
  void divide(Tensor& t) {
    using namespace rt::detail;
    const int64_t n = t.numel();
    dispatch(t.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BF16>) {
        T* p = t.data_as<T>();
        for (int64_t i = 0; i < n; ++i) p[i] = convert<T>(convert<double>(p[i]) / size_);
      }
    });
  }
  const tracer_gloo_api* api_;
  void* comm_;
  int rank_, size_;
  char err_[1024] = {0};
};

// One worker thread runs the submitted collectives in order.
class AsyncCommunicator : public Communicator {
 public:
  explicit AsyncCommunicator(std::unique_ptr<Communicator> inner) : inner_(std::move(inner)), worker_([this] { loop(); }) {}
  ~AsyncCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
      queue_.clear();  // not started: their futures report a broken promise
    }
    cv_.notify_all();
    worker_.join();
  }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }

  Work submit(std::function<void(Communicator&)> fn) override {
    Task task{std::move(fn), {}};
    Work w(task.done.get_future().share());
    {
      std::lock_guard<std::mutex> lock(m_);
      queue_.push_back(std::move(task));
    }
    cv_.notify_one();
    return w;
  }

  void all_reduce(Tensor& t, ReduceOp op) override {
    submit([&](Communicator& c) { c.all_reduce(t, op); }).wait();
  }
  void all_gather(const Tensor& in, Tensor& out) override {
    submit([&](Communicator& c) { c.all_gather(in, out); }).wait();
  }
  void reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) override {
    submit([&](Communicator& c) { c.reduce_scatter(in, out, op); }).wait();
  }
  void broadcast(Tensor& t, int root) override {
    submit([&](Communicator& c) { c.broadcast(t, root); }).wait();
  }
  void barrier() override {
    submit([](Communicator& c) { c.barrier(); }).wait();
  }

 private:
  void loop() {
    for (;;) {
      Task task;
      {
        std::unique_lock<std::mutex> lock(m_);
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      std::exception_ptr error;
      try {
        task.fn(*inner_);
      } catch (...) {
        error = std::current_exception();
      }
      // What fn holds goes before the waiter wakes: the tensors it captured are released by then
      // (a rank's measured peak does not depend on this thread's timing).
      task.fn = nullptr;
      if (error) {
        task.done.set_exception(error);
      } else {
        task.done.set_value();
      }
    }
  }
  struct Task {
    std::function<void(Communicator&)> fn;
    std::promise<void> done;
  };
  std::unique_ptr<Communicator> inner_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool stop_ = false;
  std::thread worker_;  // last: it starts once the rest is built
};

}  // namespace

Work Communicator::submit(std::function<void(Communicator&)> fn) {
  std::promise<void> p;
  try {
    fn(*this);
    p.set_value();
  } catch (...) {
    p.set_exception(std::current_exception());
  }
  return Work(p.get_future().share());
}

std::unique_ptr<Communicator> make_async(std::unique_ptr<Communicator> inner) {
  return std::make_unique<AsyncCommunicator>(std::move(inner));
}

std::unique_ptr<Communicator> open_gloo(StoreClient& store, const JobEnv& job, Millis timeout, const std::string& host,
                                        const std::string& prefix) {
  const tracer_gloo_api* api = load_plugin();
  StoreCtx ctx{&store, prefix};
  tracer_gloo_store cb{&ctx, &store_set, &store_get};
  char err[1024] = {0};
  void* comm = api->create(&cb, job.rank, job.world_size, host.c_str(), static_cast<long>(timeout.count()), err, sizeof err);
  if (!comm)
    throw StoreError("Gloo: rank " + std::to_string(job.rank) + " of " + std::to_string(job.world_size) + " could not connect to the others: " + err);
  return make_async(std::make_unique<GlooCommunicator>(api, comm, job.rank, job.world_size));
}

}  // namespace tracer::rt::dist
