// The GPU executor's matrix products: prims.matmul and prims.linear through cuBLASLt (batched,
// transposed operands read in place, linear's bias in the epilogue), and a linear followed by
// gelu(approximate="tanh") as one call with cuBLASLt's GELU epilogue, and a matmul followed by
// gelu_backward (tanh) as one call with the DGELU epilogue (by default only where no bias
// gradient is fused with it). See docs/codegen.md.
#include <algorithm>
#include <unordered_set>

#include "codegen/cuda_exec.h"
#include "ir/fusion.h"
#include "ir/group.h"
#include "ir/verify.h"

namespace tracer::codegen {

using rt::DType;
using rt::cuda::DeviceTensor;
using K = ir::Arg::Kind;

bool GpuExecutor::linear_operands(const ir::Stmt& s, Values& env, LinearOperands* out) {
  auto get = [&](const ir::Arg& a) -> const DeviceTensor* {
    if (a.kind != K::Proxy || transposed_.count(a.proxy.get())) return nullptr;
    auto it = env.find(a.proxy.get());
    return it == env.end() ? nullptr : &it->second;
  };
  const DeviceTensor* A = get(s.args[0]);
  const DeviceTensor* B = get(s.args[1]);
  if (!A || !B || A->dtype != B->dtype || B->shape.size() != 2 || A->shape.empty()) return false;
  DType dt = A->dtype;
  if (dt != DType::bf16 && dt != DType::f16 && dt != DType::f32 && dt != DType::f64) return false;
  int64_t K_ = B->shape[1], N = B->shape[0], M = K_ ? rt::numel(A->shape) / K_ : 0;
  if (M == 0 || N == 0 || K_ == 0) return false;  // empty products: the CPU path (zeros, bias)
  rt::cuda::DevPtr bias = 0;
  if (s.args.size() > 2 && s.args[2].kind != K::None) {  // through cuBLASLt's bias epilogue
    const DeviceTensor* Bias = get(s.args[2]);
    if (!Bias || Bias->dtype != dt || Bias->shape != rt::Shape{N}) return false;
    bias = Bias->ptr();
  }
  *out = LinearOperands{A, B, bias, M, N, K_, dt};
  return true;
}

bool GpuExecutor::matmul_operands(const ir::Stmt& s, Values& env, MatmulOperands* out) {
  auto get = [&](const ir::Arg& a, bool* transposed) -> const DeviceTensor* {
    if (a.kind != K::Proxy) return nullptr;
    auto it = env.find(a.proxy.get());
    if (it == env.end()) return nullptr;
    *transposed = transposed_.count(a.proxy.get()) > 0;
    return &it->second;
  };
  MatmulOperands m;
  m.A = get(s.args[0], &m.ta);
  m.B = get(s.args[1], &m.tb);
  if (!m.A || !m.B || m.A->dtype != m.B->dtype) return false;
  m.dt = m.A->dtype;
  if (m.dt != DType::bf16 && m.dt != DType::f16 && m.dt != DType::f32 && m.dt != DType::f64) return false;
  if (m.A->shape.size() < 2 || m.B->shape.size() < 2) return false;
  auto logical = [](rt::Shape sh, bool t) {
    if (t) std::swap(sh[sh.size() - 1], sh[sh.size() - 2]);
    return sh;
  };
  rt::Shape as = logical(m.A->shape, m.ta), bs = logical(m.B->shape, m.tb);
  m.M = as[as.size() - 2], m.K = as.back(), m.N = bs.back();
  if (bs[bs.size() - 2] != m.K) return false;
  rt::Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  m.na = rt::numel(ab), m.nb = rt::numel(bb);
  if (m.M == 0 || m.N == 0 || m.K == 0 || m.na == 0 || m.nb == 0) return false;  // empty products: the CPU path
  m.stacked = m.nb == 1 && bb.size() <= ab.size() && !m.ta;
  m.same_batch = ab == bb;
  *out = m;
  return true;
}

bool GpuExecutor::run_matmul(const ir::Stmt& s, Values& env, const std::unordered_set<const ir::Proxy*>& lazy) {
  (void)lazy;
  const ir::TensorType& ot = s.outputs[0]->type;
  if (s.op->name == "linear") {
    LinearOperands l;
    if (!linear_operands(s, env, &l)) return false;
    DeviceTensor C = alloc(ot);
    dev_.gemm(l.dt, false, true, l.M, l.N, l.K, l.A->ptr(), l.B->ptr(), C.ptr(), 1, 0, 0, 0, l.bias);
    stats_.gemms++;
    env[s.outputs[0].get()] = std::move(C);
    return true;
  }
  MatmulOperands m;
  if (!matmul_operands(s, env, &m)) return false;
  const int64_t M = m.M, N = m.N, K_ = m.K;
  DeviceTensor C = alloc(ot);
  if (m.stacked) {
    dev_.gemm(m.dt, false, m.tb, m.na * M, N, K_, m.A->ptr(), m.B->ptr(), C.ptr(), 1, 0, 0, 0);  // stacked rows
  } else if (m.same_batch) {
    dev_.gemm(m.dt, m.ta, m.tb, M, N, K_, m.A->ptr(), m.B->ptr(), C.ptr(), m.na, M * K_, K_ * N, M * N);
  } else if (m.nb == 1) {
    dev_.gemm(m.dt, m.ta, m.tb, M, N, K_, m.A->ptr(), m.B->ptr(), C.ptr(), m.na, M * K_, 0, M * N);
  } else if (m.na == 1) {
    dev_.gemm(m.dt, m.ta, m.tb, M, N, K_, m.A->ptr(), m.B->ptr(), C.ptr(), m.nb, 0, K_ * N, M * N);
  } else {
    return false;
  }
  stats_.gemms++;
  env[s.outputs[0].get()] = std::move(C);
  return true;
}

namespace {

// The primitive op of s (s itself, or a composite made of it alone, as ltorch.linear of
// prims.linear) when it is one with one output; else null.
const ir::Stmt* single_prim(const ir::Stmt& s, const char* op) {
  const ir::Stmt* p = &s;
  if (p->kind == ir::StmtKind::Composite && p->subsymbols.size() == 1 && p->outputs.size() == 1 &&
      p->subsymbols[0].outputs.size() == 1 && p->subsymbols[0].outputs[0] == p->outputs[0])
    p = &p->subsymbols[0];
  if (p->kind != ir::StmtKind::Prim || !p->op || p->op->name != op || p->outputs.size() != 1) return nullptr;
  return p;
}

// The statement after stmts[i] (dels skipped) when y is still alive there; else stmts.size().
size_t next_statement(const std::vector<ir::Stmt>& stmts, size_t i, const ir::Proxy* y) {
  size_t k = i + 1;
  for (; k < stmts.size() && stmts[k].kind == ir::StmtKind::Del; ++k)
    for (const auto& p : stmts[k].deleted)
      if (p.get() == y) return stmts.size();
  return k;
}

// The gelu of s (a composite ltorch.gelu, alone or as a fusion's only statement) when it is the
// tanh form of y, with one output; else null.
const ir::Stmt* gelu_tanh_of(const ir::Stmt& s, const ir::Proxy* y) {
  const ir::Stmt* g = &s;
  if (s.kind == ir::StmtKind::Fusion) {
    if (s.subsymbols.size() != 1 || s.outputs.size() != 1) return nullptr;
    g = &s.subsymbols[0];
    if (g->outputs.size() != 1 || g->outputs[0] != s.outputs[0]) return nullptr;
  }
  if (g->kind != ir::StmtKind::Composite || g->callee != "ltorch.gelu" || g->outputs.size() != 1) return nullptr;
  if (g->args.empty() || g->args[0].kind != K::Proxy || g->args[0].proxy.get() != y) return nullptr;
  const ir::Arg* approx = g->args.size() > 1 ? &g->args[1] : nullptr;
  for (const auto& [name, a] : g->kwargs)
    if (name == "approximate") approx = &a;
  if (!approx || approx->kind != K::Str || approx->s != "tanh") return nullptr;
  if (g->outputs[0]->type.dtype != y->type.dtype || g->outputs[0]->type.shape != y->type.shape) return nullptr;
  return g;
}

// The tanh-form approximate argument of a gelu or gelu_backward call at position pos (or by name).
bool approximate_tanh(const ir::Stmt& g, size_t pos) {
  const ir::Arg* approx = g.args.size() > pos ? &g.args[pos] : nullptr;
  for (const auto& [name, a] : g.kwargs)
    if (name == "approximate") approx = &a;
  return approx && approx->kind == K::Str && approx->s == "tanh";
}

// gelu_backward(y, x, "tanh") in s with y its cotangent: the composite alone, or a fusion of it,
// maybe followed by the sum of its result over every dimension but the last (a bias gradient),
// whose outputs are no others. y, x and the result of one dtype and shape.
struct GeluBackward {
  const ir::Proxy* x = nullptr;
  const ir::Proxy* dh = nullptr;     // the gradient at GELU's input
  const ir::Proxy* bgrad = nullptr;  // its column sums, or null
  const ir::Stmt* sum = nullptr;     // the statement giving them
  bool dh_out = true;                // whether s defines dh (a fusion may keep it inside)
};
bool gelu_backward_tanh_of(const ir::Stmt& s, const ir::Proxy* y, GeluBackward* out) {
  const ir::Stmt* g = &s;
  const ir::Stmt* sum = nullptr;
  if (s.kind == ir::StmtKind::Fusion) {
    if (s.subsymbols.empty() || s.subsymbols.size() > 2) return false;
    g = &s.subsymbols[0];
    if (s.subsymbols.size() == 2) sum = &s.subsymbols[1];
  }
  if (g->kind != ir::StmtKind::Composite || g->callee != "ltorch.gelu_backward" || g->outputs.size() != 1) return false;
  if (g->args.size() < 2 || g->args[0].kind != K::Proxy || g->args[0].proxy.get() != y || g->args[1].kind != K::Proxy) return false;
  if (!approximate_tanh(*g, 2)) return false;
  GeluBackward r;
  r.x = g->args[1].proxy.get();
  r.dh = g->outputs[0].get();
  for (const ir::Proxy* p : {r.x, r.dh})
    if (p->type.dtype != y->type.dtype || p->type.shape != y->type.shape) return false;
  if (sum) {
    sum = single_prim(*sum, "sum");  // ltorch.sum is a composite of prims.sum alone
    size_t lead = 0;
    if (!sum || !ir::column_reduction(*sum, nullptr, &lead) || sum->args[0].proxy.get() != r.dh ||
        lead + 1 != r.dh->type.shape.size() || sum->outputs[0]->type.dtype != r.dh->type.dtype)
      return false;
    r.bgrad = sum->outputs[0].get();
    r.sum = sum;
    r.dh_out = false;
    for (const auto& o : s.outputs) {
      if (o.get() == r.dh) r.dh_out = true;
      else if (o.get() != r.bgrad) return false;
    }
  }
  *out = r;
  return true;
}

}  // namespace

bool GpuExecutor::run_linear_gelu(const std::vector<ir::Stmt>& stmts, size_t i, Values& env, size_t* j) {
  const ir::Stmt* lin = single_prim(stmts[i], "linear");
  if (!lin) return false;
  const ir::Stmt& s = *lin;
  const ir::Proxy* y = s.outputs[0].get();
  const size_t k = next_statement(stmts, i, y);
  if (k == stmts.size()) return false;
  const ir::Stmt* g = gelu_tanh_of(stmts[k], y);
  if (!g) return false;
  LinearOperands l;
  if (!linear_operands(s, env, &l) || l.dt == DType::f64) return false;  // cuBLASLt's GELU: 16-bit and f32
  // y is written too (cuBLASLt's aux output) unless it dies right after the gelu.
  std::unordered_set<const ir::Proxy*> dying;
  ir::dying_after(stmts, k, dying);
  bool keep_y = !dying.count(y);
  DeviceTensor Z, Y;
  try {
    Z = alloc(g->outputs[0]->type);
    if (keep_y) Y = alloc(s.outputs[0]->type);
    if (!dev_.gemm_gelu(l.dt, l.M, l.N, l.K, l.A->ptr(), l.B->ptr(), Z.ptr(), l.bias, keep_y ? Y.ptr() : 0)) return false;
  } catch (const std::exception& e) {
    throw ir::ExecError{"linear: " + std::string(e.what()), s.loc, ir::print_stmt_line(s)};
  }
  stats_.gemms++;
  stats_.gelu_epilogues++;
  if (keep_y) env[y] = std::move(Y);
  env[g->outputs[0].get()] = std::move(Z);
  *j = k;
  return true;
}

bool GpuExecutor::run_matmul_dgelu(const std::vector<ir::Stmt>& stmts, size_t i, Values& env, ir::ExecContext& ctx,
                                   const std::unordered_set<const ir::Proxy*>& lazy, size_t* j) {
  if (check_ || dgelu_epilogue_ == DGeluEpilogue::Off) return false;  // TRACER_GPU_CHECK compares each statement's own outputs
  const ir::Stmt* mm = single_prim(stmts[i], "matmul");
  if (!mm) return false;
  const ir::Stmt& s = *mm;
  const ir::Proxy* y = s.outputs[0].get();
  const size_t k = next_statement(stmts, i, y);
  if (k == stmts.size()) return false;
  GeluBackward g;
  if (!gelu_backward_tanh_of(stmts[k], y, &g)) return false;
  // Measured on the H200 (bench/results/2026-12-02-h200-gpt-s7.md, the GPT's [8192, 768] x
  // [768, 3072]): DGELU alone 0.078 ms against 0.097 for the product and the gelu_backward apart;
  // with a bias gradient, DGELU_BGRAD 0.23 ms and DGELU with the sum's column kernel after it
  // 0.108, against 0.107 for the product and one fused kernel of both. So by default only a
  // gelu_backward without a bias gradient takes the epilogue.
  if (g.bgrad && dgelu_epilogue_ == DGeluEpilogue::Auto) return false;
  // The product itself is never written: nothing after the gelu_backward may read it.
  std::unordered_set<const ir::Proxy*> dying;
  ir::dying_after(stmts, k, dying);
  if (!dying.count(y)) return false;
  MatmulOperands m;
  if (!matmul_operands(s, env, &m) || m.dt == DType::f64 || !(m.stacked || (m.na == 1 && m.nb == 1))) return false;
  if (m.A->layout.size() || m.B->layout.size()) return false;
  auto xi = env.find(g.x);
  if (xi == env.end() || xi->second.dtype != m.dt || !xi->second.layout.empty() || transposed_.count(g.x)) return false;
  const int64_t rows = m.stacked ? m.na * m.M : m.M;
  if (rt::numel(xi->second.shape) != rows * m.N) return false;
  const bool bgrad = g.bgrad && dgelu_epilogue_ == DGeluEpilogue::BGrad;
  DeviceTensor C, Bgrad;
  try {
    C = alloc(g.dh->type);
    if (bgrad) Bgrad = alloc(g.bgrad->type);
    if (!dev_.gemm_dgelu(m.dt, m.stacked ? false : m.ta, m.tb, rows, m.N, m.K, m.A->ptr(), m.B->ptr(), C.ptr(), xi->second.ptr(),
                         bgrad ? Bgrad.ptr() : 0))
      return false;
  } catch (const std::exception& e) {
    throw ir::ExecError{"matmul: " + std::string(e.what()), s.loc, ir::print_stmt_line(s)};
  }
  stats_.gemms++;
  stats_.dgelu_epilogues++;
  env[g.dh] = std::move(C);
  if (bgrad) env[g.bgrad] = std::move(Bgrad);
  if (g.bgrad && !bgrad) run_stmt(*g.sum, env, ctx, {}, lazy);
  if (!g.dh_out) env.erase(g.dh);
  *j = k;
  return true;
}

}  // namespace tracer::codegen
