// The CUDA driver and cuBLASLt, loaded at run time (dlopen), so that one binary runs on machines
// with and without a GPU. Knows nothing of traces: device memory, copies, modules, launches,
// events and matrix products. Errors are thrown as CudaError with the call and the driver's
// message.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <functional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/dtype.h"

namespace tracer::rt::cuda {

struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using DevPtr = uint64_t;  // CUdeviceptr

struct Api;      // driver entry points
struct LtApi;    // cuBLASLt entry points
class Device;

// A captured CUDA graph, instantiated and ready to replay (Device::end_capture). It owns every
// device block the captured work used: they stay reserved for its replays until it is destroyed.
class Graph {
 public:
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  size_t bytes() const { return bytes_; }  // device memory reserved for the replays
  size_t nodes() const { return nodes_; }  // kernels and other operations in the graph

 private:
  friend class Device;
  Graph() = default;
  Device* dev_ = nullptr;
  void* graph_ = nullptr;
  void* exec_ = nullptr;
  std::vector<std::pair<DevPtr, size_t>> blocks_;
  size_t bytes_ = 0, nodes_ = 0;
};

// One device: its primary context, a stream, a caching allocator with current and peak bytes,
// and the modules loaded into it. Not thread-safe: one thread uses a Device at a time.
class Device {
 public:
  // Opens device `ordinal`, or returns null with the reason in *why (no driver, no device, a
  // driver too old, an ordinal out of range). The driver is libcuda.so.1, or the library that
  // $TRACER_CUDA_DRIVER names.
  static std::unique_ptr<Device> open(int ordinal, std::string* why);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const std::string& name() const { return name_; }
  int ordinal() const { return ordinal_; }
  int sm_count() const { return sm_count_; }
  // The most dynamic shared memory one block may opt in to (227 KiB on the H100/H200, 99 KiB on
  // sm_86/89).
  int max_shared_per_block() const { return shared_optin_; }
  std::string arch() const;  // "sm_90"
  int compute_major() const { return cc_major_; }
  int driver_version() const { return driver_version_; }

  // ---- memory (caching: freed blocks are kept by size and reused) ----
  DevPtr allocate(size_t bytes);  // 256-byte aligned; throws CudaError when out of memory
  void release(DevPtr p, size_t bytes);
  size_t current_bytes() const { return current_; }
  size_t peak_bytes() const { return peak_; }
  void reset_peak() { peak_ = current_; }
  size_t reserved_bytes() const { return reserved_; }  // held from the driver, cached blocks included
  void empty_cache();

  // Waits until the copy has run.
  void copy_to_device(DevPtr dst, const void* src, size_t bytes);
  // In stream order, without waiting for the device: src is staged in pinned memory first, so it
  // may be reused as soon as this returns (uploads above 64 MiB wait). Inside a capture the copy
  // is recorded as it is, reading src at each replay.
  void copy_to_device_async(DevPtr dst, const void* src, size_t bytes);
  void copy_to_host(void* dst, DevPtr src, size_t bytes);  // waits for the stream
  // Pinned host memory (null where the driver has none), for copy_to_host_async's destination.
  void* pinned_host(size_t bytes);
  void free_pinned_host(void* p);
  void copy_to_host_async(void* pinned_dst, DevPtr src, size_t bytes);  // in stream order
  bool event_done(void* event);  // the work before the event's record has run
  void event_wait(void* event);
  void copy_device(DevPtr dst, DevPtr src, size_t bytes);

  // ---- kernels ----
  // Loads a cubin (once per key) and returns the function `symbol` in it.
  void* function(const std::string& key, const std::string& cubin, const std::string& symbol);
  void launch(void* fn, unsigned grid, unsigned block, void** args);
  // A two-dimensional grid with dynamic shared memory (opted in above 48 KiB).
  void launch(void* fn, unsigned grid_x, unsigned grid_y, unsigned block, unsigned shared_bytes, void** args);
  double launch_api_ms() const { return launch_api_ns_ * 1e-6; }  // time spent in cuLaunchKernel so far
  void synchronize();
  void* stream() const { return stream_; }  // the CUstream every operation is ordered on
  // Makes this device's context current on the calling thread (a session handed to another
  // thread, or several sessions on several GPUs in one thread).
  void make_current();

  // ---- the communication stream and events ----
  // A second stream, created on first use, on which a communicator's collectives run while the
  // compute stream goes on; events order the two (record on one, wait on the other).
  // synchronize() waits for both.
  void* comm_stream();
  void* new_event();  // a CUevent without timing; destroy_event frees it
  void destroy_event(void* event);
  void record(void* event, void* stream);
  void stream_wait(void* stream, void* event);  // work issued on stream later waits for event

  // ---- graphs ----
  // Work issued between begin_capture and end_capture is recorded (relaxed capture mode), not
  // run. Nothing may synchronize meanwhile (no copies to the host). end_capture instantiates
  // the graph, or with keep = false (after an error) discards the capture and returns null.
  void begin_capture();
  std::unique_ptr<Graph> end_capture(bool keep = true);
  bool capturing() const { return capturing_; }
  void launch_graph(Graph& g);

  // ---- timing ----
  // Device time of the work (events). With gate, the stream is held (a host function that waits
  // on a flag) until the work has been issued, so the time is the device's alone, not the host's
  // preparation of it (cuBLASLt's or cuDNN's set-up between the events); *gate_timed_out says
  // when the work synchronized with the stream (a copy to the host) and the gate had to give
  // way after 50 ms, which that time then includes.
  double time_ms(const std::function<void()>& work, bool gate = false, bool* gate_timed_out = nullptr);

  // ---- matrix products through cuBLASLt ----
  // C[batch][m, n] = op(A) op(B), row-major, op = transpose when ta/tb; A stored [m, k] ([k, m]
  // when ta), B stored [k, n] ([n, k] when tb), batch strides in elements (0: shared). f32
  // accumulation for bf16/f16/f32, f64 for f64. bias (optional, n elements of dt) is added to
  // every row of C by cuBLASLt's epilogue, before the one rounding to dt.
  void gemm(DType dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, DevPtr a, DevPtr b, DevPtr c,
            int64_t batch, int64_t stride_a, int64_t stride_b, int64_t stride_c, DevPtr bias = 0);
  // C = gelu_tanh(A B^T + bias) for one [m, k] x [n, k] product (a linear), by cuBLASLt's GELU
  // epilogue on the f32 accumulator: GELU's input is never rounded to dt. aux (optional,
  // [m, n] of dt) receives that input, rounded to dt. Returns false, having done nothing, when
  // cuBLASLt has no algorithm for it (dtype, alignment: aux needs n % 8 == 0).
  bool gemm_gelu(DType dt, int64_t m, int64_t n, int64_t k, DevPtr a, DevPtr b, DevPtr c, DevPtr bias, DevPtr aux);
  // C = (op(A) op(B)) * gelu_tanh'(aux) for one product (row-major, as gemm), by cuBLASLt's DGELU
  // epilogue on the f32 accumulator (the product is never rounded to dt before the multiply):
  // aux [m, n] of dt is GELU's input. bgrad (optional, n elements of dt) receives the sums of C's
  // columns (DGELU_BGRAD: a linear's bias gradient over its m rows). Returns false, having done
  // nothing, when cuBLASLt has no algorithm for it (dtype, alignment: n % 8 == 0).
  bool gemm_dgelu(DType dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, DevPtr a, DevPtr b, DevPtr c, DevPtr aux,
                  DevPtr bgrad);
  // Matmul tuning (on unless TRACER_MATMUL_TUNE=0): the first call of each problem outside a
  // capture times the heuristics' best candidates (up to 8) on its own operands and keeps the
  // fastest, in the directory set here (the kernel cache's) when there is one, so later runs use
  // the same algorithm without timing (and give the same numbers). What it did so far: problems
  // timed, those where another candidate won, choices read back, the host time spent, and the
  // device time the choices save per call of each problem.
  struct MatmulTuning {
    int problems = 0, changed = 0, loaded = 0;
    double ms = 0, saved_ms = 0;
  };
  const MatmulTuning& matmul_tuning() const { return tuning_; }
  void set_matmul_cache_dir(const std::string& dir) { matmul_cache_dir_ = dir; }

 private:
  Device() = default;
  void check(int rc, const char* what) const;
  enum class LtEpi { None = 0, Gelu = 1, DGelu = 2 };  // the epilogue of lt_matmul (bias apart)
  bool lt_matmul(DType dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, DevPtr a, DevPtr b, DevPtr c,
                 int64_t batch, int64_t stride_a, int64_t stride_b, int64_t stride_c, DevPtr bias, LtEpi epi, DevPtr aux);
  std::shared_ptr<Api> api_;
  std::shared_ptr<LtApi> lt_;
  struct LtPlans;                    // cuBLASLt descriptors and algorithms by problem (cuda.cpp)
  std::unique_ptr<LtPlans> lt_plans_;
  void* ctx_ = nullptr;
  void* stream_ = nullptr;
  void* comm_stream_ = nullptr;
  void* lt_handle_ = nullptr;
  DevPtr workspace_ = 0;
  size_t workspace_bytes_ = 0;
  int ordinal_ = 0, sm_count_ = 0, cc_major_ = 0, cc_minor_ = 0, driver_version_ = 0, shared_optin_ = 0;
  int dev_ = 0;
  std::string name_;
  size_t current_ = 0, peak_ = 0, reserved_ = 0;
  long long launch_api_ns_ = 0;
  std::unordered_map<void*, unsigned> shared_opt_in_;  // functions opted in to more dynamic shared memory
  std::unordered_map<size_t, std::vector<DevPtr>> free_;  // cached blocks by rounded size
  friend class Graph;
  void release_graph(Graph& g);
  struct Pin {
    size_t bytes = 0;
    bool live = false;  // still held by a tensor (else kept for the graphs alone)
    int owners = 0;     // graphs that replay over it
  };
  std::unordered_map<DevPtr, Pin> pinned_;       // blocks owned by graphs
  bool capturing_ = false;
  struct Staging {  // a pinned block of copy_to_device_async, busy until its event has passed
    void* host = nullptr;
    size_t bytes = 0;
    void* event = nullptr;
  };
  std::vector<Staging> staging_free_, staging_busy_;
  size_t staging_bytes_ = 0;
  int tune_ = -1;  // TRACER_MATMUL_TUNE, read on first use (-1: not yet)
  std::string matmul_cache_dir_;
  MatmulTuning tuning_;
  std::unordered_map<DevPtr, size_t> captured_;  // blocks the running capture touched
  std::unordered_map<std::string, void*> modules_;
  std::unordered_map<std::string, void*> functions_;
};

// A device tensor: a buffer shared by views (reshapes), with its dtype and shape.
struct Buffer {
  Device* device = nullptr;
  DevPtr ptr = 0;
  size_t bytes = 0;
  // Non-empty: the memory was given to later work while this buffer was still held (a CUDA
  // graph's output that a later replay wrote over); why, as the error to give its readers.
  std::string stale;
  // A buffer naming memory that owner holds (a CUDA graph's block): never released by this
  // object, and owner kept alive as long as it is.
  static std::shared_ptr<Buffer> borrowed(DevPtr p, size_t n, std::shared_ptr<const void> owner) {
    auto* b = new Buffer(nullptr, 0);
    b->ptr = p;
    b->bytes = n;
    return std::shared_ptr<Buffer>(b, [owner](Buffer* x) {
      x->ptr = 0;
      delete x;
    });
  }
  Buffer(Device* d, size_t n) : device(d), bytes(n) { ptr = n ? d->allocate(n) : 0; }
  ~Buffer() {
    if (ptr) device->release(ptr, bytes);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

// The bytes the device allocator takes for a request of n (its granules: 512 bytes up to 1 MiB,
// then 2 MiB); its current and peak counts are of these sizes.
size_t allocation_size(size_t n);

struct DeviceTensor {
  std::shared_ptr<Buffer> buffer;
  DType dtype = DType::f32;
  Shape shape;
  // Empty: packed in shape's order. Else the buffer holds transpose(this, layout) packed: an
  // attention output the GPU executor wrote as its readers want it, handed from one trace to the
  // next (codegen/cuda_exec_views.cpp); downloads put it back.
  std::vector<int64_t> layout;
  // Bytes into the buffer where this value starts: 0, or a slice that is one run of a packed
  // tensor (the GPU executor's slice views, codegen/cuda_exec.cpp). Buffer reuse takes only
  // values that are their whole buffer.
  size_t offset = 0;
  size_t nbytes() const { return static_cast<size_t>(numel(shape)) * dtype_size(dtype); }
  DevPtr ptr() const { return buffer ? buffer->ptr + offset : 0; }
};

}  // namespace tracer::rt::cuda
