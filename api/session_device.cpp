// The GPU as a device of compiled functions (interpreter/device.h): jit(f, device="cuda") and
// value_and_grad(..., device="cuda") in scripts run through this backend, which the Session
// installs in its interpreter. Each backend owns its device handle and NVRTC; each compiled
// program (one per signature) gets a GpuExecutor of its own, prepared once, so the loop's steps
// after the first spend no time compiling. Tensors a program returns stay on the device.
#include <algorithm>
#include <regex>

#include "api/session_impl.h"
#include "codegen/cuda_exec.h"
#include "codegen/nvrtc.h"
#include "interpreter/device.h"

namespace tracer {
namespace {

class GpuProgram : public interp::DeviceBackend::Program {
 public:
  GpuProgram(rt::cuda::Device& dev, std::shared_ptr<codegen::Nvrtc> nvrtc, std::vector<std::shared_ptr<ir::Trace>> traces,
             const interp::DeviceBackend::Options& options)
      : dev_(dev), g_(dev, std::move(nvrtc)), traces_(std::move(traces)), graph_on_(options.cuda_graph) {
    std::vector<const ir::Trace*> raw;
    for (const auto& t : traces_) raw.push_back(t.get());
    dev_.make_current();
    g_.prepare(raw);  // every kernel compiled up front
    name_ = options.name.empty() ? traces_.front()->name : options.name;
  }

  void run(std::vector<rt::cuda::DeviceTensor> inputs, ir::ExecContext& ctx, Values* forward, Values* backward) override {
    dev_.make_current();
    if (!graph_on_ || !off_.empty()) {
      run_traces(std::move(inputs), ctx, forward, backward);
      return;
    }
    std::vector<rt::cuda::DevPtr> ptrs;
    for (const auto& t : inputs) ptrs.push_back(t.ptr());
    if (graph_) {
      if (replayable(inputs)) {
        replay(std::move(inputs), ctx, forward, backward);
        return;
      }
      // An input read in place moved: this call runs without the graph, and the next one is
      // captured again, reading in place what it shares with this one. (Outputs handed out keep
      // the old graph's memory until they are dropped.)
      graph_.reset();
      status_ = "warming up (an input the graph read in place came elsewhere)";
      // (Inputs that keep moving would capture a graph every other call: the third move ends it.)
      if (++moves_ >= 3) off_ = "runs without a graph: inputs it read in place came elsewhere 3 times";
      remember(inputs, ptrs);
      run_traces(std::move(inputs), ctx, forward, backward);
      return;
    }
    if (last_ptrs_.size() != ptrs.size()) {  // the first call: kernels, plans and the allocator warm up
      status_ = "warming up";
      remember(inputs, ptrs);
      const size_t fallbacks = g_.stats().fallbacks;
      run_traces(std::move(inputs), ctx, forward, backward);
      // A statement that ran on the CPU cannot be captured (its copies wait for the device).
      if (g_.stats().fallbacks > fallbacks) {
        std::string ops;
        for (const std::string& op : g_.stats().fallback_ops) ops += (ops.empty() ? "" : ", ") + op;
        off_ = "runs without a graph: statements run on the CPU (" + ops + ")";
      }
      return;
    }
    capture(std::move(inputs), ptrs, ctx, forward, backward);
  }

  size_t graph_replays() const override { return replays_; }
  std::string graph_status() const override { return !graph_on_ ? "off" : !off_.empty() ? off_ : status_; }

 private:
  // The traces once, without a graph: the forward, then (value_and_grad) the backward.
  void run_traces(std::vector<rt::cuda::DeviceTensor> inputs, ir::ExecContext& ctx, Values* forward, Values* backward) {
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

  void remember(const std::vector<rt::cuda::DeviceTensor>& inputs, const std::vector<rt::cuda::DevPtr>& ptrs) {
    last_ptrs_ = ptrs;
    last_bufs_.clear();
    for (const auto& t : inputs) last_bufs_.push_back(t.buffer);
  }

  // The second call: inputs that are the first call's, the same buffers at the same addresses
  // (parameters an optimizer updates in place, tensors passed again), are read in place; the
  // others (a new batch, even one the allocator put where the last one was) are copied into
  // buffers of the program's own, which the graph reads and each replay refills.
  void capture(std::vector<rt::cuda::DeviceTensor> inputs, const std::vector<rt::cuda::DevPtr>& ptrs, ir::ExecContext& ctx,
               Values* forward, Values* backward) {
    const size_t n = inputs.size();
    in_place_.assign(n, 0);
    read_at_.assign(n, 0);
    layouts_.clear();
    placeholders_.clear();
    std::vector<rt::cuda::DeviceTensor> cin(n), kept = inputs;  // kept: each input's dtype, shape, layout and offset
    std::vector<rt::cuda::DevPtr> bases(n, 0);
    held_.assign(n, {});
    for (size_t i = 0; i < n; ++i) {
      layouts_.push_back(inputs[i].layout);
      if (inputs[i].buffer && last_bufs_[i].lock() == inputs[i].buffer && ptrs[i] == last_ptrs_[i]) {
        in_place_[i] = 1;
        bases[i] = inputs[i].buffer ? inputs[i].buffer->ptr : 0;
        read_at_[i] = ptrs[i];
        held_[i] = inputs[i].buffer;  // (to run the call again if the capture fails)
        cin[i] = std::move(inputs[i]);  // (a donated one's only reference: its buffer may take an output, as without a graph)
      } else {
        rt::cuda::DeviceTensor p = inputs[i];
        p.offset = 0;
        p.buffer = std::make_shared<rt::cuda::Buffer>(&dev_, std::max<size_t>(inputs[i].nbytes(), 1));
        if (inputs[i].nbytes()) dev_.copy_device(p.ptr(), inputs[i].ptr(), inputs[i].nbytes());
        placeholders_.push_back(p.buffer);
        read_at_[i] = p.ptr();
        cin[i] = std::move(p);
      }
    }
    for (auto& t : kept) t.buffer.reset();
    Values fw_out, bw_out;
    std::unique_ptr<codegen::GpuGraph> g;
    std::string why;
    try {
      g = g_.capture([&] { run_traces(std::move(cin), ctx, &fw_out, backward ? &bw_out : nullptr); }, ctx);
    } catch (const ir::ExecError& e) {
      why = e.message + (e.stmt.empty() ? "" : " (in: " + e.stmt + ")");
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (!g) {
      // Nothing ran: this call runs without a graph over the same inputs. Those read in place
      // went into the capture; they are found again through held_ (a donated one the capture
      // dropped cannot be: then the call fails, as a failed call with donated inputs does).
      off_ = "runs without a graph: the capture failed: " + why;
      placeholders_.clear();
      for (size_t i = 0; i < n; ++i) {
        if (!in_place_[i]) continue;
        kept[i].buffer = held_[i].lock();
        if (!kept[i].buffer && kept[i].nbytes())
          throw std::runtime_error("a CUDA graph's capture failed (" + why + ") after its donated inputs were given to it; call " + name_ +
                                   " with cuda_graph=False");
      }
      for (size_t i = 0; i < n; ++i)
        if (!in_place_[i]) kept[i] = std::move(inputs[i]);
      held_.clear();
      run_traces(std::move(kept), ctx, forward, backward);
      return;
    }
    held_.clear();
    graph_ = std::shared_ptr<codegen::GpuGraph>(std::move(g));
    // The outputs: those over an input's buffer are that input's each call; the rest are the
    // graph's blocks, handed out as borrowed views.
    outs_.clear();
    auto record = [&](const Values& vals, bool bw) {
      for (const auto& [proxy, t] : vals) {
        Out o{proxy, bw, t, -1};
        const rt::cuda::DevPtr base = t.buffer ? t.buffer->ptr : 0;
        for (size_t i = 0; i < n && base; ++i)
          if (in_place_[i] && bases[i] == base) o.input = static_cast<int>(i);
        if (o.input >= 0) o.value.buffer.reset();  // (the caller's buffer: never held here)
        outs_.push_back(std::move(o));
      }
    };
    record(fw_out, false);
    record(bw_out, true);
    status_ = "captured";
    // The first replay: the outputs over inputs' buffers are those buffers, held by fw_out/bw_out.
    std::vector<rt::cuda::DeviceTensor> held(n);
    for (const Out& o : outs_)
      if (o.input >= 0) held[static_cast<size_t>(o.input)] = (o.backward ? bw_out : fw_out).at(o.proxy);
    fw_out.clear();
    bw_out.clear();
    launch(held, ctx, forward, backward);
  }

  bool replayable(const std::vector<rt::cuda::DeviceTensor>& inputs) const {
    if (inputs.size() != read_at_.size()) return false;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].layout != layouts_[i]) return false;
      if (in_place_[i] && inputs[i].ptr() != read_at_[i]) return false;
    }
    return true;
  }

  void replay(std::vector<rt::cuda::DeviceTensor> inputs, ir::ExecContext& ctx, Values* forward, Values* backward) {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!in_place_[i] && inputs[i].nbytes()) dev_.copy_device(read_at_[i], inputs[i].ptr(), inputs[i].nbytes());
    launch(inputs, ctx, forward, backward);
  }

  // One replay; outputs over input i's buffer take buffers[i]'s, those of one element are copied
  // out, and the rest are views of the graph's blocks.
  void launch(const std::vector<rt::cuda::DeviceTensor>& buffers, ir::ExecContext& ctx, Values* forward, Values* backward) {
    // What the last replay handed out and is still held is written over now.
    for (auto& w : handed_)
      if (auto b = w.lock())
        b->stale = "this tensor was returned by an earlier call of " + name_ +
                   " compiled with cuda_graph=True, and a later call wrote over it (a CUDA graph's outputs "
                   "are valid until its next call: t.cpu() before then keeps a copy)";
    handed_.clear();
    g_.replay_async(*graph_, ctx);
    ++replays_;
    forward->clear();
    if (backward) backward->clear();
    std::shared_ptr<codegen::GpuGraph> keep = graph_;  // a view keeps its graph's memory
    for (const Out& o : outs_) {
      rt::cuda::DeviceTensor t = o.value;
      if (o.input >= 0) {
        t.buffer = buffers[static_cast<size_t>(o.input)].buffer;
      } else if (t.buffer && rt::numel(t.shape) <= 1) {
        // A value of one element (a loss, a norm: what a loop keeps to log later) is copied out
        // of the graph's block, so that the next replay leaves it alone (a 4-byte copy).
        auto b = std::make_shared<rt::cuda::Buffer>(&dev_, std::max<size_t>(t.nbytes(), 1));
        if (t.nbytes()) dev_.copy_device(b->ptr, t.ptr(), t.nbytes());
        t.buffer = std::move(b);
        t.offset = 0;
      } else if (t.buffer) {
        t.buffer = rt::cuda::Buffer::borrowed(t.buffer->ptr, t.buffer->bytes, keep);
        handed_.push_back(t.buffer);
      }
      if (o.backward) {
        if (backward) (*backward)[o.proxy] = std::move(t);
      } else {
        (*forward)[o.proxy] = std::move(t);
      }
    }
  }

  rt::cuda::Device& dev_;
  codegen::GpuExecutor g_;
  std::vector<std::shared_ptr<ir::Trace>> traces_;
  std::string name_;
  // cuda_graph=True (DeviceBackend::Options): the graph and what it reads and writes.
  bool graph_on_ = false;
  std::string off_;                          // why the program runs without a graph for good
  std::string status_ = "warming up";
  std::vector<rt::cuda::DevPtr> last_ptrs_;  // the inputs' addresses at the call before the capture
  std::vector<std::weak_ptr<rt::cuda::Buffer>> last_bufs_;  // and their buffers
  std::shared_ptr<codegen::GpuGraph> graph_;
  std::vector<char> in_place_;               // per input: read where it is (else copied to read_at_)
  std::vector<rt::cuda::DevPtr> read_at_;    // per input: the address the graph reads
  std::vector<std::vector<int64_t>> layouts_;
  std::vector<std::shared_ptr<rt::cuda::Buffer>> placeholders_;
  std::vector<std::weak_ptr<rt::cuda::Buffer>> held_;  // during a capture: the inputs read in place
  struct Out {
    const ir::Proxy* proxy;
    bool backward;
    rt::cuda::DeviceTensor value;  // dtype, shape, layout, offset; the graph's buffer, or none
    int input;                     // >= 0: written over that input's buffer
  };
  std::vector<Out> outs_;
  std::vector<std::weak_ptr<rt::cuda::Buffer>> handed_;
  size_t replays_ = 0;
  int moves_ = 0;  // times an input read in place came elsewhere
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
  std::unique_ptr<Program> prepare(std::vector<std::shared_ptr<ir::Trace>> traces, const Options& options) override {
    return std::make_unique<GpuProgram>(*dev_, nvrtc_, std::move(traces), options);
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
