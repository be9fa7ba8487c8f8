// Devices for compiled functions (docs/training.md, "On a GPU"): jit(f, device="cuda") and
// value_and_grad(f, device="cuda") run their programs through a DeviceBackend, which the host
// installs (the Session API installs codegen's GPU executor: the interpreter knows no code
// generator). Tensors a device program returns stay on the device (TensorObj::dev) and go back to
// it as the next call's arguments without a copy; reading one's values copies it to the host.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/op.h"
#include "ir/trace.h"
#include "runtime/cuda.h"
#include "runtime/tensor.h"

namespace tracer::interp {

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  // "cuda:0", as tensors' .device gives it; and with the device's name, for messages.
  virtual const std::string& device() const = 0;
  virtual std::string description() const = 0;
  virtual rt::cuda::DeviceTensor upload(const rt::Tensor& t) = 0;
  virtual rt::Tensor download(const rt::cuda::DeviceTensor& t, rt::Allocator* al) = 0;

  // One compiled program's traces, made ready once (its kernels compiled) and run per call.
  class Program {
   public:
    virtual ~Program() = default;
    using Values = std::unordered_map<const ir::Proxy*, rt::cuda::DeviceTensor>;
    // Runs the first trace over inputs (parallel to its inputs; moved in, so that what the
    // caller gave up is freed at its last use) and, when there are two, the backward over the
    // forward's saved values and a cotangent of ones. Returns the values of the forward's and
    // the backward's output proxies. Throws ir::ExecError for a statement's failure.
    virtual void run(std::vector<rt::cuda::DeviceTensor> inputs, ir::ExecContext& ctx, Values* forward,
                     Values* backward) = 0;
    // With Options::cuda_graph: the calls replayed from a graph, and where the graph stands
    // ("warming up", "captured", or why the program runs without one).
    virtual size_t graph_replays() const { return 0; }
    virtual std::string graph_status() const { return "off"; }
  };
  struct Options {
    // Capture the program as a CUDA graph at its second call and replay it from then on (as
    // torch.compile's mode="reduce-overhead"). Inputs whose addresses stayed the same between
    // the first two calls are read where they are (a replay with one elsewhere runs without the
    // graph); the others are copied into the graph's own buffers at each call. Outputs live in
    // the graph's buffers: a later call overwrites them, and a tensor still held from an earlier
    // call is marked stale (rt::cuda::Buffer::stale), so reading it is an error, not a wrong
    // value. Outputs of one element (a loss, a norm: what a loop keeps to log) are copied out
    // after each replay and never go stale. An output written over a donated input is that
    // input's buffer, as without a graph.
    bool cuda_graph = false;
    std::string name;  // the compiled function's, for messages
  };
  virtual std::unique_ptr<Program> prepare(std::vector<std::shared_ptr<ir::Trace>> traces, const Options& options) = 0;
  // The device allocator's bytes in use now and at the peak (since the last reset_peak).
  virtual size_t current_bytes() const = 0;
  virtual size_t peak_bytes() const = 0;
  virtual void reset_peak() = 0;
  // Waits until every operation queued on the device (by any compiled function, upload or
  // download) has finished; a device error surfaces here.
  virtual void synchronize() = 0;
};

// Opens the backend of a device name ("cuda", "cuda:1"), or returns null with the reason.
using DeviceOpener = std::function<DeviceBackend*(const std::string& device, std::string* why)>;

}  // namespace tracer::interp
