// The GPU side of the Session API: device selection, runs on a GPU (eager or as a CUDA graph,
// with --bench), and tracer compile. Session's state is api/session_impl.h.
#include <map>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>
#include <iostream>
#include <regex>
#include <thread>

#include "api/session_impl.h"
#include "codegen/cuda_codegen.h"
#include "codegen/cuda_exec.h"
#include "codegen/nvrtc.h"
#include "ir/verify.h"
#include "runtime/io.h"

namespace tracer {

using detail::median;
using detail::raw;
using detail::set_bench_times;

std::optional<CompileReport> Session::compile(const std::string& entry, const std::string& arch,
                                              const std::string& emit, const std::string& out_dir) {
  namespace cg = codegen;
  if (!std::regex_match(arch, std::regex("sm_[0-9]{2,3}[a-z]?"))) {
    impl_->error("unknown GPU architecture '" + arch + "' (expected sm_NN, for example sm_90)");
    return std::nullopt;
  }
  cg::Emit kind;
  if (emit == "cuda") kind = cg::Emit::cuda;
  else if (emit == "ptx") kind = cg::Emit::ptx;
  else if (emit == "cubin") kind = cg::Emit::cubin;
  else {
    impl_->error("unknown --emit '" + emit + "' (expected cuda, ptx or cubin)");
    return std::nullopt;
  }
  std::shared_ptr<cg::Nvrtc> nvrtc;
  if (kind != cg::Emit::cuda) {
    std::string why;
    nvrtc = cg::Nvrtc::load(&why);
    if (!nvrtc) {
      impl_->error(why);
      return std::nullopt;
    }
  }
  auto p = impl_->program(entry);
  if (!p) return std::nullopt;
  if (std::find(impl_->passes.begin(), impl_->passes.end(), "fuse") == impl_->passes.end()) {
    try {
      *p = interp::run_passes(*impl_->in, *p, {"fuse"}, impl_->pass_opts, nullptr);
    } catch (const interp::PassError& e) {
      impl_->add(e.diag);
      return std::nullopt;
    }
  }
  struct Job {
    cg::Kernel kernel;
    std::string trace;
  };
  std::vector<Job> jobs;
  try {
    // The compute capability of the architecture chooses attention's kernels (sm_80 and later:
    // the flash kernels), as the executor does on such a device.
    int major = std::stoi(arch.substr(3)) / 10;
    for (const auto& t : *p)
      for (auto& k : cg::kernels_for(*t, 132, major)) jobs.push_back({std::move(k), t->name});
  } catch (const std::exception& e) {
    impl_->error(e.what());
    return std::nullopt;
  }
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) {
    impl_->error("cannot create the output directory '" + out_dir + "': " + ec.message());
    return std::nullopt;
  }
  CompileReport rep;
  rep.arch = arch;
  rep.emit = emit;
  rep.out_dir = out_dir;
  if (nvrtc) rep.nvrtc_version = nvrtc->version();
  // Kernels that differ only in names compile once (by structure); distinct ones compile in
  // parallel, one thread per core.
  auto t0 = std::chrono::steady_clock::now();
  std::vector<size_t> unique;                      // job index of each distinct structure
  std::unordered_map<std::string, size_t> slot_of;  // symbol -> index into unique
  std::vector<size_t> slot(jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) {
    auto [it, fresh] = slot_of.emplace(jobs[j].kernel.symbol, unique.size());
    if (fresh) unique.push_back(j);
    slot[j] = it->second;
  }
  std::vector<cg::CompileResult> results(unique.size());
  if (nvrtc) {
    size_t workers = std::max<size_t>(1, std::min<size_t>(unique.size(), std::thread::hardware_concurrency()));
    std::atomic<size_t> next{0};
    std::vector<std::thread> pool;
    for (size_t w = 0; w < workers; ++w)
      pool.emplace_back([&] {
        for (size_t u = next++; u < unique.size(); u = next++) {
          const cg::Kernel& k = jobs[unique[u]].kernel;
          results[u] = nvrtc->compile(k.structure, k.symbol, arch, kind);
        }
      });
    for (auto& th : pool) th.join();
    rep.compiled = unique.size();
  }
  rep.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  bool ok = true;
  std::unordered_set<size_t> written, files_done;
  std::map<std::string, size_t> same_log;  // a log every kernel gets (a bad --arch) is shown once
  for (size_t j = 0; j < jobs.size(); ++j) {
    const cg::Kernel& k = jobs[j].kernel;
    const cg::CompileResult* res = nvrtc ? &results[slot[j]] : nullptr;
    if (res && !res->ok) {
      if (written.insert(slot[j]).second) {
        bool has_lines = res->log.find("): ") != std::string::npos;
        if (has_lines || same_log[res->log]++ == 0) impl_->error(cg::Nvrtc::explain(k.name + " (" + k.symbol + ")", k.structure, res->log));
        ok = false;
      }
      continue;
    }
    const char* ext = kind == cg::Emit::cuda ? ".cu" : kind == cg::Emit::ptx ? ".ptx" : ".cubin";
    std::string file = (std::filesystem::path(out_dir) / ((res ? k.symbol : k.name) + ext)).string();
    const std::string& data = res ? res->binary : k.source;
    // Written whole or not at all (once per distinct kernel).
    std::string err;
    if ((!res || files_done.insert(slot[j]).second) && !rt::write_file_atomically(file, data, &err)) {
      impl_->error(err);
      return std::nullopt;
    }
    KernelInfo info;
    info.name = k.name;
    info.symbol = k.symbol;
    info.trace = jobs[j].trace;
    info.statement = k.origin;
    info.file = file;
    info.bytes = data.size();
    info.compile_ms = res && unique[slot[j]] == j ? res->ms : 0;
    info.elements = k.elements;
    info.vector_width = k.vector_width;
    rep.kernels.push_back(std::move(info));
  }
  for (const auto& [log, n] : same_log)
    if (n > 1) impl_->error(std::to_string(n - 1) + " more kernel" + (n > 2 ? "s" : "") + " failed with the same NVRTC error");
  if (!ok) return std::nullopt;
  return rep;
}

bool Session::set_device(const std::string& device) {
  if (device == "cpu") {
    impl_->job_nccl.reset();  // its communicator belongs to the device
    impl_->gexec.reset();
    impl_->gpu.reset();
    impl_->in->default_device = "cpu";
    return true;
  }
  std::smatch m;
  if (!std::regex_match(device, m, std::regex("cuda(:([0-9]+))?"))) {
    impl_->error("unknown device '" + device + "' (expected cpu, cuda or cuda:N)");
    return false;
  }
  int ordinal = m[2].matched ? std::stoi(m[2].str()) : 0;
  std::string why;
  impl_->job_nccl.reset();
  impl_->gexec.reset();
  impl_->gpu = rt::cuda::Device::open(ordinal, &why);
  if (!impl_->gpu) {
    impl_->error("cannot use " + device + ": " + why);
    return false;
  }
  std::string nv_why;
  auto nvrtc = codegen::Nvrtc::load(&nv_why);
  if (!nvrtc) {
    impl_->error("cannot use " + device + ": " + nv_why);
    impl_->gpu.reset();
    return false;
  }
  impl_->gexec = std::make_unique<codegen::GpuExecutor>(*impl_->gpu, nvrtc);
  impl_->in->default_device = device;  // compiled functions in scripts run there too
  return true;
}

void Session::set_bench(int runs) { impl_->bench = runs < 0 ? 0 : runs; }

void Session::set_cuda_graph(bool on) { impl_->cuda_graph = on; }

namespace {
// An output of a GPU run: a device value, or a constant of the trace.
struct GpuOutput {
  std::string name;
  ir::Arg constant;
  std::optional<rt::cuda::DeviceTensor> value;
};

// One run of the program on the GPU: the forward, then the backward over the forward's saved
// values (left on the device) and a cotangent of ones (filled by a kernel, so that the run can
// be captured as a CUDA graph). Returns the outputs to report, left on the device.
std::vector<GpuOutput> run_program_gpu(codegen::GpuExecutor& g, const interp::Traces& prog,
                                       const std::vector<rt::cuda::DeviceTensor>& inputs, ir::ExecContext& ctx) {
  using DT = rt::cuda::DeviceTensor;
  const ir::Trace& fw = *prog.front();
  std::vector<GpuOutput> results;
  auto fw_out = g.run(fw, inputs, ctx);
  const std::vector<std::string> names = output_names(prog);
  size_t k = 0;
  auto out = [&](const ir::Arg& a, const codegen::GpuExecutor::Values& vals) {
    std::string name = k < names.size() ? names[k] : "out" + std::to_string(k);
    ++k;
    if (a.kind != ir::Arg::Kind::Proxy) return GpuOutput{name, a, std::nullopt};
    return GpuOutput{name, ir::Arg(), vals.at(a.proxy.get())};
  };
  if (prog.size() == 1) {
    std::vector<const ir::Arg*> flat;
    output_leaves(fw.output, flat);  // tuples, lists and dicts, as the CPU's run walks them
    for (const ir::Arg* a : flat) results.push_back(out(*a, fw_out));
    return results;
  }
  const ir::Trace& bw = *prog[1];
  std::vector<DT> bin;
  for (const auto& p : bw.inputs) {
    auto it = fw_out.find(p.get());
    bin.push_back(it != fw_out.end() ? it->second : g.full(p->type, 1.0));
  }
  const ir::Arg& loss = fw.output.items[0];
  results.push_back(out(loss, fw_out));
  fw_out.clear();  // the saved values move into the backward; the loss is held by results
  auto bw_out = g.run(bw, std::move(bin), ctx);
  for (const auto& a : bw.output.items)
    if (a.kind == ir::Arg::Kind::Proxy) results.push_back(out(a, bw_out));
  return results;
}

std::vector<std::pair<std::string, ir::Arg>> download(codegen::GpuExecutor& g, const std::vector<GpuOutput>& outs, rt::Allocator* al) {
  std::vector<std::pair<std::string, ir::Arg>> r;
  for (const GpuOutput& o : outs) r.emplace_back(o.name, o.value ? ir::Arg::of_tensor(g.download(*o.value, al)) : o.constant);
  return r;
}
}  // namespace

// The GPU part of Session::run: one run (the reported one), then --cuda-graph's capture and
// --bench's timed runs. False after adding the diagnostic.
bool Session::Impl::run_gpu(const interp::Traces& program_traces, std::vector<rt::Tensor>& inputs, RunReport& rep,
                            std::vector<std::pair<std::string, ir::Arg>>& results,
                            std::chrono::steady_clock::time_point t1, double& first_run_ms) {
  const interp::Traces* prog = &program_traces;
    codegen::GpuExecutor& g = *gexec;
    rt::cuda::Device& dev = g.device();
    rep.device = "cuda:" + std::to_string(dev.ordinal()) + " (" + dev.name() + ")";
    try {
      dev.make_current();  // this thread may not be the one that opened the device
      std::vector<rt::cuda::DeviceTensor> din;
      for (const auto& t : inputs) din.push_back(g.upload(t));
      inputs.clear();
      dev.synchronize();
      dev.reset_peak();
      g.reset_stats();
      g.new_program();  // these traces are new objects; statement caches must not outlive theirs
      g.prepare(raw(*prog));  // every kernel compiled up front, in parallel
      ir::ExecContext& ctx = in->exec_context();
      uint64_t rng_at_start = ctx.rng_offset;
      results = download(g, run_program_gpu(g, *prog, din, ctx), ctx.allocator);
      dev.synchronize();
      first_run_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
      rep.device_peak_bytes = dev.peak_bytes();
      const codegen::GpuStats& st = g.stats();
      rep.kernels_launched = st.launches;
      rep.horizontal_members = st.horizontal_members;
      rep.kernels_compiled = st.compiled;
      rep.kernel_disk_hits = st.disk_hits;
      rep.gemms = st.gemms;
      rep.gelu_epilogues = st.gelu_epilogues;
      rep.dgelu_epilogues = st.dgelu_epilogues;
      rep.matmul_tuned = dev.matmul_tuning().problems;
      rep.matmul_tune_changed = dev.matmul_tuning().changed;
      rep.matmul_tune_loaded = dev.matmul_tuning().loaded;
      rep.matmul_tune_ms = dev.matmul_tuning().ms;
      rep.matmul_tune_saved_ms = dev.matmul_tuning().saved_ms;
      rep.cpu_fallbacks = st.fallbacks;
      rep.collectives = st.collectives;
      rep.compile_ms = st.compile_ms;
      rep.compile_wall_ms = st.compile_wall_ms;
      rep.fallback_ops = st.fallback_ops;
      rep.attention_cudnn = st.attention_cudnn;
      rep.attention_tracer = st.attention_tracer;
      rep.attention_fusions_viewed = st.fusions_viewed;
      rep.attention_cats_in_place = st.cats_in_place;
      rep.attention_outputs_in_layout = st.outputs_in_layout;
      rep.take_adds_in_place = st.take_adds_in_place;
      rep.cudnn_version = st.cudnn_version;
      rep.cudnn_library = st.cudnn_library;
      rep.cudnn_missing = st.cudnn_missing;
      rep.cudnn_plans_built = st.cudnn_plans_built;
      rep.cudnn_plans_loaded = st.cudnn_plans_loaded;
      rep.cudnn_plan_ms = st.cudnn_plan_ms;
      for (const std::string& w : st.warnings) add(Diagnostic{Severity::warning, {}, w, {}});
      // --cuda-graph: the run above was the warm-up (kernels compiled, allocator filled); the
      // whole program is captured once and the reported outputs come from its first replay,
      // drawing the same random numbers as that run did.
      std::unique_ptr<codegen::GpuGraph> graph;
      std::vector<GpuOutput> graph_outs;
      if (cuda_graph) {
        uint64_t after = ctx.rng_offset;
        ctx.rng_offset = rng_at_start;
        // A statement's failure arrives as ir::ExecError (which is no std::exception).
        auto not_captured = [&](const std::string& why) {
          graph_outs.clear();
          ctx.rng_offset = after;
          add(Diagnostic{Severity::warning, {}, "--cuda-graph: the program was not captured (" + why + "); it runs without a graph", {}});
        };
        try {
          graph = g.capture([&] { graph_outs = run_program_gpu(g, *prog, din, ctx); }, ctx);
        } catch (const ir::ExecError& e) {
          not_captured(e.message + (e.stmt.empty() ? "" : " in: " + e.stmt));
        } catch (const std::exception& e) {
          not_captured(e.what());
        }
        if (graph) {
          g.replay(*graph, ctx);
          g.check_index_errors();
          results = download(g, graph_outs, ctx.allocator);
          rep.cuda_graph = true;
          rep.graph_nodes = graph->graph->nodes();
          rep.graph_bytes = graph->graph->bytes();
        }
      }
      if (bench > 0) {
        if (g.profiling()) g.clear_profile();  // profile the warm runs only
        std::vector<double> ms, host_ms;
        double api0 = dev.launch_api_ms();
        for (int i = 0; i < bench; ++i) {
          auto b0 = std::chrono::steady_clock::now();
          if (graph)
            g.replay(*graph, ctx);
          else
            run_program_gpu(g, *prog, din, ctx);
          auto b1 = std::chrono::steady_clock::now();  // all work issued: the host's share ends here
          dev.synchronize();
          if (graph) g.check_index_errors();
          ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - b0).count());
          host_ms.push_back(std::chrono::duration<double, std::milli>(b1 - b0).count());
        }
        set_bench_times(rep, ms);
        rep.bench_host_median_ms = median(host_ms);
        rep.bench_launch_api_ms = (dev.launch_api_ms() - api0) / bench;
      }
      if (g.profiling()) g.print_profile(std::cerr);
      if (g.check_failures()) {
        error("TRACER_GPU_CHECK: " + std::to_string(g.check_failures()) + " statements disagree with the CPU (reported above)");
        return false;
      }
    } catch (const ir::ExecError& e) {
      add(detail::exec_diagnostic(e));
      return false;
    } catch (const std::exception& e) {
      error(std::string("on ") + rep.device + ": " + e.what());
      return false;
    }
  return true;
}

}  // namespace tracer
