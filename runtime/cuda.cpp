// The CUDA driver and cuBLASLt through dlopen; see cuda.h. The entry points used are declared
// here with the C types of their headers (stable ABI), so the build needs no CUDA toolkit.
#include "runtime/cuda.h"
#include "runtime/cuda_driver.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <map>
#include <tuple>

namespace tracer::rt::cuda {

namespace {
using LtStatus = int;
using LtHandle = void*;
using LtDesc = void*;
using LtLayout = void*;
using LtPref = void*;

struct LtAlgo {
  uint64_t data[8];
};
struct LtHeuristic {
  LtAlgo algo;
  size_t workspace;
  LtStatus state;
  float waves;
  int reserved[4];
};

constexpr int kAttrSmCount = 16, kAttrCcMajor = 75, kAttrCcMinor = 76, kAttrSharedOptin = 97;
constexpr int kLtTransA = 3, kLtTransB = 4, kLtBatchCount = 5, kLtBatchOffset = 6, kLtPrefWorkspace = 1;
constexpr int kLtPrefAlignA = 5, kLtPrefAlignB = 6, kLtPrefAlignC = 7, kLtPrefAlignD = 8;
constexpr int kLtEpilogue = 7, kLtBiasPointer = 8, kLtEpilogueBias = 4;
constexpr int kLtEpilogueGelu = 32, kLtEpilogueAux = 128, kLtAuxPointer = 11, kLtAuxLd = 12;
constexpr int kLtEpilogueDGelu = 64 | 128, kLtEpilogueBGrad = 16;  // CUBLASLT_EPILOGUE_DGELU(_BGRAD): 192, 208
constexpr int kOpN = 0, kOpT = 1;
constexpr int kCompute32F = 68, kCompute64F = 70;
constexpr int kR32F = 0, kR64F = 1, kR16F = 2, kR16BF = 14;
constexpr size_t kWorkspace = 32u << 20;
constexpr int kCaptureRelaxed = 2;  // CU_STREAM_CAPTURE_MODE_RELAXED

void* open_first(const std::vector<std::string>& names, std::string* tried) {
  for (const auto& n : names) {
    if (void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    *tried += "\n  " + n + ": " + dlerror();
  }
  return nullptr;
}

template <class F>
bool bind(void* h, F& fn, const char* name, std::string* missing) {
  fn = reinterpret_cast<F>(dlsym(h, name));
  if (!fn) *missing += std::string(" ") + name;
  return fn != nullptr;
}
}  // namespace

struct LtApi {
  void* handle = nullptr;
  LtStatus (*create)(LtHandle*) = nullptr;
  LtStatus (*destroy)(LtHandle) = nullptr;
  LtStatus (*desc_create)(LtDesc*, int, int) = nullptr;
  LtStatus (*desc_destroy)(LtDesc) = nullptr;
  LtStatus (*desc_set)(LtDesc, int, const void*, size_t) = nullptr;
  LtStatus (*layout_create)(LtLayout*, int, uint64_t, uint64_t, int64_t) = nullptr;
  LtStatus (*layout_destroy)(LtLayout) = nullptr;
  LtStatus (*layout_set)(LtLayout, int, const void*, size_t) = nullptr;
  LtStatus (*pref_create)(LtPref*) = nullptr;
  LtStatus (*pref_destroy)(LtPref) = nullptr;
  LtStatus (*pref_set)(LtPref, int, const void*, size_t) = nullptr;
  LtStatus (*heuristic)(LtHandle, LtDesc, LtLayout, LtLayout, LtLayout, LtLayout, LtPref, int, LtHeuristic*, int*) = nullptr;
  LtStatus (*matmul)(LtHandle, LtDesc, const void*, const void*, LtLayout, const void*, LtLayout, const void*,
                     const void*, LtLayout, void*, LtLayout, const LtAlgo*, void*, size_t, CUstream) = nullptr;
  size_t (*get_version)() = nullptr;
};

// A cuBLASLt matmul set up once per problem (dtype, transposes, sizes, batch strides, epilogue,
// operand alignments): its descriptors and the heuristics' algorithm, reused by every call.
// The heuristic query costs tens of microseconds of host time, which every call paid before.
namespace {
struct LtPlan {
  LtApi* lt = nullptr;
  LtDesc desc = nullptr;
  LtLayout la = nullptr, lb = nullptr, lc = nullptr;
  LtAlgo algo{}, first{};  // the algorithm used; the heuristics' first
  bool usable = false;
  std::vector<LtAlgo> candidates;  // the heuristics' others, in their order, until tuned
  std::string kept, kept_text;      // the file that keeps the tuned choice ("": none), its first line
  LtPlan() = default;
  LtPlan(LtPlan&& o) noexcept
      : lt(o.lt), desc(o.desc), la(o.la), lb(o.lb), lc(o.lc), algo(o.algo), first(o.first), usable(o.usable),
        candidates(std::move(o.candidates)), kept(std::move(o.kept)), kept_text(std::move(o.kept_text)) {
    o.desc = nullptr, o.la = o.lb = o.lc = nullptr;
  }
  LtPlan(const LtPlan&) = delete;
  ~LtPlan() {
    if (la) lt->layout_destroy(la);
    if (lb) lt->layout_destroy(lb);
    if (lc) lt->layout_destroy(lc);
    if (desc) lt->desc_destroy(desc);
  }
};
}  // namespace

struct Device::LtPlans {
  using Key = std::tuple<int, bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, int, bool,
                         uint32_t, uint32_t, uint32_t, uint32_t, uint32_t>;
  std::map<Key, LtPlan> plans;
};

namespace {
std::shared_ptr<Api> load_driver(std::string* why) {
  std::string tried;
  // TRACER_CUDA_DRIVER names the driver library to use instead (and only it).
  const char* forced = std::getenv("TRACER_CUDA_DRIVER");
  void* h = forced ? open_first({forced}, &tried) : open_first({"libcuda.so.1", "libcuda.so"}, &tried);
  if (!h) {
    *why = "no CUDA driver (libcuda.so.1) on this machine; run on the CPU (--device cpu). Tried:" + tried;
    return nullptr;
  }
  auto a = std::make_shared<Api>();
  a->handle = h;
  std::string missing;
  bind(h, a->init, "cuInit", &missing);
  bind(h, a->driver_version, "cuDriverGetVersion", &missing);
  bind(h, a->device_count, "cuDeviceGetCount", &missing);
  bind(h, a->device_get, "cuDeviceGet", &missing);
  bind(h, a->device_name, "cuDeviceGetName", &missing);
  bind(h, a->device_attr, "cuDeviceGetAttribute", &missing);
  bind(h, a->primary_retain, "cuDevicePrimaryCtxRetain", &missing);
  bind(h, a->primary_release, "cuDevicePrimaryCtxRelease_v2", &missing);
  bind(h, a->ctx_set, "cuCtxSetCurrent", &missing);
  bind(h, a->mem_alloc, "cuMemAlloc_v2", &missing);
  bind(h, a->mem_free, "cuMemFree_v2", &missing);
  bind(h, a->dtoh_async, "cuMemcpyDtoHAsync_v2", &missing);
  bind(h, a->dtod_async, "cuMemcpyDtoDAsync_v2", &missing);
  bind(h, a->module_load, "cuModuleLoadData", &missing);
  bind(h, a->module_unload, "cuModuleUnload", &missing);
  bind(h, a->module_function, "cuModuleGetFunction", &missing);
  bind(h, a->launch, "cuLaunchKernel", &missing);
  bind(h, a->stream_create, "cuStreamCreate", &missing);
  bind(h, a->stream_destroy, "cuStreamDestroy_v2", &missing);
  bind(h, a->stream_sync, "cuStreamSynchronize", &missing);
  bind(h, a->event_create, "cuEventCreate", &missing);
  bind(h, a->event_destroy, "cuEventDestroy_v2", &missing);
  bind(h, a->event_record, "cuEventRecord", &missing);
  bind(h, a->event_sync, "cuEventSynchronize", &missing);
  std::string before = missing;
  bind(h, a->event_elapsed, "cuEventElapsedTime_v2", &missing);
  if (!a->event_elapsed) {
    missing = before;  // older drivers name it without the suffix
    bind(h, a->event_elapsed, "cuEventElapsedTime", &missing);
  }
  bind(h, a->error_string, "cuGetErrorString", &missing);
  bind(h, a->error_name, "cuGetErrorName", &missing);
  bind(h, a->htod_async, "cuMemcpyHtoDAsync_v2", &missing);
  bind(h, a->begin_capture, "cuStreamBeginCapture_v2", &missing);
  bind(h, a->end_capture, "cuStreamEndCapture", &missing);
  bind(h, a->graph_instantiate, "cuGraphInstantiateWithFlags", &missing);
  bind(h, a->graph_launch, "cuGraphLaunch", &missing);
  bind(h, a->graph_exec_destroy, "cuGraphExecDestroy", &missing);
  bind(h, a->graph_destroy, "cuGraphDestroy", &missing);
  bind(h, a->graph_node_count, "cuGraphGetNodes", &missing);
  bind(h, a->func_set_attr, "cuFuncSetAttribute", &missing);
  a->launch_host_func = reinterpret_cast<decltype(a->launch_host_func)>(dlsym(h, "cuLaunchHostFunc"));
  a->stream_wait_event = reinterpret_cast<decltype(a->stream_wait_event)>(dlsym(h, "cuStreamWaitEvent"));
  a->host_alloc = reinterpret_cast<decltype(a->host_alloc)>(dlsym(h, "cuMemHostAlloc"));
  a->host_free = reinterpret_cast<decltype(a->host_free)>(dlsym(h, "cuMemFreeHost"));
  a->event_query = reinterpret_cast<decltype(a->event_query)>(dlsym(h, "cuEventQuery"));
  if (!missing.empty()) {
    *why = "the CUDA driver is too old (missing:" + missing + ")";
    return nullptr;
  }
  return a;
}

std::shared_ptr<LtApi> load_lt(std::string* why) {
  std::string tried;
  std::vector<std::string> names = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
  if (const char* h = std::getenv("CUDA_HOME")) names.push_back(std::string(h) + "/lib64/libcublasLt.so");
  names.push_back("/usr/local/cuda/lib64/libcublasLt.so");
  void* h = open_first(names, &tried);
  if (!h) {
    *why = "cuBLASLt (libcublasLt.so) was not found. Tried:" + tried;
    return nullptr;
  }
  auto a = std::make_shared<LtApi>();
  a->handle = h;
  std::string missing;
  bind(h, a->create, "cublasLtCreate", &missing);
  bind(h, a->destroy, "cublasLtDestroy", &missing);
  bind(h, a->desc_create, "cublasLtMatmulDescCreate", &missing);
  bind(h, a->desc_destroy, "cublasLtMatmulDescDestroy", &missing);
  bind(h, a->desc_set, "cublasLtMatmulDescSetAttribute", &missing);
  bind(h, a->layout_create, "cublasLtMatrixLayoutCreate", &missing);
  bind(h, a->layout_destroy, "cublasLtMatrixLayoutDestroy", &missing);
  bind(h, a->layout_set, "cublasLtMatrixLayoutSetAttribute", &missing);
  bind(h, a->pref_create, "cublasLtMatmulPreferenceCreate", &missing);
  bind(h, a->pref_destroy, "cublasLtMatmulPreferenceDestroy", &missing);
  bind(h, a->pref_set, "cublasLtMatmulPreferenceSetAttribute", &missing);
  bind(h, a->heuristic, "cublasLtMatmulAlgoGetHeuristic", &missing);
  bind(h, a->matmul, "cublasLtMatmul", &missing);
  bind(h, a->get_version, "cublasLtGetVersion", &missing);
  if (!missing.empty()) {
    *why = "cuBLASLt lacks:" + missing;
    return nullptr;
  }
  return a;
}

size_t round_size(size_t n) { return allocation_size(n); }
}  // namespace

size_t allocation_size(size_t n) {
  // 512-byte granules up to 1 MiB, then 2 MiB: cached blocks are reused by exact rounded size.
  if (n == 0) n = 1;
  if (n <= (1u << 20)) return (n + 511) & ~size_t(511);
  return (n + (2u << 20) - 1) & ~size_t((2u << 20) - 1);
}

void Device::check(int rc, const char* what) const {
  if (rc == 0) return;
  const char* name = nullptr;
  const char* msg = nullptr;
  if (api_ && api_->error_name) api_->error_name(rc, &name);
  if (api_ && api_->error_string) api_->error_string(rc, &msg);
  throw CudaError(std::string(what) + " failed: " + (name ? name : "error " + std::to_string(rc)) + (msg ? std::string(" (") + msg + ")" : ""));
}

std::unique_ptr<Device> Device::open(int ordinal, std::string* why) {
  std::string reason;
  auto api = load_driver(&reason);
  if (!api) {
    *why = reason;
    return nullptr;
  }
  std::unique_ptr<Device> d(new Device());
  d->api_ = api;
  try {
    int rc = api->init(0);
    if (rc != 0) {
      const char* msg = nullptr;
      api->error_string(rc, &msg);
      *why = std::string("the CUDA driver found no usable GPU (cuInit: ") + (msg ? msg : std::to_string(rc)) + ")";
      return nullptr;
    }
    d->check(api->driver_version(&d->driver_version_), "cuDriverGetVersion");
    if (d->driver_version_ < 12000) {
      *why = "the CUDA driver is too old (version " + std::to_string(d->driver_version_ / 1000) + "." +
             std::to_string(d->driver_version_ % 1000 / 10) + "; 12.0 or newer is needed)";
      return nullptr;
    }
    int count = 0;
    d->check(api->device_count(&count), "cuDeviceGetCount");
    if (ordinal < 0 || ordinal >= count) {
      *why = "there is no device cuda:" + std::to_string(ordinal) + " (" + std::to_string(count) + " found)";
      return nullptr;
    }
    d->ordinal_ = ordinal;
    d->check(api->device_get(&d->dev_, ordinal), "cuDeviceGet");
    char name[256] = {0};
    d->check(api->device_name(name, sizeof name, d->dev_), "cuDeviceGetName");
    d->name_ = name;
    d->check(api->device_attr(&d->sm_count_, kAttrSmCount, d->dev_), "cuDeviceGetAttribute");
    d->check(api->device_attr(&d->cc_major_, kAttrCcMajor, d->dev_), "cuDeviceGetAttribute");
    d->check(api->device_attr(&d->cc_minor_, kAttrCcMinor, d->dev_), "cuDeviceGetAttribute");
    d->check(api->device_attr(&d->shared_optin_, kAttrSharedOptin, d->dev_), "cuDeviceGetAttribute");
    d->check(api->primary_retain(&d->ctx_, d->dev_), "cuDevicePrimaryCtxRetain");
    d->check(api->ctx_set(d->ctx_), "cuCtxSetCurrent");
    // Non-blocking: no implicit ordering against the legacy default stream, which tracer never
    // uses (every copy is ordered on this stream), and which would cost each launch a check.
    constexpr unsigned kStreamNonBlocking = 1;  // CU_STREAM_NON_BLOCKING
    d->check(api->stream_create(&d->stream_, kStreamNonBlocking), "cuStreamCreate");
  } catch (const CudaError& e) {
    *why = e.what();
    return nullptr;
  }
  return d;
}

Device::~Device() {
  if (!api_) return;
  // Nothing here throws: after a sticky CUDA error every call fails, and the codes are ignored.
  api_->ctx_set(ctx_);
  if (stream_) api_->stream_sync(stream_);
  lt_plans_.reset();  // their descriptors before the library's handle
  for (auto* list : {&staging_free_, &staging_busy_})
    for (const Staging& b : *list) {
      api_->host_free(b.host);
      api_->event_destroy(static_cast<CUevent>(b.event));
    }
  if (lt_handle_) lt_->destroy(lt_handle_);
  if (workspace_) api_->mem_free(workspace_);
  for (auto& [n, ptrs] : free_)
    for (DevPtr p : ptrs) api_->mem_free(p);
  free_.clear();
  for (auto& [k, m] : modules_) api_->module_unload(m);
  if (comm_stream_) {
    api_->stream_sync(comm_stream_);
    api_->stream_destroy(comm_stream_);
  }
  if (stream_) api_->stream_destroy(stream_);
  if (ctx_) api_->primary_release(dev_);
}

std::string Device::arch() const { return "sm_" + std::to_string(cc_major_) + std::to_string(cc_minor_); }

DevPtr Device::allocate(size_t bytes) {
  size_t n = round_size(bytes ? bytes : 1);
  auto& cached = free_[n];
  DevPtr p = 0;
  if (!cached.empty()) {
    p = cached.back();
    cached.pop_back();
  } else {
    int rc = api_->mem_alloc(&p, n);
    if (rc != 0 && !capturing_) {  // (emptying the cache synchronizes: not inside a capture)
      empty_cache();  // give cached blocks back to the driver and try once more
      rc = api_->mem_alloc(&p, n);
    }
    if (rc != 0)
      throw CudaError("out of device memory: allocating " + std::to_string(n) + " bytes with " +
                      std::to_string(current_) + " in use on cuda:" + std::to_string(ordinal_) + " (" + name_ + ")");
    reserved_ += n;
  }
  current_ += n;
  if (current_ > peak_) peak_ = current_;
  if (capturing_) captured_[p] = n;
  return p;
}

void Device::release(DevPtr p, size_t bytes) {
  size_t n = round_size(bytes ? bytes : 1);
  current_ -= n;
  if (capturing_) captured_[p] = n;  // a graph may read it when replayed: the graph owns it now
  auto pin = pinned_.find(p);
  if (pin != pinned_.end()) {
    pin->second.live = false;  // owned by a graph: kept for its replays
    return;
  }
  free_[n].push_back(p);
}

// ---- graphs ----

void Device::begin_capture() {
  if (capturing_) throw CudaError("a capture is already running");
  captured_.clear();
  check(api_->begin_capture(stream_, kCaptureRelaxed), "cuStreamBeginCapture");
  capturing_ = true;
}

std::unique_ptr<Graph> Device::end_capture(bool keep) {
  if (!capturing_) throw CudaError("no capture is running");
  capturing_ = false;
  CUgraph g = nullptr;
  int rc = api_->end_capture(stream_, &g);
  auto blocks = std::move(captured_);
  captured_.clear();
  // Every block the captured work touched belongs to the graph from now on, reused or not:
  // out of the free lists, and kept off them when its holder lets go.
  auto adopt = [&](std::unique_ptr<Graph>& graph) {
    for (const auto& [p, n] : blocks) {
      auto pin = pinned_.find(p);
      if (pin != pinned_.end()) {
        pin->second.owners++;  // already another graph's (never in the free lists)
      } else {
        auto& list = free_[n];
        auto it = std::find(list.begin(), list.end(), p);
        bool live = it == list.end();
        if (!live) list.erase(it);
        pinned_[p] = Pin{n, live, 1};
      }
      if (graph) {
        graph->blocks_.emplace_back(p, n);
        graph->bytes_ += n;
      }
    }
  };
  std::unique_ptr<Graph> none;
  if (rc != 0 || !g || !keep) {
    if (g) api_->graph_destroy(g);
    // A failed capture executed nothing; its blocks stay where they are (free or held).
    if (rc != 0 && keep) check(rc, "cuStreamEndCapture");
    return none;
  }
  std::unique_ptr<Graph> graph(new Graph());
  graph->dev_ = this;
  graph->graph_ = g;
  size_t nodes = 0;
  if (api_->graph_node_count(g, nullptr, &nodes) == 0) graph->nodes_ = nodes;
  int ri = api_->graph_instantiate(&graph->exec_, g, 0);
  if (ri != 0) {
    graph->exec_ = nullptr;
    graph.reset();  // destroys g
    check(ri, "cuGraphInstantiate");
  }
  adopt(graph);
  return graph;
}

void Device::launch_graph(Graph& g) { check(api_->graph_launch(g.exec_, stream_), "cuGraphLaunch"); }

void Device::release_graph(Graph& g) {
  if (g.exec_) api_->graph_exec_destroy(g.exec_);
  if (g.graph_) api_->graph_destroy(g.graph_);
  g.exec_ = g.graph_ = nullptr;
  for (const auto& [p, n] : g.blocks_) {
    auto it = pinned_.find(p);
    if (it == pinned_.end()) continue;
    if (--it->second.owners > 0) continue;
    bool live = it->second.live;
    pinned_.erase(it);
    if (!live) free_[n].push_back(p);  // a live block returns when its holder lets go
  }
  g.blocks_.clear();
}

Graph::~Graph() {
  if (dev_) {
    // Replays may still run: wait for them before the memory is reused.
    dev_->api_->stream_sync(dev_->stream_);
    dev_->release_graph(*this);
  }
}

void Device::empty_cache() {
  synchronize();
  for (auto& [n, ptrs] : free_)
    for (DevPtr p : ptrs) {
      api_->mem_free(p);
      reserved_ -= n;
    }
  free_.clear();
}

void* Device::function(const std::string& key, const std::string& cubin, const std::string& symbol) {
  auto f = functions_.find(key + "/" + symbol);
  if (f != functions_.end()) return f->second;
  auto m = modules_.find(key);
  if (m == modules_.end()) {
    CUmodule mod = nullptr;
    check(api_->module_load(&mod, cubin.data()), ("cuModuleLoadData (" + symbol + ")").c_str());
    m = modules_.emplace(key, mod).first;
  }
  CUfunction fn = nullptr;
  check(api_->module_function(&fn, m->second, symbol.c_str()), ("cuModuleGetFunction (" + symbol + ")").c_str());
  functions_[key + "/" + symbol] = fn;
  return fn;
}

void Device::launch(void* fn, unsigned grid, unsigned block, void** args) {
  auto t0 = std::chrono::steady_clock::now();
  int rc = api_->launch(fn, grid, 1, 1, block, 1, 1, 0, stream_, args, nullptr);
  launch_api_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  check(rc, "cuLaunchKernel");
}

void Device::launch(void* fn, unsigned grid_x, unsigned grid_y, unsigned block, unsigned shared_bytes, void** args) {
  if (shared_bytes > 48u * 1024) {
    // Above 48 KiB a kernel must opt in to dynamic shared memory (once per function).
    auto it = shared_opt_in_.find(fn);
    if (it == shared_opt_in_.end() || it->second < shared_bytes) {
      constexpr int kMaxDynamicShared = 8;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
      check(api_->func_set_attr(fn, kMaxDynamicShared, static_cast<int>(shared_bytes)), "cuFuncSetAttribute");
      shared_opt_in_[fn] = shared_bytes;
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  int rc = api_->launch(fn, grid_x, grid_y, 1, block, 1, 1, shared_bytes, stream_, args, nullptr);
  launch_api_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  check(rc, "cuLaunchKernel");
}

void Device::make_current() { check(api_->ctx_set(ctx_), "cuCtxSetCurrent"); }

void Device::synchronize() {
  if (stream_) check(api_->stream_sync(stream_), "cuStreamSynchronize");
  if (comm_stream_) check(api_->stream_sync(comm_stream_), "cuStreamSynchronize");
}

namespace {
constexpr unsigned kCommStreamNonBlocking = 1;  // CU_STREAM_NON_BLOCKING
}  // namespace

void* Device::comm_stream() {
  if (!comm_stream_) {
    if (!api_->stream_wait_event) throw CudaError("the CUDA driver has no cuStreamWaitEvent: a communication stream needs it");
    check(api_->stream_create(&comm_stream_, kCommStreamNonBlocking), "cuStreamCreate");
  }
  return comm_stream_;
}

namespace {
// The host function of a timing gate: holds the stream until the host has issued the work (or
// 50 ms have passed: the work synchronized with the stream itself, and would wait forever).
struct TimingGate {
  std::atomic<bool> open{false};
  std::atomic<bool> timed_out{false};
  static void wait(void* p) {
    auto* g = static_cast<TimingGate*>(p);
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    while (!g->open.load(std::memory_order_acquire)) {
      if (std::chrono::steady_clock::now() > until) {
        g->timed_out.store(true);
        return;
      }
    }
  }
};
}  // namespace

double Device::time_ms(const std::function<void()>& work, bool gate, bool* gate_timed_out) {
  CUevent a = nullptr, b = nullptr;
  check(api_->event_create(&a, 0), "cuEventCreate");
  check(api_->event_create(&b, 0), "cuEventCreate");
  TimingGate g;
  bool gated = gate && api_->launch_host_func && !capturing_ &&
               api_->launch_host_func(stream_, &TimingGate::wait, &g) == 0;
  auto finish = [&] {  // the gate must be open and passed before g goes out of scope
    g.open.store(true, std::memory_order_release);
    if (gated) api_->stream_sync(stream_);
  };
  try {
    check(api_->event_record(a, stream_), "cuEventRecord");
    work();
    check(api_->event_record(b, stream_), "cuEventRecord");
  } catch (...) {
    finish();
    api_->event_destroy(a);
    api_->event_destroy(b);
    throw;
  }
  finish();
  check(api_->event_sync(b), "cuEventSynchronize");
  float ms = 0;
  check(api_->event_elapsed(&ms, a, b), "cuEventElapsedTime");
  api_->event_destroy(a);
  api_->event_destroy(b);
  if (gate_timed_out) *gate_timed_out = g.timed_out.load();
  return ms;
}

void Device::gemm(DType dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, DevPtr a, DevPtr b, DevPtr c,
                  int64_t batch, int64_t stride_a, int64_t stride_b, int64_t stride_c, DevPtr bias) {
  lt_matmul(dt, ta, tb, m, n, k, a, b, c, batch, stride_a, stride_b, stride_c, bias, LtEpi::None, 0);
}

bool Device::gemm_gelu(DType dt, int64_t m, int64_t n, int64_t k, DevPtr a, DevPtr b, DevPtr c, DevPtr bias, DevPtr aux) {
  if (aux && n % 8 != 0) return false;  // the epilogue's aux leading dimension must be a multiple of 8
  return lt_matmul(dt, false, true, m, n, k, a, b, c, 1, 0, 0, 0, bias, LtEpi::Gelu, aux);
}

bool Device::gemm_dgelu(DType dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, DevPtr a, DevPtr b, DevPtr c, DevPtr aux,
                        DevPtr bgrad) {
  if (!aux || n % 8 != 0) return false;  // GELU's input is read with leading dimension n: a multiple of 8
  return lt_matmul(dt, ta, tb, m, n, k, a, b, c, 1, 0, 0, 0, bgrad, LtEpi::DGelu, aux);
}

bool Device::lt_matmul(DType dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, DevPtr a, DevPtr b, DevPtr c,
                       int64_t batch, int64_t stride_a, int64_t stride_b, int64_t stride_c, DevPtr bias, LtEpi epi,
                       DevPtr aux) {
  const bool gelu = epi == LtEpi::Gelu, dgelu = epi == LtEpi::DGelu;
  if (!lt_handle_) {
    // Set up into locals and commit only when everything worked, so a failure can be retried.
    std::string why;
    std::shared_ptr<LtApi> lt = lt_ ? lt_ : load_lt(&why);
    if (!lt) throw CudaError(why);
    LtHandle handle = nullptr;
    if (lt->create(&handle) != 0) throw CudaError("cublasLtCreate failed");
    DevPtr ws = 0;
    int rc = api_->mem_alloc(&ws, kWorkspace);
    if (rc != 0) {
      empty_cache();
      rc = api_->mem_alloc(&ws, kWorkspace);
    }
    if (rc != 0) {
      lt->destroy(handle);
      check(rc, "cuMemAlloc (cuBLASLt workspace)");
    }
    lt_ = lt;
    lt_handle_ = handle;
    workspace_ = ws;
    workspace_bytes_ = kWorkspace;
  }
  int type, compute, scale;
  switch (dt) {
    case DType::bf16: type = kR16BF, compute = kCompute32F, scale = kR32F; break;
    case DType::f16: type = kR16F, compute = kCompute32F, scale = kR32F; break;
    case DType::f32: type = kR32F, compute = kCompute32F, scale = kR32F; break;
    case DType::f64: type = kR64F, compute = kCompute64F, scale = kR64F; break;
    default: throw CudaError(std::string("matmul on the GPU does not support ") + dtype_name(dt));
  }
  auto lt_check = [](LtStatus s, const char* what) {
    if (s != 0) throw CudaError(std::string(what) + " failed (cuBLAS status " + std::to_string(s) + ")");
  };
  // The alignment the heuristics may assume of each operand (they assume 256 bytes unless told):
  // a view's data can start anywhere in its buffer.
  auto align = [](DevPtr p) -> uint32_t {
    if (!p) return 256;
    uint32_t al = 1;
    while (al < 256 && (p & (2 * al - 1)) == 0) al *= 2;
    return al;
  };
  uint32_t align_a = align(a), align_b = align(b), align_c = align(c);
  LtPlans::Key key{static_cast<int>(dt), ta, tb, m, n, k, batch, stride_a, stride_b, stride_c, bias != 0, static_cast<int>(epi), aux != 0,
                   align_a, align_b, align_c, align(bias), align(aux)};
  if (!lt_plans_) lt_plans_ = std::make_unique<LtPlans>();
  auto it = lt_plans_->plans.find(key);
  if (it == lt_plans_->plans.end()) {
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: B first.
    LtPlan plan;
    plan.lt = lt_.get();
    LtPref pref = nullptr;
    struct PrefGuard {
      LtApi* lt;
      LtPref* pref;
      ~PrefGuard() {
        if (*pref) lt->pref_destroy(*pref);
      }
    } pref_guard{lt_.get(), &pref};
    lt_check(lt_->desc_create(&plan.desc, compute, scale), "cublasLtMatmulDescCreate");
    int op_first = tb ? kOpT : kOpN, op_second = ta ? kOpT : kOpN;
    lt_check(lt_->desc_set(plan.desc, kLtTransA, &op_first, sizeof op_first), "cublasLtMatmulDescSetAttribute");
    lt_check(lt_->desc_set(plan.desc, kLtTransB, &op_second, sizeof op_second), "cublasLtMatmulDescSetAttribute");
    if (bias || epi != LtEpi::None) {
      // Column-major D is C^T: its rows are C's columns, the n output features the bias runs along
      // (and the bias gradient of DGELU_BGRAD sums along: over C's rows).
      int32_t epilogue = dgelu ? kLtEpilogueDGelu | (bias ? kLtEpilogueBGrad : 0)
                               : (bias ? kLtEpilogueBias : 0) | (gelu ? kLtEpilogueGelu : 0) | (aux ? kLtEpilogueAux : 0);
      lt_check(lt_->desc_set(plan.desc, kLtEpilogue, &epilogue, sizeof epilogue), "cublasLtMatmulDescSetAttribute (epilogue)");
      if (aux) {  // GELU's input (written by GELU, read by DGELU), stored like D: column-major [n, m], leading dimension n
        int64_t ld = n;
        lt_check(lt_->desc_set(plan.desc, kLtAuxLd, &ld, sizeof ld), "cublasLtMatmulDescSetAttribute (aux ld)");
      }
    }
    // Stored column-major shapes: B is [n, k] (ld n), or [k, n] (ld k) when tb; A likewise.
    lt_check(lt_->layout_create(&plan.la, type, tb ? k : n, tb ? n : k, tb ? k : n), "cublasLtMatrixLayoutCreate");
    lt_check(lt_->layout_create(&plan.lb, type, ta ? m : k, ta ? k : m, ta ? m : k), "cublasLtMatrixLayoutCreate");
    lt_check(lt_->layout_create(&plan.lc, type, n, m, n), "cublasLtMatrixLayoutCreate");
    if (batch > 1) {
      int32_t bc = static_cast<int32_t>(batch);
      for (auto [l, st] : {std::pair<LtLayout, int64_t>{plan.la, stride_b}, {plan.lb, stride_a}, {plan.lc, stride_c}}) {
        lt_check(lt_->layout_set(l, kLtBatchCount, &bc, sizeof bc), "cublasLtMatrixLayoutSetAttribute");
        lt_check(lt_->layout_set(l, kLtBatchOffset, &st, sizeof st), "cublasLtMatrixLayoutSetAttribute");
      }
    }
    lt_check(lt_->pref_create(&pref), "cublasLtMatmulPreferenceCreate");
    uint64_t ws = workspace_bytes_;
    lt_check(lt_->pref_set(pref, kLtPrefWorkspace, &ws, sizeof ws), "cublasLtMatmulPreferenceSetAttribute");
    // cuBLASLt's A is our B (see above).
    for (auto [attr, al] : {std::pair<int, uint32_t>{kLtPrefAlignA, align_b}, {kLtPrefAlignB, align_a}, {kLtPrefAlignC, align_c},
                            {kLtPrefAlignD, align_c}})
      lt_check(lt_->pref_set(pref, attr, &al, sizeof al), "cublasLtMatmulPreferenceSetAttribute (alignment)");
    if (tune_ < 0) {
      const char* t = std::getenv("TRACER_MATMUL_TUNE");
      tune_ = t && std::string(t) == "0" ? 0 : 1;
    }
    // TRACER_MATMUL_TUNE_CANDIDATES: how many of the heuristics' candidates tuning times (8).
    int wanted = 1;
    if (tune_) {
      wanted = 8;
      if (const char* c = std::getenv("TRACER_MATMUL_TUNE_CANDIDATES")) wanted = std::max(1, std::min(64, std::atoi(c)));
    }
    std::vector<LtHeuristic> h(static_cast<size_t>(wanted));
    int found = 0;
    LtStatus hs = lt_->heuristic(lt_handle_, plan.desc, plan.la, plan.lb, plan.lc, plan.lc, pref, wanted, h.data(), &found);
    if (epi == LtEpi::None) {
      lt_check(hs, "cublasLtMatmulAlgoGetHeuristic");
      if (found == 0) throw CudaError("cuBLASLt has no algorithm for this matmul");
    }
    plan.usable = hs == 0 && found > 0;  // a GELU or DGELU product without one runs apart, every time
    plan.algo = plan.first = h[0].algo;
    for (int j = 1; j < found; ++j)
      if (h[j].state == 0) plan.candidates.push_back(h[j].algo);
    // A choice tuned by an earlier run on this device and cuBLASLt (the same algorithm, so the
    // same numbers, run to run): a line naming the problem, then the algorithm's bytes.
    if (!plan.candidates.empty() && !matmul_cache_dir_.empty()) {
      std::ostringstream name;
      name << "cublaslt:" << arch() << ":" << lt_->get_version() << ":" << std::get<0>(key);
      for (int64_t v : {static_cast<int64_t>(ta), static_cast<int64_t>(tb), m, n, k, batch, stride_a, stride_b, stride_c})
        name << "," << v;
      name << "," << (bias != 0) << static_cast<int>(epi) << (aux != 0) << "," << align_a << "," << align_b << "," << align_c << ","
           << align(bias) << "," << align(aux);
      const std::string text = name.str();
      uint64_t hash = 1469598103934665603ULL;
      for (unsigned char ch : text) hash = (hash ^ ch) * 1099511628211ULL;
      char file[48];
      std::snprintf(file, sizeof file, "/cublaslt-%016llx.algo", static_cast<unsigned long long>(hash));
      plan.kept = matmul_cache_dir_ + file;
      std::ifstream in(plan.kept, std::ios::binary);
      std::string first;
      LtAlgo kept{};
      if (in && std::getline(in, first) && first == text && in.read(reinterpret_cast<char*>(&kept), sizeof kept) &&
          in.peek() == std::char_traits<char>::eof()) {
        plan.algo = kept;
        plan.candidates.clear();
        tuning_.loaded++;
      }
      plan.kept_text = text;
    }
    it = lt_plans_->plans.emplace(key, std::move(plan)).first;
  }
  LtPlan& plan = it->second;
  if (!plan.usable) return false;
  if (bias) {  // the bias, or DGELU_BGRAD's output
    const void* bias_ptr = reinterpret_cast<const void*>(bias);
    lt_check(lt_->desc_set(plan.desc, kLtBiasPointer, &bias_ptr, sizeof bias_ptr), "cublasLtMatmulDescSetAttribute (bias)");
  }
  if (aux) {
    const void* aux_ptr = reinterpret_cast<const void*>(aux);
    lt_check(lt_->desc_set(plan.desc, kLtAuxPointer, &aux_ptr, sizeof aux_ptr), "cublasLtMatmulDescSetAttribute (aux)");
  }
  float alpha32 = 1, beta32 = 0;
  double alpha64 = 1, beta64 = 0;
  const void* alpha = dt == DType::f64 ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = dt == DType::f64 ? static_cast<const void*>(&beta64) : &beta32;
  auto run = [&](const LtAlgo* algo) {
    return lt_->matmul(lt_handle_, plan.desc, alpha, reinterpret_cast<const void*>(b), plan.la, reinterpret_cast<const void*>(a), plan.lb,
                       beta, reinterpret_cast<const void*>(c), plan.lc, reinterpret_cast<void*>(c), plan.lc, algo,
                       reinterpret_cast<void*>(workspace_), workspace_bytes_, stream_);
  };
  if (!plan.candidates.empty() && !capturing_) {
    // Tuning: each candidate once to warm up, then 5 times between events; C (and GELU's aux,
    // DGELU's bias gradient) are only written, so the call below gives the result. A candidate
    // must win by 2% to replace the heuristics' first (timing noise is about 1%).
    auto t0 = std::chrono::steady_clock::now();
    CUevent e0 = nullptr, e1 = nullptr;
    check(api_->event_create(&e0, 0), "cuEventCreate");
    check(api_->event_create(&e1, 0), "cuEventCreate");
    auto time_algo = [&](const LtAlgo* algo) -> double {
      if (run(algo) != 0) return -1;
      check(api_->event_record(e0, stream_), "cuEventRecord");
      for (int r = 0; r < 5; ++r)
        if (run(algo) != 0) return -1;
      check(api_->event_record(e1, stream_), "cuEventRecord");
      check(api_->event_sync(e1), "cuEventSynchronize");
      float ms = 0;
      check(api_->event_elapsed(&ms, e0, e1), "cuEventElapsedTime");
      return ms / 5;
    };
    double first = time_algo(&plan.algo), best = first;
    size_t won = plan.candidates.size();
    for (size_t j = 0; j < plan.candidates.size() && first > 0; ++j) {
      double t = time_algo(&plan.candidates[j]);
      if (t > 0 && t < best && t < first * 0.98) best = t, won = j;
    }
    api_->event_destroy(e0);
    api_->event_destroy(e1);
    tuning_.problems++;
    if (won < plan.candidates.size()) {
      plan.algo = plan.candidates[won];
      tuning_.changed++;
      tuning_.saved_ms += first - best;
    }
    plan.candidates.clear();
    if (!plan.kept.empty()) {  // written whole, then renamed: a reader never sees half a file
      std::error_code ec;
      std::filesystem::create_directories(matmul_cache_dir_, ec);
      const std::string tmp = plan.kept + ".tmp" + std::to_string(reinterpret_cast<uintptr_t>(this));
      {
        std::ofstream out(tmp, std::ios::binary);
        out << plan.kept_text << "\n";
        out.write(reinterpret_cast<const char*>(&plan.algo), sizeof plan.algo);
      }
      if (std::rename(tmp.c_str(), plan.kept.c_str()) != 0) std::remove(tmp.c_str());
    }
    tuning_.ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  LtStatus st = run(&plan.algo);
  if (st != 0 && std::memcmp(&plan.algo, &plan.first, sizeof plan.algo) != 0) {
    // A kept choice this cuBLASLt no longer runs: the heuristics' first from now on.
    plan.algo = plan.first;
    st = run(&plan.algo);
  }
  if (epi != LtEpi::None && st != 0) return false;
  lt_check(st, "cublasLtMatmul");
  return true;
}

}  // namespace tracer::rt::cuda
