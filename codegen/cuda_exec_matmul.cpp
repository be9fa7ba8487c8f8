// The GPU executor's matrix products: prims.matmul and prims.linear through cuBLASLt (batched,
// transposed operands read in place, linear's bias in the epilogue), and a linear followed by
// gelu(approximate="tanh") as one call with cuBLASLt's GELU epilogue. See docs/codegen.md.
#include <algorithm>
#include <unordered_set>

#include "codegen/cuda_exec.h"
#include "ir/fusion.h"
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

bool GpuExecutor::run_matmul(const ir::Stmt& s, Values& env, const std::unordered_set<const ir::Proxy*>& lazy) {
  (void)lazy;
  const std::string& op = s.op->name;
  auto get = [&](const ir::Arg& a, bool* transposed) -> const DeviceTensor* {
    if (a.kind != K::Proxy) return nullptr;
    auto it = env.find(a.proxy.get());
    if (it == env.end()) return nullptr;
    *transposed = transposed_.count(a.proxy.get()) > 0;
    return &it->second;
  };
  const ir::TensorType& ot = s.outputs[0]->type;
  if (op == "linear") {
    LinearOperands l;
    if (!linear_operands(s, env, &l)) return false;
    DeviceTensor C = alloc(ot);
    dev_.gemm(l.dt, false, true, l.M, l.N, l.K, l.A->ptr(), l.B->ptr(), C.ptr(), 1, 0, 0, 0, l.bias);
    stats_.gemms++;
    env[s.outputs[0].get()] = std::move(C);
    return true;
  }
  bool ta = false, tb = false;
  const DeviceTensor* A = get(s.args[0], &ta);
  const DeviceTensor* B = get(s.args[1], &tb);
  if (!A || !B || A->dtype != B->dtype) return false;
  DType dt = A->dtype;
  if (dt != DType::bf16 && dt != DType::f16 && dt != DType::f32 && dt != DType::f64) return false;
  if (A->shape.size() < 2 || B->shape.size() < 2) return false;
  auto logical = [](rt::Shape sh, bool t) {
    if (t) std::swap(sh[sh.size() - 1], sh[sh.size() - 2]);
    return sh;
  };
  rt::Shape as = logical(A->shape, ta), bs = logical(B->shape, tb);
  int64_t M = as[as.size() - 2], K_ = as.back(), N = bs.back();
  if (bs[bs.size() - 2] != K_) return false;
  rt::Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  int64_t na = rt::numel(ab), nb = rt::numel(bb);
  if (M == 0 || N == 0 || K_ == 0 || na == 0 || nb == 0) return false;  // empty products: the CPU path
  DeviceTensor C = alloc(ot);
  if (nb == 1 && bb.size() <= ab.size() && !ta) {
    dev_.gemm(dt, false, tb, na * M, N, K_, A->ptr(), B->ptr(), C.ptr(), 1, 0, 0, 0);  // stacked rows
  } else if (ab == bb) {
    dev_.gemm(dt, ta, tb, M, N, K_, A->ptr(), B->ptr(), C.ptr(), na, M * K_, K_ * N, M * N);
  } else if (nb == 1) {
    dev_.gemm(dt, ta, tb, M, N, K_, A->ptr(), B->ptr(), C.ptr(), na, M * K_, 0, M * N);
  } else if (na == 1) {
    dev_.gemm(dt, ta, tb, M, N, K_, A->ptr(), B->ptr(), C.ptr(), nb, 0, K_ * N, M * N);
  } else {
    return false;
  }
  stats_.gemms++;
  env[s.outputs[0].get()] = std::move(C);
  return true;
}

namespace {

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

}  // namespace

bool GpuExecutor::run_linear_gelu(const std::vector<ir::Stmt>& stmts, size_t i, Values& env, size_t* j) {
  // prims.linear, or the composite ltorch.linear made of it alone.
  const ir::Stmt* lin = &stmts[i];
  if (lin->kind == ir::StmtKind::Composite && lin->subsymbols.size() == 1 && lin->outputs.size() == 1 &&
      lin->subsymbols[0].outputs.size() == 1 && lin->subsymbols[0].outputs[0] == lin->outputs[0])
    lin = &lin->subsymbols[0];
  const ir::Stmt& s = *lin;
  if (s.kind != ir::StmtKind::Prim || !s.op || s.op->name != "linear" || s.outputs.size() != 1) return false;
  const ir::Proxy* y = s.outputs[0].get();
  size_t k = i + 1;
  for (; k < stmts.size() && stmts[k].kind == ir::StmtKind::Del; ++k)
    for (const auto& p : stmts[k].deleted)
      if (p.get() == y) return false;
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

}  // namespace tracer::codegen
