// TRACER_GPU_CHECK: the GPU executor checked statement by statement against the CPU backend
// (docs/codegen.md, "Checking the GPU against the CPU"). Level 1 recomputes every top-level
// statement on the CPU from the GPU's own inputs to it and compares the outputs, so an error is
// reported at the statement that makes it and does not spread. Level 2 also keeps a host copy of
// every live value and, after each statement, compares the live values with their copies: a
// value that changes after it was computed (a buffer written while someone still reads it) is
// reported with the statement that wrote over it.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <sstream>
#include <unordered_set>

#include "codegen/cuda_exec.h"
#include "ir/fusion.h"
#include "ir/verify.h"
#include "runtime/kernels.h"

namespace tracer::codegen {

using rt::cuda::DeviceTensor;
using K = ir::Arg::Kind;

namespace {

// The proxies a group of statements reads that none of them defines, in first-use order.
std::vector<ir::ProxyPtr> free_inputs(const std::vector<const ir::Stmt*>& stmts) {
  std::vector<ir::ProxyPtr> out;
  std::unordered_set<const ir::Proxy*> defined, seen;
  std::vector<const ir::Stmt*> prims;
  for (const ir::Stmt* s : stmts) {
    if (s->kind == ir::StmtKind::Prim) prims.push_back(s);
    else ir::flat_prims(*s, prims);
  }
  for (const ir::Stmt* p : prims) {
    for (const ir::Arg& a : p->args)
      ir::for_each_proxy(a, [&](const ir::ProxyPtr& q) {
        if (!defined.count(q.get()) && seen.insert(q.get()).second) out.push_back(q);
      });
    for (const auto& o : p->outputs) defined.insert(o.get());
  }
  return out;
}

bool stateful_random(const std::vector<const ir::Stmt*>& stmts) {
  std::vector<const ir::Stmt*> prims;
  for (const ir::Stmt* s : stmts) {
    if (s->kind == ir::StmtKind::Prim) prims.push_back(s);
    else ir::flat_prims(*s, prims);
  }
  for (const ir::Stmt* p : prims)
    if (p->op && (p->op->name == "uniform" || p->op->name == "rng_state")) return true;
  return false;
}

double tolerance(rt::DType d) {
  switch (d) {
    case rt::DType::bf16: return 2e-2;
    case rt::DType::f16: return 1e-2;
    case rt::DType::f32: return 1e-3;
    case rt::DType::f64: return 1e-9;
    default: return 0;
  }
}

// Relative error of a against the reference r: ||a - r|| / ||r|| for floats (a NaN or an
// infinity where the other has none counts as infinite), the share of unequal elements for
// integers and booleans.
double difference(const rt::Tensor& a, const rt::Tensor& r, int64_t* worst) {
  int64_t n = r.numel();
  *worst = -1;
  if (rt::is_float(r.dtype())) {
    double num = 0, den = 0, big = -1;
    for (int64_t i = 0; i < n; ++i) {
      double x = a.get(i), y = r.get(i);
      if (std::isnan(x) != std::isnan(y) || ((std::isinf(x) || std::isinf(y)) && x != y)) {
        *worst = i;
        return INFINITY;
      }
      if (std::isnan(x)) continue;
      if (std::isinf(x)) continue;
      double d = x - y;
      num += d * d;
      den += y * y;
      if (std::fabs(d) > big) {
        big = std::fabs(d);
        *worst = i;
      }
    }
    return num == 0 ? 0 : den == 0 ? INFINITY : std::sqrt(num / den);
  }
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i)
    if (a.get(i) != r.get(i)) {
      if (*worst < 0) *worst = i;
      ++bad;
    }
  return n ? static_cast<double>(bad) / static_cast<double>(n) : 0;
}

}  // namespace

rt::Tensor GpuExecutor::host_value(const ir::Proxy* p, const Values& env, rt::Allocator* al) {
  auto it = env.find(p);
  if (it == env.end()) throw std::runtime_error("'" + p->name + "' has no value (deleted or never defined)");
  rt::Tensor t = download(it->second, al);
  if (transposed_.count(p)) {
    std::vector<int64_t> perm(t.shape().size());
    for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
    std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
    t = rt::permute(t, perm, al);
  }
  return t;
}

void GpuExecutor::check_inputs(const ir::Stmt& s, const Values& env, ir::ExecContext& ctx) {
  check_in_.clear();
  check_in_names_ = free_inputs({&s});
  for (const auto& p : check_in_names_) check_in_.push_back(host_value(p.get(), env, ctx.allocator));
}

void GpuExecutor::check_outputs(const std::vector<ir::Stmt>& stmts, size_t i, size_t also, const Values& env, ir::ExecContext& ctx) {
  std::vector<const ir::Stmt*> ran = {&stmts[i]};
  if (also < stmts.size()) ran.push_back(&stmts[also]);
  std::string line = ir::print_stmt_line(stmts[i]);
  auto report = [&](const std::string& what) {
    ++check_failures_;
    ++check_trace_failures_;
    std::cerr << "gpu-check: " << what << "\n    in: " << line << "\n";
  };
  // With the GELU epilogue the pair reads what the linear read (the gelu reads only y): the
  // inputs downloaded before the linear serve both.
  if (!stateful_random(ran)) {
    ir::Trace t;
    t.name = "gpu_check";
    t.inputs = check_in_names_;
    std::vector<ir::Arg> outs;
    for (const ir::Stmt* s : ran) {
      t.stmts.push_back(*s);
      for (const auto& o : s->outputs) outs.push_back(ir::Arg::of_proxy(o));
    }
    t.output = ir::Arg::of_seq(K::Tuple, outs);
    ir::ExecContext cpu = ctx;
    cpu.reuse = nullptr;
    ir::Arg ref;
    try {
      ref = ir::execute(t, check_in_, cpu);
    } catch (const ir::ExecError& e) {
      report("the CPU could not run the statement: " + e.message);
      return;
    }
    for (size_t j = 0; j < outs.size(); ++j) {
      const ir::Proxy* p = outs[j].proxy.get();
      if (!env.count(p)) continue;  // not kept (the linear under a GELU epilogue that frees it)
      rt::Tensor got = host_value(p, env, ctx.allocator);
      const rt::Tensor& want = ref.items[j].tensor;
      int64_t at = -1;
      double err = difference(got, want, &at);
      ++check_compared_;
      check_worst_ = std::max(check_worst_, std::isinf(err) ? 1e300 : err);
      if (err > tolerance(want.dtype())) {
        std::ostringstream m;
        m << p->name << " " << rt::dtype_name(want.dtype()) << rt::shape_str(want.shape()) << " differs from the CPU: relative error "
          << err;
        if (at >= 0) m << " (element " << at << ": gpu " << got.get(at) << ", cpu " << want.get(at) << ")";
        report(m.str());
      }
    }
  }
  if (check_ < 2) return;
  // Level 2: the live values must still hold what they held when computed.
  for (auto it = check_snap_.begin(); it != check_snap_.end();) {
    auto e = env.find(it->first);
    if (e == env.end() || e->second.ptr() != it->second.ptr) {
      it = check_snap_.erase(it);
      continue;
    }
    rt::Tensor now = host_value(it->first, env, ctx.allocator);
    if (now.nbytes() != it->second.host.nbytes() || std::memcmp(now.data(), it->second.host.data(), now.nbytes()) != 0) {
      report("'" + it->first->name + "' (computed by: " + it->second.origin + ") changed after it was computed");
      it->second.host = now;
    }
    ++it;
  }
  for (const ir::Stmt* s : ran)
    for (const auto& o : s->outputs) {
      auto e = env.find(o.get());
      if (e == env.end()) continue;
      check_snap_[o.get()] = Snapshot{e->second.ptr(), host_value(o.get(), env, ctx.allocator), ir::print_stmt_line(*s)};
    }
}

void GpuExecutor::check_begin(const ir::Trace& t, const Values& env, ir::ExecContext& ctx) {
  check_snap_.clear();
  check_compared_ = check_trace_failures_ = 0;
  check_worst_ = 0;
  if (check_ < 2) return;
  for (const auto& p : t.inputs) {
    auto e = env.find(p.get());
    if (e != env.end()) check_snap_[p.get()] = Snapshot{e->second.ptr(), host_value(p.get(), env, ctx.allocator), "an input of " + t.name};
  }
}

void GpuExecutor::check_end(const ir::Trace& t) {
  std::cerr << "gpu-check: " << t.name << ": " << check_compared_ << " outputs compared with the CPU, " << check_trace_failures_
            << " problems, largest relative error " << check_worst_ << "\n";
  check_snap_.clear();
}

}  // namespace tracer::codegen
