// libtracer_gloo.so: Gloo's collectives behind the C interface of runtime/gloo_plugin.h. Built
// only where Debian's libgloo-dev is installed; the runtime dlopens it (docs/distributed.md).
// The reductions are Gloo's algorithms with element functions of ours for each dtype (Gloo has
// no bf16); nothing here moves bytes between ranks but Gloo.
#include "runtime/gloo_plugin.h"

#include "runtime/dtype.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

namespace {

void say(char* err, size_t errlen, const std::string& what) {
  if (err && errlen) {
    std::strncpy(err, what.c_str(), errlen - 1);
    err[errlen - 1] = 0;
  }
}

// Gloo's store interface on the runtime's callbacks.
class CallbackStore : public gloo::rendezvous::Store {
 public:
  CallbackStore(const tracer_gloo_store& s, long timeout_ms) : s_(s), timeout_ms_(timeout_ms) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    char err[512] = {0};
    if (s_.set(s_.ctx, key.c_str(), data.data(), data.size(), err, sizeof err) != 0) throw std::runtime_error(err);
  }
  std::vector<char> get(const std::string& key) override {
    char err[512] = {0};
    char* data = nullptr;
    size_t n = 0;
    if (s_.get(s_.ctx, key.c_str(), timeout_ms_, &data, &n, err, sizeof err) != 0) throw std::runtime_error(err);
    std::vector<char> out(data, data + n);
    std::free(data);
    return out;
  }
  void wait(const std::vector<std::string>& keys) override {
    for (const auto& k : keys) get(k);
  }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) override { wait(keys); }

 private:
  tracer_gloo_store s_;
  long timeout_ms_;
};

struct Comm {
  std::shared_ptr<gloo::rendezvous::Context> context;
  std::shared_ptr<gloo::transport::Device> device;
  std::chrono::milliseconds timeout;
};

// bf16 and f16 reduce in f32 and round back to nearest even: the runtime's conversions
// (runtime/dtype.cpp is compiled into the plugin too), so a plugin's numbers are the CPU's.
using tracer::rt::bf16_to_float;
using tracer::rt::float_to_bf16;
using tracer::rt::float_to_half;
using tracer::rt::half_to_float;

template <class T>
T combine(T a, T b, int op) {
  if (op == 0) return static_cast<T>(a + b);
  if (op == 1) return a != a ? a : b != b ? b : (a > b ? a : b);  // NaN wins, as amax
  return a != a ? a : b != b ? b : (a < b ? a : b);
}

template <class T>
gloo::AllreduceOptions::Func plain(int op) {
  return [op](void* c, const void* a, const void* b, size_t n) {
    T* o = static_cast<T*>(c);
    const T *x = static_cast<const T*>(a), *y = static_cast<const T*>(b);
    for (size_t i = 0; i < n; ++i) o[i] = combine(x[i], y[i], op);
  };
}

gloo::AllreduceOptions::Func half(int op, bool bf16) {
  return [op, bf16](void* c, const void* a, const void* b, size_t n) {
    uint16_t* o = static_cast<uint16_t*>(c);
    const uint16_t *x = static_cast<const uint16_t*>(a), *y = static_cast<const uint16_t*>(b);
    for (size_t i = 0; i < n; ++i) {
      const float r = bf16 ? combine(bf16_to_float(x[i]), bf16_to_float(y[i]), op) : combine(half_to_float(x[i]), half_to_float(y[i]), op);
      o[i] = bf16 ? float_to_bf16(r) : float_to_half(r);
    }
  };
}

size_t elem_size(int dtype) {
  switch (dtype) {
    case 1: case 5: return 8;
    case 0: case 4: return 4;
    case 2: case 3: return 2;
    default: return 1;
  }
}

template <class F>
int guarded(char* err, size_t errlen, F&& f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    say(err, errlen, e.what());
    return 1;
  }
}

void* create(const tracer_gloo_store* store, int rank, int size, const char* host, long timeout_ms, char* err, size_t errlen) {
  Comm* c = nullptr;
  guarded(err, errlen, [&] {
    auto comm = std::make_unique<Comm>();
    comm->timeout = std::chrono::milliseconds(timeout_ms);
    gloo::transport::tcp::attr attr(host);
    comm->device = gloo::transport::tcp::CreateDevice(attr);
    comm->context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    comm->context->setTimeout(comm->timeout);
    CallbackStore s(*store, timeout_ms);
    comm->context->connectFullMesh(s, comm->device);
    c = comm.release();
  });
  return c;
}

void destroy(void* comm) { delete static_cast<Comm*>(comm); }

int all_reduce(void* comm, void* buf, size_t n, int dtype, int op, char* err, size_t errlen) {
  return guarded(err, errlen, [&] {
    Comm& c = *static_cast<Comm*>(comm);
    gloo::AllreduceOptions o(c.context);
    o.setTimeout(c.timeout);
    switch (dtype) {
      case 0: o.setOutput(static_cast<float*>(buf), n); o.setReduceFunction(plain<float>(op)); break;
      case 1: o.setOutput(static_cast<double*>(buf), n); o.setReduceFunction(plain<double>(op)); break;
      case 2: o.setOutput(static_cast<uint16_t*>(buf), n); o.setReduceFunction(half(op, false)); break;
      case 3: o.setOutput(static_cast<uint16_t*>(buf), n); o.setReduceFunction(half(op, true)); break;
      case 4: o.setOutput(static_cast<int32_t*>(buf), n); o.setReduceFunction(plain<int32_t>(op)); break;
      case 5: o.setOutput(static_cast<int64_t*>(buf), n); o.setReduceFunction(plain<int64_t>(op)); break;
      case 6: o.setOutput(static_cast<int8_t*>(buf), n); o.setReduceFunction(plain<int8_t>(op)); break;
      default: o.setOutput(static_cast<uint8_t*>(buf), n); o.setReduceFunction(plain<uint8_t>(op)); break;
    }
    gloo::allreduce(o);
  });
}

int all_gather(void* comm, const void* in, void* out, size_t n, int dtype, char* err, size_t errlen) {
  return guarded(err, errlen, [&] {
    Comm& c = *static_cast<Comm*>(comm);
    gloo::AllgatherOptions o(c.context);
    o.setTimeout(c.timeout);
    const size_t bytes = n * elem_size(dtype);
    o.setInput(const_cast<char*>(static_cast<const char*>(in)), bytes);
    o.setOutput(static_cast<char*>(out), bytes * static_cast<size_t>(c.context->size));
    gloo::allgather(o);
  });
}

int broadcast(void* comm, void* buf, size_t n, int dtype, int root, char* err, size_t errlen) {
  return guarded(err, errlen, [&] {
    Comm& c = *static_cast<Comm*>(comm);
    gloo::BroadcastOptions o(c.context);
    o.setTimeout(c.timeout);
    o.setOutput(static_cast<char*>(buf), n * elem_size(dtype));
    o.setRoot(root);
    gloo::broadcast(o);
  });
}

int barrier(void* comm, char* err, size_t errlen) {
  return guarded(err, errlen, [&] {
    Comm& c = *static_cast<Comm*>(comm);
    gloo::BarrierOptions o(c.context);
    o.setTimeout(c.timeout);
    gloo::barrier(o);
  });
}

const tracer_gloo_api kApi = {TRACER_GLOO_ABI, &create, &destroy, &all_reduce, &all_gather, &broadcast, &barrier};

}  // namespace

extern "C" __attribute__((visibility("default"))) const tracer_gloo_api* tracer_gloo_plugin(void) { return &kApi; }
