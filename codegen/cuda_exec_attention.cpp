// The GPU executor's attention statements (prims.attention, prims.attention_backward): cuDNN's
// fused engines where the loaded cuDNN has one for the case (docs/cudnn.md), else the flash
// kernels or the rows kernels of codegen/cuda_attention.cpp, as attention_path_for chooses for
// the device; see docs/codegen.md, "Attention". TRACER_ATTENTION=cudnn|tracer forces a path.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <optional>

#include "codegen/cuda_attention.h"
#include "codegen/cuda_exec.h"
#include "ir/fusion.h"
#include "ir/group.h"

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
  const DeviceTensor* mask = nullptr;  // attn_mask, when given (the rows kernels read it)
};

std::pair<void*, const AttentionKernel*> GpuExecutor::attention_kernel(const std::string& key,
                                                                       const std::function<AttentionKernel()>& make,
                                                                       const std::string& label) {
  auto it = attention_kernels_.find(key);
  if (it == attention_kernels_.end()) it = attention_kernels_.emplace(key, make()).first;
  return {compiled(it->second.source, it->second.symbol, label), &it->second};
}

namespace {

// The problem cuDNN sees for contiguous operands [..., L, E]: the last batch dimension as heads.
rt::cuda::AttentionProblem problem_for(DType dt, const rt::Shape& q, int64_t S, int64_t Ev, bool causal, double scale) {
  const size_t r = q.size();
  const int64_t L = q[r - 2], E = q[r - 1];
  const int64_t batch = rt::numel(q) / (L * E);
  const int64_t heads = r >= 3 ? q[r - 3] : 1;
  return rt::cuda::AttentionProblem::contiguous(dt, heads ? batch / heads : 0, heads, L, S, E, Ev, causal, static_cast<float>(scale));
}

// prims.attention(q, k, v, is_causal, scale) or attention_backward(g, q, k, v, o, lse, ...):
// the problem from the statement's types, or false when they are not an attention's.
bool problem_of(const ir::Stmt& s, rt::cuda::AttentionProblem* p) {
  const bool bw = s.op->name == "attention_backward";
  const size_t f = bw ? 1 : 0;
  if (s.args.size() < f + 5) return false;
  const ir::Arg &q = s.args[f], &k = s.args[f + 1], &v = s.args[f + 2], &causal = s.args[bw ? 6 : 3], &scale = s.args[bw ? 7 : 4];
  if (q.kind != K::Proxy || k.kind != K::Proxy || v.kind != K::Proxy || !scale.is_number()) return false;
  const rt::Shape &qs = q.proxy->type.shape, &ks = k.proxy->type.shape, &vs = v.proxy->type.shape;
  if (qs.size() < 2 || ks.size() != qs.size() || vs.size() != qs.size() || rt::numel(qs) == 0 || rt::numel(ks) == 0) return false;
  *p = problem_for(q.proxy->type.dtype, qs, ks[ks.size() - 2], vs.back(), causal.kind == K::Bool && causal.b, scale.number());
  return true;
}

}  // namespace

std::vector<std::pair<rt::cuda::AttentionProblem, bool>> attention_problems(const std::vector<const ir::Trace*>& traces) {
  std::vector<std::pair<rt::cuda::AttentionProblem, bool>> out;
  std::function<void(const std::vector<ir::Stmt>&)> walk = [&](const std::vector<ir::Stmt>& stmts) {
    for (const ir::Stmt& s : stmts) {
      if (s.kind == ir::StmtKind::Composite) walk(s.subsymbols);
      if (s.kind != ir::StmtKind::Prim || !s.op || (s.op->name != "attention" && s.op->name != "attention_backward") || attention_masked(s)) continue;
      rt::cuda::AttentionProblem p;
      if (problem_of(s, &p)) out.emplace_back(p, s.op->name == "attention_backward");
    }
  };
  for (const ir::Trace* t : traces) walk(t->stmts);
  return out;
}

rt::cuda::Cudnn* GpuExecutor::cudnn() {
  if (!cudnn_tried_) {
    cudnn_tried_ = true;
    cudnn_ = rt::cuda::Cudnn::open(dev_, cache_.dir(), &cudnn_why_);
  }
  if (cudnn_) {
    stats_.cudnn_version = cudnn_->version_string();
    stats_.cudnn_library = cudnn_->library();
  } else {
    stats_.cudnn_missing = cudnn_why_;
  }
  return cudnn_.get();
}

void GpuExecutor::warn(const std::string& w) {
  if (std::find(stats_.warnings.begin(), stats_.warnings.end(), w) == stats_.warnings.end()) stats_.warnings.push_back(w);
}

std::string GpuExecutor::cudnn_ready(const rt::cuda::AttentionProblem& p, bool backward, bool* warn) {
  *warn = false;
  rt::cuda::Cudnn* dnn = cudnn();
  if (!dnn) {
    // Only worth a word where cuDNN would have had an engine.
    *warn = (p.dtype == DType::bf16 || p.dtype == DType::f16) && p.d % 8 == 0 && p.d == p.d_v && dev_.compute_major() >= 8;
    return cudnn_why_;
  }
  bool by_version = false;
  std::string why = dnn->unsupported(p, backward, dev_.compute_major(), &by_version);
  if (!why.empty()) {
    *warn = by_version;
    return why;
  }
  rt::cuda::Cudnn::Prepared r = dnn->prepare(p, backward);
  if (r.built) stats_.cudnn_plans_built++;
  if (r.loaded) stats_.cudnn_plans_loaded++;
  stats_.cudnn_plan_ms += r.ms;
  *warn = !r.error.empty();  // a plan that should exist did not build
  return r.error;
}

bool GpuExecutor::run_attention(const ir::Stmt& s, Values& env, ir::ExecContext& ctx) {
  if (!attention_setting_error_.empty()) throw std::runtime_error(attention_setting_error_);
  const bool masked = attention_masked(s);
  // Operands that are views of a fusion not run (cuda_exec_views.cpp): cuDNN reads them in
  // place, or the fusion runs now after all.
  bool viewed = false;
  for (const ir::Arg& x : s.args) viewed = viewed || (x.kind == K::Proxy && views_.count(x.proxy.get()));
  if (viewed) {
    rt::cuda::AttentionProblem p;
    std::vector<rt::cuda::DevPtr> ptrs;
    bool warn_unused = false;
    if (!masked && operand_views(s, env, {}, &p, &ptrs) && cudnn_ready(p, s.op->name == "attention_backward", &warn_unused).empty()) {
      launch_cudnn(s, env, p, ptrs);
      stats_.attention_cudnn++;
      return true;
    }
    materialize_views(s, env, ctx);
  }
  // A slice view may start anywhere in its buffer (GpuExecutor::slice_view): tracer's attention
  // kernels copy 16 bytes at a time and cuDNN's plans here take 16-byte operands, so an operand
  // that is not 16-byte aligned is copied to one that is first.
  for (const ir::Arg& x : s.args) {
    if (x.kind != K::Proxy) continue;
    auto it = env.find(x.proxy.get());
    if (it == env.end() || it->second.offset == 0 || it->second.ptr() % 16 == 0 || !it->second.layout.empty()) continue;
    DeviceTensor c = alloc(x.proxy->type);
    c.shape = it->second.shape;
    dev_.copy_device(c.ptr(), it->second.ptr(), it->second.nbytes());
    it->second = std::move(c);
  }
  const AttentionPath path = attention_path_for(s, dev_.compute_major(), dev_.max_shared_per_block());
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
  if (masked) {
    a.mask = value(a.backward ? 8 : 5);
    if (!a.mask) return false;
    if (attention_choice_ != AttentionChoice::Tracer && run_attention_cudnn_masked(s, env, a)) {
      stats_.attention_cudnn++;
      return true;
    }
  }
  if (!masked && attention_choice_ != AttentionChoice::Tracer && run_attention_cudnn(s, env, a)) {
    stats_.attention_cudnn++;
    return true;
  }
  if (path == AttentionPath::None) return false;
  stats_.attention_tracer++;
  if (path == AttentionPath::Rows) {
    run_attention_rows(s, env, a);
  } else {
    if (a.backward && a.lse->dtype != DType::f32) return false;
    run_attention_flash(s, env, a);
  }
  return true;
}

bool GpuExecutor::run_attention_cudnn(const ir::Stmt& s, Values& env, const AttentionArgs& a) {
  if (a.backward && (a.lse->dtype != DType::f32 || a.g->dtype != a.q->dtype || a.o->dtype != a.q->dtype)) return false;
  rt::cuda::AttentionProblem p = problem_for(a.q->dtype, a.q->shape, a.S, a.Ev, a.causal, a.scale);
  bool worth_a_warning = false;
  std::string why = a.batch == 0 || a.L == 0 || a.S == 0 ? "empty operands" : cudnn_ready(p, a.backward, &worth_a_warning);
  if (!why.empty()) {
    if (attention_choice_ == AttentionChoice::Cudnn)
      throw std::runtime_error("TRACER_ATTENTION=cudnn, but cuDNN cannot run prims." + s.op->name + ": " + why);
    if (worth_a_warning) warn("prims." + s.op->name + " runs on tracer's kernels, not cuDNN: " + why);
    return false;
  }
  if (a.backward) {
    launch_cudnn(s, env, p, {a.g->ptr(), a.q->ptr(), a.k->ptr(), a.v->ptr(), a.o->ptr()});
  } else {
    launch_cudnn(s, env, p, {a.q->ptr(), a.k->ptr(), a.v->ptr()});
  }
  return true;
}

bool GpuExecutor::run_attention_cudnn_masked(const ir::Stmt& s, Values& env, const AttentionArgs& a) {
  const DType dt = a.q->dtype;
  auto refuse = [&](const std::string& why) {
    if (attention_choice_ == AttentionChoice::Cudnn)
      throw std::runtime_error("TRACER_ATTENTION=cudnn, but cuDNN cannot run prims." + s.op->name + " with its mask: " + why);
    return false;
  };
  if (dt != DType::bf16 && dt != DType::f16) return refuse("cuDNN's fused attention takes bf16 and f16");
  if (a.mask->dtype != dt && a.mask->dtype != DType::b8)
    return refuse(std::string("a ") + rt::dtype_name(a.mask->dtype) + " mask would be rounded to " + rt::dtype_name(dt) +
                  " (the rows kernels add it exactly)");
  if (!a.mask->layout.empty()) return refuse("the mask is held transposed");
  if (a.backward && (a.lse->dtype != DType::f32 || a.g->dtype != dt || a.o->dtype != dt)) return refuse("the saved operands' dtypes");
  if (a.batch == 0 || a.L == 0 || a.S == 0) return refuse("empty operands");
  rt::cuda::AttentionProblem p = problem_for(dt, a.q->shape, a.S, a.Ev, a.causal, a.scale);
  // The mask against [batch..., L, S], right-aligned: the keys and queries whole; the heads'
  // dimension (the last batch one) 1 or h; the dimensions before it all 1 or all the query's.
  const ir::Shape& qs = a.q->shape;
  const ir::Shape& ms = a.mask->shape;
  const size_t r = qs.size();
  std::vector<int64_t> m(r, 1);  // the mask's size along each score dimension
  for (size_t i = 0; i < ms.size() && i < r; ++i) m[r - ms.size() + i] = ms[i];
  // A mask of one row for every query (a key-padding mask, [b, 1, 1, S]) is read at stride 0
  // over the queries; one that broadcasts over the keys is not given to cuDNN.
  if (ms.size() > r || m[r - 1] != a.S) return refuse("the mask broadcasts over keys");
  if (m[r - 2] != a.L && m[r - 2] != 1) return refuse("the mask's queries");
  const int64_t mask_L = m[r - 2];
  int64_t bias_h = 1, bias_b = 1;
  if (r >= 3) {
    if (m[r - 3] != 1 && m[r - 3] != qs[r - 3]) return refuse("the mask's heads");
    bias_h = m[r - 3];
    bool ones = true, all = true;
    for (size_t i = 0; i + 3 < r; ++i) {
      ones = ones && m[i] == 1;
      all = all && m[i] == qs[i];
    }
    if (!ones && !all) return refuse("the mask broadcasts over some batch dimensions and not others");
    bias_b = ones ? 1 : p.b;
  }
  p.bias = true;
  p.bias_b = bias_b;
  p.bias_h = bias_h;
  p.bias_s = {bias_h * mask_L * a.S, mask_L * a.S, mask_L == 1 ? 0 : a.S, 1};
  bool worth = false;
  std::string why = cudnn_ready(p, a.backward, &worth);
  if (!why.empty()) {
    if (attention_choice_ == AttentionChoice::Cudnn) return refuse(why);
    if (worth) warn("prims." + s.op->name + " with a mask runs on tracer's kernels, not cuDNN: " + why);
    return false;
  }
  // A b8 mask as 0 (kept) or -inf in the I/O dtype; one of the I/O dtype is read as it is.
  std::optional<DeviceTensor> converted;
  rt::cuda::DevPtr bias = a.mask->ptr();
  if (a.mask->dtype == DType::b8) {
    ir::TensorType mt;
    mt.dtype = dt;
    mt.shape = a.mask->shape;
    converted = alloc(mt);
    long long n = rt::numel(mt.shape);
    void* conv = attention_kernel(std::string("mask:b8:") + rt::dtype_name(dt), [&] { return attention_mask_kernel(DType::b8, dt); },
                                  "prims." + s.op->name).first;
    rt::cuda::DevPtr src = a.mask->ptr(), dst = converted->ptr();
    void* cargs[] = {&src, &dst, &n};
    dev_.launch(conv, static_cast<unsigned>(std::min<long long>((n + 255) / 256, 4096)), 1, 256, 0, cargs);
    stats_.launches++;
    bias = dst;
  }
  if (a.backward) launch_cudnn(s, env, p, {a.g->ptr(), a.q->ptr(), a.k->ptr(), a.v->ptr(), a.o->ptr()}, nullptr, bias);
  else launch_cudnn(s, env, p, {a.q->ptr(), a.k->ptr(), a.v->ptr()}, nullptr, bias);
  return true;
}

void GpuExecutor::launch_cudnn(const ir::Stmt& s, Values& env, const rt::cuda::AttentionProblem& p,
                               const std::vector<rt::cuda::DevPtr>& in, const std::vector<rt::cuda::DevPtr>* outs, rt::cuda::DevPtr bias) {
  rt::cuda::Cudnn& dnn = *cudnn_;
  const bool backward = s.op->name == "attention_backward";
  if (!backward && !out_layouts_.empty() && launch_cudnn_out_layout(s, env, p, in)) return;
  rt::cuda::Buffer ws(&dev_, dnn.engine_workspace(p, backward));
  if (!backward) {
    DeviceTensor out = alloc(s.outputs[0]->type), lse = alloc(s.outputs[1]->type);
    dnn.forward(p, in[0], in[1], in[2], out.ptr(), lse.ptr(), ws.ptr, bias);
    env[s.outputs[0].get()] = std::move(out);
    env[s.outputs[1].get()] = std::move(lse);
    return;
  }
  const DeviceTensor& lse = env.at(s.args[5].proxy.get());
  if (lse.dtype != DType::f32) throw std::runtime_error("attention_backward: lse must be f32 for cuDNN");
  // The f32 row sums and dq accumulator, as the flash kernels' (tracer mem counts them alike).
  const size_t rows = static_cast<size_t>(p.b * p.h * p.s_q);
  rt::cuda::Buffer row_sums(&dev_, rows * 4), dq_acc(&dev_, rows * static_cast<size_t>(p.d) * 4);
  if (outs) {  // into the caller's buffer, at the problem's strides
    dnn.backward(p, in[1], in[2], in[3], in[4], in[0], lse.ptr(), (*outs)[0], (*outs)[1], (*outs)[2], row_sums.ptr, dq_acc.ptr, ws.ptr, bias);
    return;
  }
  DeviceTensor dq = alloc(s.outputs[0]->type), dk = alloc(s.outputs[1]->type), dv = alloc(s.outputs[2]->type);
  dnn.backward(p, in[1], in[2], in[3], in[4], in[0], lse.ptr(), dq.ptr(), dk.ptr(), dv.ptr(), row_sums.ptr, dq_acc.ptr, ws.ptr, bias);
  env[s.outputs[0].get()] = std::move(dq);
  env[s.outputs[1].get()] = std::move(dk);
  env[s.outputs[2].get()] = std::move(dv);
}

namespace {

// The [b, h, s, d] strides, in a contiguous tensor of shape S, of the elements that view v (a
// piece of a cat over S) reads from a contiguous 4-D base of base_shape: each of the base's
// dimensions is one sub-dimension of the view, with the base's contiguous stride, and its stride
// in S is the view dimension's times the sizes of that dimension's finer sub-dimensions. False
// where v is not such a relabelling of the whole base (a broadcast, a slice, an offset).
bool piece_strides(const ir::View& v, const ir::Shape& S, const rt::Shape& base_shape, std::array<int64_t, 4>* out) {
  if (base_shape.size() != 4 || v.offset != 0 || v.shape.size() != S.size()) return false;
  std::vector<int64_t> dst(S.size(), 1);
  for (size_t d = S.size(); d-- > 1;) dst[d - 1] = dst[d] * S[d];
  std::array<int64_t, 4> base_stride{};
  base_stride[3] = 1;
  for (int d = 2; d >= 0; --d) base_stride[d] = base_stride[d + 1] * base_shape[d + 1];
  std::array<bool, 4> found{};
  int64_t covered = 1;
  for (size_t e = 0; e < v.dims.size(); ++e) {
    int64_t inner = 1;
    for (size_t j = v.dims[e].size(); j-- > 0;) {
      const ir::SubDim& x = v.dims[e][j];
      if (x.size != 1) {
        int hit = -1;
        for (int d = 0; d < 4 && hit < 0; ++d)
          if (!found[d] && base_shape[d] == x.size && base_stride[d] == x.stride) hit = d;
        if (hit < 0) return false;
        found[hit] = true;
        (*out)[hit] = dst[e] * inner;
        covered *= x.size;
      }
      inner *= x.size;
    }
  }
  if (covered != rt::numel(base_shape)) return false;
  for (int d = 3; d >= 0; --d)  // a dimension of size 1: any stride; the one a packed layout gives
    if (!found[d]) (*out)[d] = d == 3 ? 1 : (*out)[d + 1] * base_shape[d + 1];
  return (*out)[3] == 1;
}

}  // namespace

GpuExecutor::CatPlan GpuExecutor::plan_cat(const ir::Stmt& s, const ir::Stmt& f) {
  if (s.outputs.size() != 3 || f.kind != ir::StmtKind::Fusion) return CatPlan{};
  CatPlan cp;
  ir::GroupPlan g = ir::plan_group(f);
  std::vector<const ir::Stmt*> prims;
  ir::flat_prims(f, prims);
  std::unordered_set<const ir::Proxy*> removed;  // the gradients and the views of them
  for (const auto& o : s.outputs) removed.insert(o.get());
  std::vector<ir::Stmt> rest;
  bool ok = g.kind != ir::GroupKind::None;
  for (const ir::Stmt* p : prims) {
    if (!ok) break;
    bool reads_removed = false, reads_only_removed = true;
    for (const ir::Arg& a : p->args)
      ir::for_each_proxy(a, [&](const ir::ProxyPtr& q) {
        bool r = removed.count(q.get()) > 0;
        reads_removed = reads_removed || r;
        reads_only_removed = reads_only_removed && r;
      });
    if (!reads_removed) {
      rest.push_back(*p);
      continue;
    }
    if (ir::layout_prim(*p) && reads_only_removed && p->outputs.size() == 1) {
      removed.insert(p->outputs[0].get());  // a view of a gradient: read through the cat only
      continue;
    }
    auto c = g.cats.find(p->outputs.empty() ? nullptr : p->outputs[0].get());
    if (p->op && p->op->name == "cat" && reads_only_removed && !cp.cat && c != g.cats.end() && c->second.pieces.size() == 3) {
      // Each piece a view of one gradient, each gradient in one piece.
      cp.strides.assign(3, {});
      cp.offsets.assign(3, -1);
      const ir::Shape& S = p->outputs[0]->type.shape;
      int64_t dim_stride = 1;
      for (size_t d = S.size(); d-- > c->second.dim + 1;) dim_stride *= S[d];
      for (size_t q = 0; q < c->second.pieces.size() && ok; ++q) {
        const ir::View& v = c->second.pieces[q];
        int which = -1;
        for (int o = 0; o < 3; ++o)
          if (s.outputs[o].get() == v.base) which = o;
        if (which < 0 || cp.offsets[which] >= 0) {
          ok = false;
          break;
        }
        ok = piece_strides(v, S, s.outputs[which]->type.shape, &cp.strides[which]);
        cp.offsets[which] = c->second.bounds[q] * dim_stride;
      }
      if (ok && (p->outputs[0]->type.dtype != s.outputs[0]->type.dtype)) ok = false;
      cp.cat = p->outputs[0].get();
      cp.cat_value = p->outputs[0];
      continue;
    }
    ok = false;  // something else reads a gradient
  }
  ok = ok && cp.cat != nullptr;
  for (const auto& o : f.outputs) ok = ok && (o.get() == cp.cat || !removed.count(o.get()));
  if (ok) {
    std::vector<ir::ProxyPtr> outs;
    for (const auto& o : f.outputs)
      if (o.get() != cp.cat) outs.push_back(o);
    if (!outs.empty()) {
      auto r = std::make_unique<ir::Stmt>();
      r->kind = ir::StmtKind::Fusion;
      r->callee = f.callee;
      r->outputs_as_list = true;
      r->subsymbols = std::move(rest);
      r->outputs = std::move(outs);
      r->loc = f.loc;
      if (ir::plan_group(*r).kind == ir::GroupKind::None) ok = false;
      cp.rest = std::move(r);
    }
  }
  if (!ok) cp = CatPlan{};
  return cp;
}

bool GpuExecutor::run_attention_into_cat(const std::vector<ir::Stmt>& stmts, size_t i, Values& env, ir::ExecContext& ctx,
                                         const std::unordered_set<const ir::Proxy*>& lazy, size_t* j) {
  const ir::Stmt& s = stmts[i];
  if (s.kind != ir::StmtKind::Prim || !s.op || s.op->name != "attention_backward" || s.outputs.size() != 3 || attention_masked(s)) return false;
  if (check_ || !attention_cat_ || attention_choice_ == AttentionChoice::Tracer || !attention_setting_error_.empty()) return false;
  size_t k = i + 1;
  while (k < stmts.size() && stmts[k].kind == ir::StmtKind::Del) ++k;
  if (k == stmts.size() || stmts[k].kind != ir::StmtKind::Fusion) return false;
  const ir::Stmt& f = stmts[k];
  // The fusion without the cat, planned once.
  auto pit = without_cat_.find(&f);
  if (pit == without_cat_.end()) pit = without_cat_.emplace(&f, plan_cat(s, f)).first;
  CatPlan& cp = pit->second;
  if (!cp.cat) return false;
  // The gradients die at the fusion: nothing after it reads them.
  std::unordered_set<const ir::Proxy*> dying;
  ir::dying_after(stmts, k, dying);
  for (const auto& o : s.outputs)
    if (!dying.count(o.get())) return false;
  // The problem as run_attention would pose it, with the gradients' strides into the cat.
  rt::cuda::AttentionProblem p;
  std::vector<rt::cuda::DevPtr> in;
  bool viewed = false;
  for (const ir::Arg& x : s.args) viewed = viewed || (x.kind == K::Proxy && views_.count(x.proxy.get()));
  if (viewed) {
    if (!operand_views(s, env, {}, &p, &in)) return false;
  } else {
    std::vector<const DeviceTensor*> t;
    for (size_t a = 0; a < 6; ++a) {
      const ir::Arg& x = s.args[a];
      if (x.kind != K::Proxy || transposed_.count(x.proxy.get())) return false;
      auto it = env.find(x.proxy.get());
      if (it == env.end()) return false;
      t.push_back(&it->second);
    }
    if (t[5]->dtype != DType::f32 || t[0]->dtype != t[1]->dtype || t[4]->dtype != t[1]->dtype) return false;
    const rt::Shape& qs = t[1]->shape;
    if (qs.size() != 4) return false;
    p = problem_for(t[1]->dtype, qs, t[2]->shape[2], t[3]->shape[3], s.args[6].kind == K::Bool && s.args[6].b, s.args[7].number());
    in = {t[0]->ptr(), t[1]->ptr(), t[2]->ptr(), t[3]->ptr(), t[4]->ptr()};
  }
  if (s.outputs[0]->type.shape.size() != 4) return false;
  p.dq = cp.strides[0];
  p.dk = cp.strides[1];
  p.dv = cp.strides[2];
  DeviceTensor X = alloc(cp.cat_value->type);
  const size_t es = rt::dtype_size(X.dtype);
  std::vector<rt::cuda::DevPtr> outs;
  for (int o = 0; o < 3; ++o) {
    rt::cuda::DevPtr at = X.ptr() + static_cast<rt::cuda::DevPtr>(cp.offsets[o]) * es;
    while (p.align > 1 && at % static_cast<rt::cuda::DevPtr>(p.align)) p.align /= 2;
    outs.push_back(at);
  }
  bool warn_unused = false;
  if (!cudnn_ready(p, true, &warn_unused).empty()) return false;  // X goes back to the allocator
  launch_cudnn(s, env, p, in, &outs);
  stats_.attention_cudnn++;
  stats_.cats_in_place++;
  env[cp.cat] = std::move(X);
  if (cp.rest) run_stmt(*cp.rest, env, ctx, dying, lazy);
  bool handed_on = false;
  for (const auto& o : f.outputs) handed_on = handed_on || o.get() == cp.cat;
  if (!handed_on) env.erase(cp.cat);
  *j = k;
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
  // The mask in the math type (a kernel converts it), with the offset of each batch index's
  // [L, S] block and the query and key strides (0 where it broadcasts). The offsets depend on
  // the shapes only: uploaded once per statement, at its first run (before any graph capture).
  std::optional<DeviceTensor> mask_math;
  rt::cuda::DevPtr pm = 0, pmoff = 0;
  long long msL = 0, msS = 0;
  if (a.mask) {
    ir::TensorType mt;
    mt.dtype = f64 ? DType::f64 : DType::f32;
    mt.shape = a.mask->shape;
    mask_math = alloc(mt);
    long long n = rt::numel(mt.shape);
    void* conv = attention_kernel(std::string("mask:") + rt::dtype_name(a.mask->dtype) + ":" + rt::dtype_name(mt.dtype),
                                  [&] { return attention_mask_kernel(a.mask->dtype, mt.dtype); }, label).first;
    rt::cuda::DevPtr src = a.mask->ptr(), dst = mask_math->ptr();
    void* cargs[] = {&src, &dst, &n};
    if (n > 0) {
      dev_.launch(conv, static_cast<unsigned>(std::min<long long>((n + 255) / 256, 4096)), 1, 256, 0, cargs);
      stats_.launches++;
    }
    // Strides of the mask, right-aligned against [batch..., L, S].
    const ir::Shape& qs = a.q->shape;
    ir::Shape full(qs.begin(), qs.end() - 1);
    full.push_back(S);
    const ir::Shape& ms = a.mask->shape;
    if (ms.size() > full.size()) throw std::runtime_error("attention: the mask has more dimensions than the scores");
    std::vector<long long> stride(full.size(), 0);
    long long st = 1;
    for (size_t i = ms.size(); i-- > 0;) {
      stride[full.size() - ms.size() + i] = ms[i] == 1 ? 0 : st;
      st *= ms[i];
    }
    msL = stride[full.size() - 2];
    msS = stride[full.size() - 1];
    auto& buf = mask_offsets_[&s];
    if (!buf) {
      std::vector<long long> offs(static_cast<size_t>(std::max<long long>(a.batch, 1)), 0);
      for (long long b = 0; b < a.batch; ++b) {
        long long rest = b, o = 0;
        for (size_t i = full.size() - 2; i-- > 0;) {
          o += (rest % full[i]) * stride[i];
          rest /= full[i];
        }
        offs[static_cast<size_t>(b)] = o;
      }
      buf = std::make_shared<rt::cuda::Buffer>(&dev_, offs.size() * sizeof(long long));
      dev_.copy_to_device(buf->ptr, offs.data(), offs.size() * sizeof(long long));
    }
    pm = dst;
    pmoff = buf->ptr;
  }
  if (!a.backward) {
    void* fn = attention_kernel("rows_fwd" + tag, [&] { return attention_rows_forward_kernel(dt, E, Ev); }, label).first;
    DeviceTensor out = alloc(s.outputs[0]->type), lse = alloc(s.outputs[1]->type);
    rt::cuda::DevPtr po = out.ptr(), pl = lse.ptr();
    void* args[] = {&pq, &pk, &pv, &po, &pl, &rows, &L, &S, &E, &Ev, pscale, &causal, &pm, &pmoff, &msL, &msS};
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
  void* args1[] = {&pg, &pq, &pk, &pv, &po, &pl, &pd, &pdq, &rows, &L, &S, &E, &Ev, pscale, &causal, &pm, &pmoff, &msL, &msS};
  dev_.launch(dq_fn, blocks(rows), 1, 256, 0, args1);
  void* args2[] = {&pg, &pq, &pk, &pv, &pl, &pd, &pdk, &pdv, &key_rows, &L, &S, &E, &Ev, pscale, &causal, &pm, &pmoff, &msL, &msS};
  dev_.launch(dkdv_fn, blocks(key_rows), 1, 256, 0, args2);
  stats_.launches += 2;
  env[s.outputs[0].get()] = std::move(dq);
  env[s.outputs[1].get()] = std::move(dk);
  env[s.outputs[2].get()] = std::move(dv);
}

}  // namespace tracer::codegen
