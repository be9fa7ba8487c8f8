// The GPU executor's attention statements (prims.attention, prims.attention_backward): the flash
// kernels or the rows kernels of codegen/cuda_attention.cpp, as attention_path_for chooses for
// the device; see docs/codegen.md, "Attention".
#include <algorithm>

#include "codegen/cuda_attention.h"
#include "codegen/cuda_exec.h"

namespace tracer::codegen {

using rt::DType;
using rt::cuda::DeviceTensor;
using K = ir::Arg::Kind;

// attention(q, k, v, is_causal, scale) and attention_backward(grad, q, k, v, out, lse, is_causal,
// scale): the operands on the device and the sizes, read once.
struct AttentionArgs {
  bool backward = false;
  const DeviceTensor *q = nullptr, *k = nullptr, *v = nullptr;
  const DeviceTensor *g = nullptr, *o = nullptr, *lse = nullptr;  // the backward's
  int L = 0, S = 0, E = 0, Ev = 0;
  long long batch = 0;
  bool causal = false;
  double scale = 1;
};

std::pair<void*, const AttentionKernel*> GpuExecutor::attention_kernel(const std::string& key,
                                                                       const std::function<AttentionKernel()>& make,
                                                                       const std::string& label) {
  auto it = attention_kernels_.find(key);
  if (it == attention_kernels_.end()) it = attention_kernels_.emplace(key, make()).first;
  return {compiled(it->second.source, it->second.symbol, label), &it->second};
}

bool GpuExecutor::run_attention(const ir::Stmt& s, Values& env) {
  const AttentionPath path = attention_path_for(s, dev_.compute_major(), dev_.max_shared_per_block());
  if (path == AttentionPath::None) return false;
  AttentionArgs a;
  a.backward = s.op->name == "attention_backward";
  auto value = [&](size_t i) -> const DeviceTensor* {
    const ir::Arg& x = s.args[i];
    if (x.kind != K::Proxy || transposed_.count(x.proxy.get())) return nullptr;
    auto it = env.find(x.proxy.get());
    return it == env.end() ? nullptr : &it->second;
  };
  const size_t f = a.backward ? 1 : 0;
  a.q = value(f);
  a.k = value(f + 1);
  a.v = value(f + 2);
  if (!a.q || !a.k || !a.v) return false;
  if (a.backward) {
    a.g = value(0);
    a.o = value(4);
    a.lse = value(5);
    if (!a.g || !a.o || !a.lse) return false;
  }
  const size_t r = a.q->shape.size();
  a.L = static_cast<int>(a.q->shape[r - 2]);
  a.S = static_cast<int>(a.k->shape[r - 2]);
  a.E = static_cast<int>(a.q->shape[r - 1]);
  a.Ev = static_cast<int>(a.v->shape[r - 1]);
  a.batch = rt::numel(a.q->shape) / (static_cast<long long>(a.L) * a.E);
  const ir::Arg &causal = s.args[a.backward ? 6 : 3], &scale = s.args[a.backward ? 7 : 4];
  a.causal = causal.kind == K::Bool && causal.b;
  a.scale = scale.number();
  if (path == AttentionPath::Rows) {
    run_attention_rows(s, env, a);
  } else {
    if (a.backward && a.lse->dtype != DType::f32) return false;
    run_attention_flash(s, env, a);
  }
  return true;
}

void GpuExecutor::run_attention_flash(const ir::Stmt& s, Values& env, const AttentionArgs& a) {
  const DType dt = a.q->dtype;
  const int padded = attention_padded(a.E);
  float scale_f = static_cast<float>(a.scale), scale_log2 = static_cast<float>(a.scale * 1.4426950408889634);
  // The kernels of one (dtype, head size, causality).
  const std::string tag = std::string(":") + rt::dtype_name(dt) + ":" + std::to_string(padded) + (a.causal ? "c" : "");
  const std::string label = "prims." + s.op->name;
  auto tiles = [](long long n) { return static_cast<unsigned>((n + 63) / 64); };
  int L = a.L, S = a.S, E = a.E;
  rt::cuda::DevPtr pq = a.q->ptr(), pk = a.k->ptr(), pv = a.v->ptr();
  if (!a.backward) {
    auto [fn, ak] = attention_kernel("fwd" + tag, [&] { return attention_forward_kernel(dt, padded, a.causal); }, label);
    DeviceTensor out = alloc(s.outputs[0]->type), lse = alloc(s.outputs[1]->type);
    rt::cuda::DevPtr po = out.ptr(), pl = lse.ptr();
    void* args[] = {&pq, &pk, &pv, &po, &pl, &L, &S, &E, &scale_log2};
    dev_.launch(fn, tiles(L), static_cast<unsigned>(a.batch), ak->block, ak->shared_bytes, args);
    stats_.launches++;
    env[s.outputs[0].get()] = std::move(out);
    env[s.outputs[1].get()] = std::move(lse);
    return;
  }
  long long rows = a.batch * L;
  rt::cuda::Buffer delta(&dev_, static_cast<size_t>(rows) * 4), dq_acc(&dev_, static_cast<size_t>(rows) * E * 4);
  DeviceTensor dq = alloc(s.outputs[0]->type), dk = alloc(s.outputs[1]->type), dv = alloc(s.outputs[2]->type);
  rt::cuda::DevPtr pg = a.g->ptr(), po = a.o->ptr(), pl = a.lse->ptr(), pd = delta.ptr, pa = dq_acc.ptr, pdq = dq.ptr(),
                   pdk = dk.ptr(), pdv = dv.ptr();
  {
    auto [fn, ak] = attention_kernel("delta" + tag, [&] { return attention_delta_kernel(dt); }, label);
    void* args[] = {&pg, &po, &pd, &pa, &rows, &E};
    dev_.launch(fn, static_cast<unsigned>((rows + 7) / 8), 1, ak->block, 0, args);
  }
  {
    auto [fn, ak] = attention_kernel("bwd" + tag, [&] { return attention_backward_kernel(dt, padded, a.causal); }, label);
    void* args[] = {&pq, &pk, &pv, &pg, &pl, &pd, &pa, &pdk, &pdv, &L, &S, &E, &scale_f, &scale_log2};
    dev_.launch(fn, tiles(S), static_cast<unsigned>(a.batch), ak->block, ak->shared_bytes, args);
  }
  {
    auto [fn, ak] = attention_kernel("dq" + tag, [&] { return attention_dq_kernel(dt); }, label);
    long long n = rows * E;
    void* args[] = {&pa, &pdq, &n, &scale_f};
    unsigned grid = static_cast<unsigned>(std::max<long long>(1, std::min<long long>((n + 255) / 256, 16LL * dev_.sm_count())));
    dev_.launch(fn, grid, 1, ak->block, 0, args);
  }
  stats_.launches += 3;
  env[s.outputs[0].get()] = std::move(dq);
  env[s.outputs[1].get()] = std::move(dk);
  env[s.outputs[2].get()] = std::move(dv);
}

void GpuExecutor::run_attention_rows(const ir::Stmt& s, Values& env, const AttentionArgs& a) {
  const DType dt = a.q->dtype;
  int L = a.L, S = a.S, E = a.E, Ev = a.Ev, causal = a.causal ? 1 : 0;
  long long rows = a.batch * L, key_rows = a.batch * S;
  const bool f64 = dt == DType::f64;
  double scale_d = a.scale;
  float scale_f = static_cast<float>(a.scale);
  void* pscale = f64 ? static_cast<void*>(&scale_d) : static_cast<void*>(&scale_f);  // the math type's
  const std::string tag = std::string(":") + rt::dtype_name(dt) + ":" + std::to_string(E) + ":" + std::to_string(Ev);
  const std::string label = "prims." + s.op->name;
  auto blocks = [](long long n) { return static_cast<unsigned>((n + 7) / 8); };  // 8 rows per block
  rt::cuda::DevPtr pq = a.q->ptr(), pk = a.k->ptr(), pv = a.v->ptr();
  if (!a.backward) {
    void* fn = attention_kernel("rows_fwd" + tag, [&] { return attention_rows_forward_kernel(dt, E, Ev); }, label).first;
    DeviceTensor out = alloc(s.outputs[0]->type), lse = alloc(s.outputs[1]->type);
    rt::cuda::DevPtr po = out.ptr(), pl = lse.ptr();
    void* args[] = {&pq, &pk, &pv, &po, &pl, &rows, &L, &S, &E, &Ev, pscale, &causal};
    dev_.launch(fn, blocks(rows), 1, 256, 0, args);
    stats_.launches++;
    env[s.outputs[0].get()] = std::move(out);
    env[s.outputs[1].get()] = std::move(lse);
    return;
  }
  rt::cuda::Buffer delta(&dev_, static_cast<size_t>(rows) * (f64 ? 8 : 4));
  DeviceTensor dq = alloc(s.outputs[0]->type), dk = alloc(s.outputs[1]->type), dv = alloc(s.outputs[2]->type);
  rt::cuda::DevPtr pg = a.g->ptr(), po = a.o->ptr(), pl = a.lse->ptr(), pd = delta.ptr, pdq = dq.ptr(), pdk = dk.ptr(),
                   pdv = dv.ptr();
  void* dq_fn = attention_kernel("rows_dq" + tag, [&] { return attention_rows_dq_kernel(dt, E, Ev); }, label).first;
  void* dkdv_fn = attention_kernel("rows_dkdv" + tag, [&] { return attention_rows_dkdv_kernel(dt, E, Ev); }, label).first;
  void* args1[] = {&pg, &pq, &pk, &pv, &po, &pl, &pd, &pdq, &rows, &L, &S, &E, &Ev, pscale, &causal};
  dev_.launch(dq_fn, blocks(rows), 1, 256, 0, args1);
  void* args2[] = {&pg, &pq, &pk, &pv, &pl, &pd, &pdk, &pdv, &key_rows, &L, &S, &E, &Ev, pscale, &causal};
  dev_.launch(dkdv_fn, blocks(key_rows), 1, 256, 0, args2);
  stats_.launches += 2;
  env[s.outputs[0].get()] = std::move(dq);
  env[s.outputs[1].get()] = std::move(dk);
  env[s.outputs[2].get()] = std::move(dv);
}

}  // namespace tracer::codegen
