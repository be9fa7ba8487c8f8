// The GPU executor; see cuda_exec.h.
#include "codegen/cuda_exec.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <atomic>
#include <thread>
#include <unordered_set>

#include "codegen/cuda_reduce.h"
#include "ir/fusion.h"
#include "ir/op_rules.h"
#include "ir/verify.h"
#include "runtime/io.h"

namespace tracer::codegen {

using rt::cuda::DeviceTensor;
using K = ir::Arg::Kind;
using rt::DType;

// ---------------------------------------------------------------- executor

GpuExecutor::GpuExecutor(rt::cuda::Device& dev, std::shared_ptr<Nvrtc> nvrtc, KernelCache cache)
    : dev_(dev), nvrtc_(std::move(nvrtc)), cache_(std::move(cache)) {
  dev_.set_matmul_cache_dir(cache_.dir());  // tuned cuBLASLt choices are kept beside the kernels
  const char* p = std::getenv("TRACER_GPU_PROFILE");
  profile_ = p && *p && std::string(p) != "0";
  profile_each_ = profile_ && std::string(p) == "2";
  host_profile_ = p && std::string(p) == "host";
  if (const char* h = std::getenv("TRACER_HORIZONTAL")) horizontal_on_ = std::string(h) != "0";
  if (host_profile_) profile_ = false;
  if (const char* c = std::getenv("TRACER_GPU_CHECK")) check_ = std::atoi(c);
  if (const char* v = std::getenv("TRACER_ATTENTION_VIEWS")) views_enabled_ = std::string(v) != "0";
  if (const char* c = std::getenv("TRACER_ATTENTION_CAT")) attention_cat_ = std::string(c) != "0";
  if (const char* c = std::getenv("TRACER_DGELU_EPILOGUE"))
    dgelu_epilogue_ = std::string(c) == "0"       ? DGeluEpilogue::Off
                      : std::string(c) == "bgrad" ? DGeluEpilogue::BGrad
                      : std::string(c) == "apart" ? DGeluEpilogue::Apart
                                                  : DGeluEpilogue::Auto;
  if (const char* c = std::getenv("TRACER_ATTENTION_OUT_LAYOUT")) out_layout_ = std::string(c) != "0";
  if (const char* a = std::getenv("TRACER_ATTENTION"); a && *a) {
    std::string v = a;
    if (v == "cudnn") {
      attention_choice_ = AttentionChoice::Cudnn;
    } else if (v == "tracer") {
      attention_choice_ = AttentionChoice::Tracer;
    } else if (v != "auto") {
      attention_setting_error_ = "TRACER_ATTENTION must be auto, cudnn or tracer, got '" + v + "'";
    }
  }
}

DeviceTensor GpuExecutor::alloc(const ir::TensorType& t) {
  DeviceTensor d;
  d.dtype = t.dtype;
  d.shape = t.shape;
  d.buffer = std::make_shared<rt::cuda::Buffer>(&dev_, t.nbytes());
  return d;
}

DeviceTensor GpuExecutor::upload(const rt::Tensor& t) {
  DeviceTensor d = alloc({t.dtype(), t.shape(), "cuda"});
  dev_.copy_to_device_async(d.ptr(), t.data(), t.nbytes());  // staged: the host goes on
  return d;
}

rt::Tensor GpuExecutor::download(const DeviceTensor& t, rt::Allocator* al) {
  if (!t.layout.empty()) {  // held as transpose(t, layout): copied as that, then put back
    rt::Shape held(t.shape.size());
    std::vector<int64_t> inverse(t.shape.size());
    for (size_t k = 0; k < t.layout.size(); ++k) {
      held[k] = t.shape[static_cast<size_t>(t.layout[k])];
      inverse[static_cast<size_t>(t.layout[k])] = static_cast<int64_t>(k);
    }
    DeviceTensor packed = t;
    packed.layout.clear();
    packed.shape = held;
    return rt::permute(download(packed, al), inverse, al);
  }
  rt::Tensor h = rt::Tensor::empty(t.dtype, t.shape, al);
  dev_.synchronize();
  check_index_errors();  // nothing leaves a run whose gather had a bad index
  dev_.copy_to_host(h.data(), t.ptr(), h.nbytes());
  return h;
}

void* GpuExecutor::kernel_function(const Kernel& k) { return compiled(k.structure, k.symbol, k.name); }

void* GpuExecutor::compiled(const std::string& source, const std::string& symbol, const std::string& label) {
  auto it = by_symbol_.find(symbol);
  if (it != by_symbol_.end()) return it->second.fn;
  if (!nvrtc_) throw std::runtime_error("NVRTC is needed to compile kernel '" + label + "' and was not found");
  std::string arch = dev_.arch();
  std::string key = hash_hex(source + "\n" + Nvrtc::options() + "\n" + arch + "\n" + nvrtc_->version());
  Compiled c;
  c.cubin = cache_.load(key);
  if (c.cubin.empty()) {
    CompileResult r = nvrtc_->compile(source, symbol, arch, Emit::cubin);
    stats_.compiled++;
    stats_.compile_ms += r.ms;
    if (!r.ok) throw std::runtime_error(Nvrtc::explain(label + " (" + symbol + ")", source, r.log));
    c.cubin = std::move(r.binary);
    cache_.store(key, c.cubin);
  } else {
    stats_.disk_hits++;
  }
  c.fn = dev_.function(key, c.cubin, symbol);
  return by_symbol_.emplace(symbol, std::move(c)).first->second.fn;
}

void GpuExecutor::prepare(const std::vector<const ir::Trace*>& traces) {
  if (!nvrtc_) return;
  struct Job {
    std::string source, label, key;
    std::vector<std::string> symbols;
    CompileResult result;
  };
  std::vector<Job> jobs;
  std::unordered_set<std::string> seen;
  std::string arch = dev_.arch();
  auto want = [&](const std::string& source, std::vector<std::string> symbols, const std::string& label) {
    if (by_symbol_.count(symbols[0]) || !seen.insert(symbols[0]).second) return;
    std::string key = hash_hex(source + "\n" + Nvrtc::options() + "\n" + arch + "\n" + nvrtc_->version());
    std::string cubin = cache_.load(key);
    if (!cubin.empty()) {
      stats_.disk_hits++;
      for (const auto& sym : symbols) by_symbol_.emplace(sym, Compiled{cubin, dev_.function(key, cubin, sym)});
      return;
    }
    jobs.push_back({source, label, key, std::move(symbols), {}});
  };
  // The kernels run() will launch, found as tracer compile finds them.
  for (const ir::Trace* t : traces) {
    std::vector<Kernel> kernels;
    try {
      kernels = kernels_for(*t, dev_.sm_count(), dev_.compute_major(), dev_.max_shared_per_block());
    } catch (const std::exception&) {
      continue;  // run() reports it at the statement
    }
    for (const Kernel& k : kernels)
      want(k.structure, k.symbol2.empty() ? std::vector<std::string>{k.symbol} : std::vector<std::string>{k.symbol, k.symbol2},
           k.name);
  }
  // cuDNN's attention plans build (each compiles a kernel) on a thread of their own meanwhile.
  std::vector<std::pair<rt::cuda::AttentionProblem, bool>> problems;
  if (attention_choice_ != AttentionChoice::Tracer && attention_setting_error_.empty()) problems = attention_problems(traces);
  rt::cuda::Cudnn* dnn = problems.empty() ? nullptr : cudnn();
  std::vector<rt::cuda::Cudnn::Prepared> planned;
  std::thread planner;
  if (dnn)
    planner = std::thread([&] {
      try {
        dev_.make_current();
        for (const auto& [p, backward] : problems)
          if (dnn->unsupported(p, backward, dev_.compute_major()).empty()) planned.push_back(dnn->prepare(p, backward));
      } catch (...) {
        // run() prepares the plan again at the statement and reports what fails there.
      }
    });
  auto t0 = std::chrono::steady_clock::now();
  size_t workers = std::max<size_t>(1, std::min<size_t>(jobs.size(), std::thread::hardware_concurrency()));
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (size_t w = 0; w < workers && !jobs.empty(); ++w)
    pool.emplace_back([&] {
      for (size_t j = next++; j < jobs.size(); j = next++)
        jobs[j].result = nvrtc_->compile(jobs[j].source, jobs[j].symbols[0], arch, Emit::cubin);
    });
  for (auto& th : pool) th.join();
  if (planner.joinable()) planner.join();
  for (const auto& r : planned) {
    stats_.cudnn_plans_built += r.built;
    stats_.cudnn_plans_loaded += r.loaded;
    stats_.cudnn_plan_ms += r.ms;
  }
  stats_.compile_wall_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (Job& j : jobs) {
    stats_.compiled++;
    stats_.compile_ms += j.result.ms;
    if (!j.result.ok) throw std::runtime_error(Nvrtc::explain(j.label + " (" + j.symbols[0] + ")", j.source, j.result.log));
    cache_.store(j.key, j.result.binary);
    for (const auto& sym : j.symbols) by_symbol_.emplace(sym, Compiled{j.result.binary, dev_.function(j.key, j.result.binary, sym)});
  }
}

bool GpuExecutor::run_simple(const ir::Stmt& s, Values& env) {
  // Generated once per statement (the source, its hash and the function), then only launched.
  auto sit = simple_.find(&s);
  if (sit == simple_.end()) {
    Simple sp;
    std::string why;
    sp.ok = generate_simple(s, &sp.kernel, &why, dev_.sm_count());
    if (sp.ok) {
      sp.fn = compiled(sp.kernel.source, sp.kernel.symbol, "prims." + s.op->name);
      if (!sp.kernel.symbol2.empty()) sp.fn2 = compiled(sp.kernel.source, sp.kernel.symbol2, "prims." + s.op->name);
    }
    sit = simple_.emplace(&s, std::move(sp)).first;
  }
  const Simple& sp = sit->second;
  if (!sp.ok) return false;
  const SimpleKernel& k = sp.kernel;
  // The tensor arguments in order (a cat's list flattened, its empty parts left out as the
  // generator did), then the output.
  std::vector<rt::cuda::DevPtr> ptrs;
  ptrs.reserve(k.inputs + 2);
  bool usable = true;
  std::function<void(const ir::Arg&)> collect = [&](const ir::Arg& a) {
    if (a.kind == K::Proxy) {
      auto it = env.find(a.proxy.get());
      if (it == env.end() || transposed_.count(a.proxy.get())) {
        usable = false;
        return;
      }
      if (s.op->name == "cat" && it->second.nbytes() == 0) return;
      ptrs.push_back(it->second.ptr());
    } else if (a.is_seq()) {
      for (const ir::Arg& x : a.items) collect(x);
    }
  };
  for (const ir::Arg& a : s.args)
    if (ptrs.size() < k.inputs) collect(a);
  if (!usable || ptrs.size() != k.inputs) return false;
  if (k.sorts) {  // prims.sort: one block a line, the values and their positions
    DeviceTensor values = alloc(s.outputs[0]->type), positions = alloc(s.outputs[1]->type);
    rt::cuda::DevPtr x = ptrs[0], y = values.ptr(), p = positions.ptr();
    void* args[] = {&x, &y, &p};
    const unsigned blocks = static_cast<unsigned>(std::min<long long>(k.threads, 65535LL));
    dev_.launch(sp.fn, blocks, 1, k.block, k.shared_bytes, args);
    stats_.launches++;
    env[s.outputs[0].get()] = std::move(values);
    env[s.outputs[1].get()] = std::move(positions);
    return true;
  }
  DeviceTensor out = alloc(s.outputs[0]->type);
  auto grid = [&](long long threads) {
    return static_cast<unsigned>(std::max<long long>(1, std::min<long long>((threads + k.block - 1) / k.block, 65535LL)));
  };
  if (k.checks_index) index_check_pending_ = true;
  if (k.stages == 5) {  // take_backward: sort the positions by index, then one block per row
    launch_take_backward(k, sp.fn, ptrs[0], ptrs[1], out.ptr());
  } else if (k.checks_index && !k.symbol2.empty()) {
    // take_backward into a narrower dtype: accumulate in the math type, then convert.
    rt::cuda::Buffer acc(&dev_, static_cast<size_t>(k.partials) * k.accumulator_bytes);
    rt::cuda::DevPtr g = ptrs[0], ix = ptrs[1], a = acc.ptr, err = index_errors(), y = out.ptr();
    void* args1[] = {&g, &ix, &a, &err};
    dev_.launch(sp.fn, grid(k.threads), k.block, args1);
    void* args2[] = {&a, &y};
    dev_.launch(sp.fn2, grid(k.threads2), k.block, args2);
    stats_.launches += 2;
  } else if (k.symbol2.empty()) {
    ptrs.push_back(out.ptr());
    if (k.checks_index) ptrs.push_back(index_errors());
    std::vector<void*> args;
    for (auto& p : ptrs) args.push_back(&p);
    dev_.launch(sp.fn, grid(k.threads), k.block, args.data());
    stats_.launches++;
  } else {
    rt::cuda::Buffer partial(&dev_, static_cast<size_t>(k.partials) * 8);
    rt::cuda::DevPtr x = ptrs[0], p = partial.ptr, y = out.ptr();
    void* args1[] = {&x, &p};
    dev_.launch(sp.fn, grid(k.threads), k.block, args1);
    void* args2[] = {&p, &y};
    dev_.launch(sp.fn2, grid(k.threads2), k.block, args2);
    stats_.launches += 2;
  }
  env[s.outputs[0].get()] = std::move(out);
  return true;
}

// A slice that is one run of its packed input (unit steps; the dimensions after the first one it
// cuts taken whole, those before it one index each) is a view at an offset of the input's buffer,
// no kernel: an optimizer's coefficients sliced out of their tensor, whole rows of a batch.
bool GpuExecutor::slice_view(const ir::Stmt& s, Values& env) {
  auto it = env.find(s.args[0].proxy.get());
  if (it == env.end() || !it->second.buffer || !it->second.layout.empty()) return false;
  const DeviceTensor& x = it->second;
  const ir::TensorType& out = s.outputs[0]->type;
  if (x.dtype != out.dtype || rt::numel(out.shape) == 0) return false;
  ir::SliceSpec sp;
  try {
    sp = ir::slice_spec(s.args[0], s.args[1], s.args[2], s.args.size() > 3 ? s.args[3] : ir::Arg());
  } catch (const std::exception&) {
    return false;
  }
  const size_t nd = x.shape.size();
  if (sp.start.size() != nd || sp.step.size() != nd || out.shape.size() != nd) return false;
  int64_t offset = 0, stride = 1;
  bool cut = false;  // a dimension inside (nearer the last) is cut
  for (size_t d = nd; d-- > 0;) {
    const int64_t lo = sp.start[d], n = out.shape[d];
    if ((sp.step[d] != 1 && n != 1) || lo < 0 || n < 1 || lo + n > x.shape[d]) return false;
    if (cut && n != 1) return false;
    if (n != x.shape[d]) cut = true;
    offset += lo * stride;
    stride *= x.shape[d];
  }
  DeviceTensor v = x;
  v.offset += static_cast<size_t>(offset) * rt::dtype_size(x.dtype);
  v.shape = out.shape;
  env[s.outputs[0].get()] = std::move(v);
  return true;
}

void GpuExecutor::write_rng_base(const ir::ExecContext& ctx) {
  rng_host_[0] = static_cast<long long>(ctx.seed);
  rng_host_[1] = static_cast<long long>(ctx.rng_offset);
  dev_.copy_to_device_async(rng_base_->ptr, rng_host_, sizeof rng_host_);
}

void GpuExecutor::run_rng_state(const ir::Stmt& s, Values& env, ir::ExecContext& ctx) {
  if (!rng_fn_) {
    std::string symbol;
    std::string source = rng_state_source(&symbol);
    rng_fn_ = compiled(source, symbol, "prims.rng_state");
  }
  ensure_rng_base(ctx);
  long long delta = static_cast<long long>(ctx.rng_offset - rng_start_);
  DeviceTensor seed = alloc(s.outputs[0]->type), offset = alloc(s.outputs[1]->type);
  rt::cuda::DevPtr base = rng_base_->ptr, ps = seed.ptr(), po = offset.ptr();
  void* args[] = {&base, &delta, &ps, &po};
  dev_.launch(rng_fn_, 1, 32, args);
  stats_.launches++;
  ctx.rng_offset += static_cast<uint64_t>(s.args[0].i);
  env[s.outputs[0].get()] = std::move(seed);
  env[s.outputs[1].get()] = std::move(offset);
}

void GpuExecutor::ensure_rng_base(ir::ExecContext& ctx) {
  if (!rng_base_) rng_base_ = std::make_shared<rt::cuda::Buffer>(&dev_, 16);
  if (!rng_ready_) {
    // Outside a graph, the base is written here, in stream order, once per run; a graph's
    // replays write it before each launch (capture() below).
    write_rng_base(ctx);
    rng_start_ = ctx.rng_offset;
    rng_ready_ = true;
  }
}

bool GpuExecutor::run_uniform(const ir::Stmt& s, Values& env, ir::ExecContext& ctx) {
  const ir::TensorType& out = s.outputs[0]->type;
  if (rt::numel(out.shape) == 0) {  // nothing to draw; the generator still advances, as on the CPU
    env[s.outputs[0].get()] = alloc(out);
    ctx.rng_offset += 1;
    return true;
  }
  if (!rt::is_float(out.dtype) || !s.args[1].is_number() || !s.args[2].is_number() || !std::isfinite(s.args[1].number()) ||
      !std::isfinite(s.args[2].number()))
    return false;
  void*& fn = uniform_fns_[&s];  // generated once per statement (the source is all constants)
  if (!fn) {
    std::string symbol;
    std::string source = uniform_source(out, s.args[1].number(), s.args[2].number(), &symbol);
    fn = compiled(source, symbol, "prims.uniform");
  }
  ensure_rng_base(ctx);
  long long delta = static_cast<long long>(ctx.rng_offset - rng_start_);
  DeviceTensor y = alloc(out);
  rt::cuda::DevPtr base = rng_base_->ptr, py = y.ptr();
  void* args[] = {&base, &delta, &py};
  long long groups = (rt::numel(out.shape) + 3) / 4;
  dev_.launch(fn, static_cast<unsigned>(std::max<long long>(1, std::min<long long>((groups + 255) / 256, 16LL * dev_.sm_count()))),
              256, args);
  stats_.launches++;
  ctx.rng_offset += 1;  // one offset per stateful draw, as the CPU's uniform
  env[s.outputs[0].get()] = std::move(y);
  return true;
}

void GpuExecutor::run_on_cpu(const ir::Stmt& s, Values& env, ir::ExecContext& ctx) {
  if (in_graph_)
    throw std::runtime_error(s.op->ns + "." + s.op->name + " has no GPU kernel here and runs on the CPU, which a CUDA graph cannot capture");
  std::function<ir::Arg(const ir::Arg&)> host = [&](const ir::Arg& a) -> ir::Arg {
    if (a.kind == K::Proxy) {
      auto it = env.find(a.proxy.get());
      if (it == env.end()) throw std::runtime_error("'" + a.proxy->name + "' has no value (deleted or never defined)");
      rt::Tensor t = download(it->second, ctx.allocator);
      if (transposed_.count(a.proxy.get())) {
        std::vector<int64_t> perm(t.shape().size());
        for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
        std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
        t = rt::permute(t, perm, ctx.allocator);
      }
      return ir::Arg::of_tensor(t);
    }
    if (a.items.empty()) return a;
    ir::Arg out = a;
    for (ir::Arg& x : out.items) x = host(x);
    return out;
  };
  std::vector<ir::Arg> args;
  for (const ir::Arg& a : s.args) args.push_back(host(a));
  std::vector<rt::Tensor> outs = s.op->cpu(args, ctx);
  for (size_t i = 0; i < outs.size() && i < s.outputs.size(); ++i) env[s.outputs[i].get()] = upload(outs[i]);
  stats_.fallbacks++;
  if (std::find(stats_.fallback_ops.begin(), stats_.fallback_ops.end(), s.op->name) == stats_.fallback_ops.end())
    stats_.fallback_ops.push_back(s.op->name);
}

void GpuExecutor::run_stmt(const ir::Stmt& s, Values& env, ir::ExecContext& ctx, const std::unordered_set<const ir::Proxy*>& dying,
                           const std::unordered_set<const ir::Proxy*>& lazy) {
  try {
    if (s.kind == ir::StmtKind::Del) {
      for (const auto& p : s.deleted) {
        env.erase(p.get());
        transposed_.erase(p.get());
        if (auto v = views_.find(p.get()); v != views_.end()) {
          const ir::Stmt* f = v->second.fusion;
          views_.erase(v);
          if (!f) continue;  // an attention output written transposed: its buffer goes with it
          bool live = false;
          for (const auto& o : f->outputs) live = live || views_.count(o.get());
          if (!live) viewed_inputs_.erase(f);
        }
      }
      return;
    }
    if (s.kind == ir::StmtKind::Fusion && !materializing_ && !view_fusions_->empty() && skip_view_fusion(s, env)) return;
    if (!lazy.empty() && s.kind == ir::StmtKind::Prim && s.outputs.size() == 1 && lazy.count(s.outputs[0].get())) {
      env[s.outputs[0].get()] = env.at(s.args[0].proxy.get());  // read transposed by the matmul
      transposed_[s.outputs[0].get()] = true;
      return;
    }
    if (!views_.empty() && s.kind == ir::StmtKind::Prim && s.op->name == "transpose" && s.args[0].kind == K::Proxy) {
      // A transpose of a view (an attention output written transposed): a relabelling where the
      // result is packed, else the view made a tensor first (a transpose alone runs as a kernel).
      if (auto v = views_.find(s.args[0].proxy.get()); v != views_.end()) {
        if (alias_transposed_view(s, v->second, env)) return;
        materialize_views(s, env, ctx);
      }
    }
    if (s.kind == ir::StmtKind::Prim && s.op->name == "slice" && s.args[0].kind == K::Proxy &&
        !transposed_.count(s.args[0].proxy.get()) && slice_view(s, env))
      return;
    // Whether s is an elementwise group is decided once per statement (the launch path is hot:
    // bench/launch.trace measures it).
    auto pk = is_group_.find(&s);
    if (pk == is_group_.end())
      pk = is_group_.emplace(&s, is_elementwise_group(s) ? 1 : is_row_group(s) ? 2 : is_column_group(s) ? 3 : 0).first;
    if (pk->second == 1) {
      run_kernel(s, env, dying);
      return;
    }
    if (pk->second == 2) {
      run_row_kernel(s, env, dying);
      return;
    }
    if (pk->second == 3) {
      run_column_kernel(s, env, dying);
      return;
    }
    if (s.kind != ir::StmtKind::Prim) {
      run_stmts(s.subsymbols, env, ctx, {});
      for (const ir::Stmt& sub : s.subsymbols)
        for (const auto& p : sub.outputs) {
          bool is_out = false;
          for (const auto& o : s.outputs) is_out = is_out || o == p;
          if (!is_out) env.erase(p.get());
        }
      return;
    }
    if (s.op->ns != "prims") {  // a host's op (the embedding API): its CPU kernel
      run_on_cpu(s, env, ctx);
      return;
    }
    const std::string& op = s.op->name;
    if (op == "reshape" && s.args[0].kind == K::Proxy && !transposed_.count(s.args[0].proxy.get())) {
      DeviceTensor v = env.at(s.args[0].proxy.get());
      v.shape = s.outputs[0]->type.shape;
      env[s.outputs[0].get()] = std::move(v);
      return;
    }
    if (op == "bitcast" && s.args[0].kind == K::Proxy && !transposed_.count(s.args[0].proxy.get()) &&
        env.at(s.args[0].proxy.get()).layout.empty()) {  // the same bytes, read as another dtype
      DeviceTensor v = env.at(s.args[0].proxy.get());
      v.shape = s.outputs[0]->type.shape;
      v.dtype = s.outputs[0]->type.dtype;
      env[s.outputs[0].get()] = std::move(v);
      return;
    }
    if (lazy.count(s.outputs[0].get())) {
      env[s.outputs[0].get()] = env.at(s.args[0].proxy.get());  // read transposed by the matmul
      transposed_[s.outputs[0].get()] = true;
      return;
    }
    if (is_collective(op)) {
      run_collective(s, env, ctx);
      return;
    }
    if ((op == "matmul" || op == "linear") && run_matmul(s, env, lazy)) return;
    if ((op == "attention" || op == "attention_backward") && run_attention(s, env, ctx)) return;
    if (op == "uniform" && run_uniform(s, env, ctx)) return;
    if (op == "rng_state" && s.args[0].kind == K::Int && s.outputs.size() == 2) {
      run_rng_state(s, env, ctx);
      return;
    }
    if (run_simple(s, env)) return;
    run_on_cpu(s, env, ctx);
    // A new generator state (ctx's seed and offset, set on the host): the next draw writes the
    // device's base from it again.
    if (op == "set_rng_state") rng_ready_ = false;
  } catch (const ir::ExecError&) {
    throw;
  } catch (const std::exception& e) {
    throw ir::exec_error(s, e.what());
  }
}

void GpuExecutor::run_stmts(const std::vector<ir::Stmt>& stmts, Values& env, ir::ExecContext& ctx,
                            const std::unordered_set<const ir::Proxy*>& lazy) {
  std::unordered_set<const ir::Proxy*> dying;
  size_t skip = stmts.size();  // a gelu already run by its linear's epilogue
  struct Depth {
    int& d;
    explicit Depth(int& x) : d(x) { ++d; }
    ~Depth() { --d; }
  } depth(depth_);
  for (size_t i = 0; i < stmts.size(); ++i) {
    if (i == skip) continue;
    ir::dying_after(stmts, i, dying);
    if (check_ && !in_graph_ && depth_ == 1 && stmts[i].kind != ir::StmtKind::Del) {
      check_inputs(stmts[i], env, ctx);
      size_t before = skip;
      if (!run_linear_gelu(stmts, i, env, &skip)) run_stmt(stmts[i], env, ctx, dying, lazy);
      check_outputs(stmts, i, skip != before ? skip : stmts.size(), env, ctx);
      continue;
    }
    if (horizontal_on_ && depth_ == 1 && !profile_ && !check_ && stmts[i].kind == ir::StmtKind::Fusion && (skip <= i || skip == stmts.size())) {
      auto h0 = std::chrono::steady_clock::now();
      size_t next = 0;
      if (run_horizontal(stmts, i, env, ctx, lazy, &next)) {
        if (host_profile_) host_time("horizontal kernel", h0);
        i = next - 1;
        continue;
      }
    }
    if (host_profile_ && depth_ == 1) {
      auto h0 = std::chrono::steady_clock::now();
      size_t launches = stats_.launches, gemms = stats_.gemms;
      if (!run_pair(stmts, i, env, ctx, lazy, &skip)) run_stmt(stmts[i], env, ctx, dying, lazy);
      const ir::Stmt& s = stmts[i];
      host_time(s.kind == ir::StmtKind::Del ? "del" : stats_.gemms > gemms ? "matmul" : stats_.launches > launches ? "kernel"
                                                   : s.kind == ir::StmtKind::Prim ? "prim " + s.op->name : "no launch",
                h0);
      continue;
    }
    if (!profile_ || in_graph_ || stmts[i].kind == ir::StmtKind::Del) {
      if (!run_pair(stmts, i, env, ctx, lazy, &skip)) run_stmt(stmts[i], env, ctx, dying, lazy);
      continue;
    }
    // TRACER_GPU_PROFILE=1: device time of each statement (synchronizing), by kind.
    size_t launches = stats_.launches, gemms = stats_.gemms, fallbacks = stats_.fallbacks;
    const ir::Stmt& s = stmts[i];
    // Bytes the statement reads and writes (each tensor once; views count as their size).
    double bytes = 0;
    std::unordered_set<const ir::Proxy*> counted;
    auto count = [&](const ir::ProxyPtr& q) {
      auto it = env.find(q.get());
      if (it != env.end() && counted.insert(q.get()).second) bytes += static_cast<double>(it->second.nbytes());
    };
    if (profile_each_)
      for (const ir::Arg& a : s.args) ir::for_each_proxy(a, count);
    // Gated: the statement's host-side set-up (cuBLASLt, cuDNN, argument packing) is not timed.
    bool synced = false;
    double ms = dev_.time_ms([&] {
      if (!run_pair(stmts, i, env, ctx, lazy, &skip)) run_stmt(stmts[i], env, ctx, dying, lazy);
    }, true, &synced);
    if (profile_each_)
      for (const ir::ProxyPtr& o : s.outputs) count(o);
    std::string what = stats_.gemms > gemms ? "cublasLt " : stats_.fallbacks > fallbacks ? "cpu " : stats_.launches > launches ? "kernel " : "view ";
    if (synced) what = "(synchronizing, host time included) " + what;
    what += s.kind == ir::StmtKind::Prim ? s.op->name : s.callee;
    auto& e = profile_table_[what];
    e.first += ms;
    e.second += 1;
    if (profile_each_ && !s.outputs.empty())
      profile_rows_.push_back({ms, bytes, what + " -> " + s.outputs[0]->name + " " + rt::dtype_name(s.outputs[0]->type.dtype) +
                                              rt::shape_str(s.outputs[0]->type.shape)});
  }
}

void GpuExecutor::host_time(const std::string& what, std::chrono::steady_clock::time_point since) {
  auto& e = host_times_[what];
  e.first += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
  e.second += 1;
}

GpuExecutor::Values GpuExecutor::run(const ir::Trace& t, std::vector<DeviceTensor> inputs, ir::ExecContext& ctx) {
  if (inputs.size() != t.inputs.size())
    throw ir::ExecError{"the trace takes " + std::to_string(t.inputs.size()) + " inputs but " + std::to_string(inputs.size()) +
                            " were given",
                        {}, ""};
  auto h0 = std::chrono::steady_clock::now();
  poll_index_errors(false);  // an earlier run's bad index, if its flag has come back by now
  Values env;
  env.reserve(t.stmts.size() + t.inputs.size());
  transposed_.clear();
  if (!in_graph_) rng_ready_ = false;  // a new run writes its generator base at its first rng_state
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::TensorType& want = t.inputs[i]->type;
    if (inputs[i].dtype != want.dtype || inputs[i].shape != want.shape)
      throw ir::ExecError{"input '" + t.inputs[i]->name + "' should be " + rt::dtype_name(want.dtype) + rt::shape_str(want.shape) +
                              " but is " + rt::dtype_name(inputs[i].dtype) + rt::shape_str(inputs[i].shape),
                          {}, ""};
    if (!inputs[i].layout.empty()) continue;  // held transposed: after plan_views
    env[t.inputs[i].get()] = std::move(inputs[i]);
  }
  views_.clear();
  auto plan_it = trace_plans_.find(&t);
  if (plan_it == trace_plans_.end()) {
    TracePlan plan;
    plan_views(t, plan.view_fusions);
    plan.lazy = ir::lazy_transposes(t.stmts, &t.output);
    plan_it = trace_plans_.emplace(&t, std::move(plan)).first;
  }
  view_fusions_ = &plan_it->second.view_fusions;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].layout.empty()) take_layout_input(t, t.inputs[i], std::move(inputs[i]), env);
  inputs.clear();
  if (check_ && !in_graph_) check_begin(t, env, ctx);
  if (host_profile_) host_time("run: set-up", h0);
  auto h1 = std::chrono::steady_clock::now();
  run_stmts(t.stmts, env, ctx, plan_it->second.lazy);
  if (host_profile_) host_time("run: statements", h1);
  h1 = std::chrono::steady_clock::now();
  finish_collectives();
  Values out;
  out.reserve(env.size());
  ir::for_each_proxy(t.output, [&](const ir::ProxyPtr& p) {
    if (out.count(p.get())) return;  // (returned twice)
    auto it = env.find(p.get());
    if (it != env.end()) {
      out.insert(env.extract(it));  // env ends here: its entry moves over, nothing copied
      return;
    }
    // An attention output written transposed leaves as it is, its layout said.
    auto v = views_.find(p.get());
    if (v == views_.end() || !v->second.layout) throw ir::ExecError{"'" + p->name + "' has no value at return", {}, "return"};
    DeviceTensor d = v->second.base;
    d.shape = p->type.shape;
    d.layout = v->second.layout->perm;
    out[p.get()] = std::move(d);
  });
  views_.clear();
  viewed_inputs_.clear();
  if (check_ && !in_graph_) check_end(t);
  read_index_errors_later();  // a gather or scatter with a bad index: thrown when the flag is back
  if (host_profile_) {
    host_time("run: the end", h1);
    host_time("run: all", h0);
    if (host_times_["run: all"].second % 40 == 0) print_host_times();  // (the executor may outlive the output)
  }
  return out;
}

}  // namespace tracer::codegen
