// NCCL through dlopen: see nccl.h. The few types of nccl.h used here are declared below (their
// values are NCCL's stable ABI), so that building needs no NCCL headers.
#include "runtime/nccl.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <vector>

namespace tracer::rt::dist {
namespace {

using ncclResult = int;  // ncclSuccess = 0, ncclInProgress = 7
using ncclComm = void*;
constexpr int kUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
struct UniqueId {
  char internal[kUniqueIdBytes];
};

struct NcclApi {
  void* handle = nullptr;
  std::string path;
  ncclResult (*get_version)(int*) = nullptr;
  ncclResult (*get_unique_id)(UniqueId*) = nullptr;
  ncclResult (*comm_init_rank)(ncclComm*, int, UniqueId, int) = nullptr;
  ncclResult (*comm_destroy)(ncclComm) = nullptr;
  ncclResult (*comm_abort)(ncclComm) = nullptr;
  ncclResult (*comm_get_async_error)(ncclComm, ncclResult*) = nullptr;
  const char* (*get_error_string)(ncclResult) = nullptr;
  const char* (*get_last_error)(ncclComm) = nullptr;  // optional (NCCL 2.13+)
  ncclResult (*all_reduce)(const void*, void*, size_t, int, int, ncclComm, void*) = nullptr;
  ncclResult (*reduce_scatter)(const void*, void*, size_t, int, int, ncclComm, void*) = nullptr;
  ncclResult (*all_gather)(const void*, void*, size_t, int, ncclComm, void*) = nullptr;
  ncclResult (*broadcast)(const void*, void*, size_t, int, int, ncclComm, void*) = nullptr;
};

template <class F>
void bind(void* h, F& fn, const char* name, std::string* missing) {
  fn = reinterpret_cast<F>(dlsym(h, name));
  if (!fn) *missing += std::string(" ") + name;
}

// Loaded once per process and kept (as the driver is).
const NcclApi& load() {
  static NcclApi api;
  static std::string error;
  static bool tried = false;
  if (tried) {
    if (!api.handle) throw StoreError(error);
    return api;
  }
  tried = true;
  std::vector<std::string> names;
  const char* env = std::getenv("TRACER_NCCL_LIBRARY");
  if (env && *env) {
    names.push_back(env);
  } else {
    names = {"libnccl.so.2", "libnccl.so"};
    if (const char* h = std::getenv("CUDA_HOME")) names.push_back(std::string(h) + "/lib/libnccl.so.2");
    names.push_back("/usr/local/cuda/lib/libnccl.so.2");
    names.push_back("/usr/local/cuda/lib64/libnccl.so.2");
  }
  std::string tried_list;
  for (const auto& n : names) {
    if (void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      api.handle = h;
      api.path = n;
      break;
    }
    const char* e = dlerror();
    tried_list += "\n  " + n + ": " + (e ? e : "not found");
  }
  if (!api.handle) {
    error = std::string("NCCL (libnccl.so.2) was not found") + (env && *env ? " at $TRACER_NCCL_LIBRARY" : "") +
            ": collectives of CUDA tensors need it (install NCCL, or run on the CPU with --device cpu). Tried:" + tried_list;
    throw StoreError(error);
  }
  std::string missing;
  bind(api.handle, api.get_version, "ncclGetVersion", &missing);
  bind(api.handle, api.get_unique_id, "ncclGetUniqueId", &missing);
  bind(api.handle, api.comm_init_rank, "ncclCommInitRank", &missing);
  bind(api.handle, api.comm_destroy, "ncclCommDestroy", &missing);
  bind(api.handle, api.comm_abort, "ncclCommAbort", &missing);
  bind(api.handle, api.comm_get_async_error, "ncclCommGetAsyncError", &missing);
  bind(api.handle, api.get_error_string, "ncclGetErrorString", &missing);
  bind(api.handle, api.all_reduce, "ncclAllReduce", &missing);
  bind(api.handle, api.reduce_scatter, "ncclReduceScatter", &missing);
  bind(api.handle, api.all_gather, "ncclAllGather", &missing);
  bind(api.handle, api.broadcast, "ncclBroadcast", &missing);
  api.get_last_error = reinterpret_cast<decltype(api.get_last_error)>(dlsym(api.handle, "ncclGetLastError"));
  if (!missing.empty()) {
    error = "NCCL at " + api.path + " is too old (missing:" + missing + ")";
    api.handle = nullptr;
    throw StoreError(error);
  }
  return api;
}

int nccl_type(DType dt) {
  switch (dt) {
    case DType::i8: return 0;
    case DType::u8:
    case DType::b8: return 1;
    case DType::i32: return 2;
    case DType::i64: return 4;
    case DType::f16: return 6;
    case DType::f32: return 7;
    case DType::f64: return 8;
    case DType::bf16: return 9;
    default: break;
  }
  throw StoreError(std::string("NCCL has no collectives of ") + dtype_name(dt) + " tensors");
}

int nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return 0;
    case ReduceOp::max: return 2;
    case ReduceOp::min: return 3;
    case ReduceOp::avg: return 4;
  }
  return 0;
}

class Nccl final : public DeviceCommunicator {
 public:
  Nccl(const NcclApi& api, ncclComm comm, int rank, int size) : api_(api), comm_(comm), rank_(rank), size_(size) {}
  ~Nccl() override {
    // After a failure the communicator may be stuck in a collective: abort instead of waiting.
    ncclResult async = 0;
    if (api_.comm_get_async_error(comm_, &async) == 0 && async == 0) api_.comm_destroy(comm_);
    else api_.comm_abort(comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce(uint64_t in, uint64_t out, size_t count, DType dt, ReduceOp op, void* stream) override {
    if (op == ReduceOp::avg && !is_float(dt)) throw StoreError("NCCL: op 'avg' needs a floating-point tensor");
    call(api_.all_reduce(ptr(in), ptr(out), count, nccl_type(dt), nccl_op(op), comm_, stream), "all_reduce", count, dt);
  }
  void all_gather(uint64_t in, uint64_t out, size_t count, DType dt, void* stream) override {
    call(api_.all_gather(ptr(in), ptr(out), count, nccl_type(dt), comm_, stream), "all_gather", count, dt);
  }
  void reduce_scatter(uint64_t in, uint64_t out, size_t count, DType dt, ReduceOp op, void* stream) override {
    if (op == ReduceOp::avg && !is_float(dt)) throw StoreError("NCCL: op 'avg' needs a floating-point tensor");
    call(api_.reduce_scatter(ptr(in), ptr(out), count, nccl_type(dt), nccl_op(op), comm_, stream), "reduce_scatter", count, dt);
  }
  void broadcast(uint64_t buf, size_t count, DType dt, int root, void* stream) override {
    call(api_.broadcast(ptr(buf), ptr(buf), count, nccl_type(dt), root, comm_, stream), "broadcast", count, dt);
  }
  void check() override {
    ncclResult async = 0;
    if (api_.comm_get_async_error(comm_, &async) == 0 && async != 0 && async != 7)
      throw StoreError("NCCL, rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ": " + message(async));
  }

 private:
  static void* ptr(uint64_t p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }
  std::string message(ncclResult r) const {
    std::string m = api_.get_error_string(r);
    if (api_.get_last_error) {
      const char* last = api_.get_last_error(comm_);
      if (last && *last) m += " (" + std::string(last) + ")";
    }
    return m;
  }
  void call(ncclResult r, const char* what, size_t count, DType dt) {
    if (r == 0) return;
    throw StoreError("NCCL " + std::string(what) + " of " + std::to_string(count) + " " + dtype_name(dt) + " elements, rank " +
                     std::to_string(rank_) + " of " + std::to_string(size_) + ": " + message(r));
  }
  const NcclApi& api_;
  ncclComm comm_;
  int rank_, size_;
};

std::string hex(const std::string& bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

std::string unhex(const std::string& s) {
  std::string out;
  auto v = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i + 1 < s.size(); i += 2) out += static_cast<char>(v(s[i]) * 16 + v(s[i + 1]));
  return out;
}

}  // namespace

std::unique_ptr<DeviceCommunicator> open_nccl(StoreClient& store, const JobEnv& job, int ordinal, Millis timeout,
                                              const std::string& prefix) {
  const NcclApi& api = load();
  // NVLink multicast (NVLS) stays off unless the user asks for it: it needs fabric set-up the
  // machines lent here do not have, and a communicator that tries it can hang at init.
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  UniqueId id;
  std::memset(&id, 0, sizeof id);
  const std::string key = prefix + "/unique_id";
  if (job.rank == 0) {
    ncclResult r = api.get_unique_id(&id);
    if (r != 0) throw StoreError(std::string("NCCL: ncclGetUniqueId failed on rank 0: ") + api.get_error_string(r));
    store.set(key, hex(std::string(id.internal, sizeof id.internal)));
  } else {
    std::string v = unhex(store.get(key, timeout));
    if (v.size() != sizeof id.internal) throw StoreError("NCCL: the unique id rank 0 published is malformed");
    std::memcpy(id.internal, v.data(), sizeof id.internal);
  }
  // Every rank comes to the same point before the (blocking) init, so that a rank that never
  // does is named here, within the timeout, instead of every other rank hanging in NCCL.
  join(store, job, timeout, prefix + "/ready");
  ncclComm comm = nullptr;
  ncclResult r = api.comm_init_rank(&comm, job.world_size, id, job.rank);
  if (r != 0)
    throw StoreError("NCCL: ncclCommInitRank failed on rank " + std::to_string(job.rank) + " (cuda:" + std::to_string(ordinal) +
                     ") of " + std::to_string(job.world_size) + ": " + api.get_error_string(r));
  return std::make_unique<Nccl>(api, comm, job.rank, job.world_size);
}

}  // namespace tracer::rt::dist
