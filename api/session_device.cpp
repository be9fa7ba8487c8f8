// The GPU as a device of compiled functions (interpreter/device.h): jit(f, device="cuda") and
// value_and_grad(..., device="cuda") in scripts run through this backend, which the Session
// installs in its interpreter. Each backend owns its device handle and NVRTC; each compiled
// program (one per signature) gets a GpuExecutor of its own, prepared once, so the loop's steps
// after the first spend no time compiling. Tensors a program returns stay on the device.
#include <regex>

#include "api/session_impl.h"
#include "codegen/cuda_exec.h"
#include "codegen/nvrtc.h"
#include "interpreter/device.h"

namespace tracer {
namespace {

class GpuProgram : public interp::DeviceBackend::Program {
 public:
  GpuProgram(rt::cuda::Device& dev, std::shared_ptr<codegen::Nvrtc> nvrtc, std::vector<std::shared_ptr<ir::Trace>> traces)
      : dev_(dev), g_(dev, std::move(nvrtc)), traces_(std::move(traces)) {
    std::vector<const ir::Trace*> raw;
    for (const auto& t : traces_) raw.push_back(t.get());
    dev_.make_current();
    g_.prepare(raw);  // every kernel compiled up front
  }

  void run(std::vector<rt::cuda::DeviceTensor> inputs, ir::ExecContext& ctx, Values* forward, Values* backward) override {
    dev_.make_current();
    const ir::Trace& fw = *traces_.front();
    Values fw_out = g_.run(fw, std::move(inputs), ctx);
    if (traces_.size() == 1 || !backward) {
      *forward = std::move(fw_out);
      return;
    }
    // The forward returns (value, saved): the caller gets the value's tensors; the saved ones
    // move into the backward, with a cotangent of ones for what the backward takes besides.
    const ir::Trace& bw = *traces_[1];
    forward->clear();
    std::vector<const ir::Arg*> stack{&fw.output.items[0]};
    while (!stack.empty()) {
      const ir::Arg* a = stack.back();
      stack.pop_back();
      if (a->kind == ir::Arg::Kind::Proxy) {
        auto it = fw_out.find(a->proxy.get());
        if (it != fw_out.end()) (*forward)[a->proxy.get()] = it->second;
      }
      for (const auto& x : a->items) stack.push_back(&x);
    }
    std::vector<rt::cuda::DeviceTensor> bin;
    for (const auto& p : bw.inputs) {
      auto it = fw_out.find(p.get());
      bin.push_back(it != fw_out.end() ? it->second : g_.full(p->type, 1.0));
    }
    fw_out.clear();
    *backward = g_.run(bw, std::move(bin), ctx);
  }

 private:
  rt::cuda::Device& dev_;
  codegen::GpuExecutor g_;
  std::vector<std::shared_ptr<ir::Trace>> traces_;
};

class GpuBackend : public interp::DeviceBackend {
 public:
  GpuBackend(std::unique_ptr<rt::cuda::Device> dev, std::shared_ptr<codegen::Nvrtc> nvrtc)
      : dev_(std::move(dev)), nvrtc_(std::move(nvrtc)), transfers_(*dev_, nvrtc_), name_("cuda:" + std::to_string(dev_->ordinal())) {}
  const std::string& device() const override { return name_; }
  std::string description() const override { return name_ + " (" + dev_->name() + ")"; }
  rt::cuda::DeviceTensor upload(const rt::Tensor& t) override {
    dev_->make_current();
    return transfers_.upload(t);
  }
  rt::Tensor download(const rt::cuda::DeviceTensor& t, rt::Allocator* al) override {
    dev_->make_current();
    return transfers_.download(t, al);
  }
  std::unique_ptr<Program> prepare(std::vector<std::shared_ptr<ir::Trace>> traces) override {
    return std::make_unique<GpuProgram>(*dev_, nvrtc_, std::move(traces));
  }
  size_t current_bytes() const override { return dev_->current_bytes(); }
  size_t peak_bytes() const override { return dev_->peak_bytes(); }
  void reset_peak() override { dev_->reset_peak(); }
  void synchronize() override {
    dev_->make_current();
    dev_->synchronize();
  }

 private:
  std::unique_ptr<rt::cuda::Device> dev_;
  std::shared_ptr<codegen::Nvrtc> nvrtc_;
  codegen::GpuExecutor transfers_;  // uploads and downloads, in its stream order
  std::string name_;
};

}  // namespace

// Opens "cuda" / "cuda:N" for the interpreter's compiled functions (kept for the session's life).
interp::DeviceBackend* Session::Impl::open_device_backend(const std::string& device, std::string* why) {
  std::smatch m;
  if (!std::regex_match(device, m, std::regex("cuda(:([0-9]+))?"))) {
    *why = "unknown device (expected cpu, cuda or cuda:N)";
    return nullptr;
  }
  const int ordinal = m[2].matched ? std::stoi(m[2].str()) : 0;
  const std::string name = "cuda:" + std::to_string(ordinal);
  auto it = device_backends.find(name);
  if (it != device_backends.end()) return it->second.get();
  auto dev = rt::cuda::Device::open(ordinal, why);
  if (!dev) return nullptr;
  auto nvrtc = codegen::Nvrtc::load(why);
  if (!nvrtc) return nullptr;
  auto b = std::make_unique<GpuBackend>(std::move(dev), std::move(nvrtc));
  interp::DeviceBackend* raw = b.get();
  device_backends[name] = std::move(b);
  return raw;
}

}  // namespace tracer
