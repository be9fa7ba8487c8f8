// Attention operands read in place (docs/cudnn.md, "Operands read in place"; on unless
// TRACER_ATTENTION_VIEWS=0): a fusion whose outputs are only slices, reshapes and transposes of its inputs (the q, k and v split out of a
// fused qkv projection and put into heads; an output gradient put into heads), read by nothing
// but attention statements, is not run: each output becomes a strided view of the input it was
// cut from, and cuDNN reads the views where they lie. Where cuDNN would not take a view after
// all, the fusion runs then, as it would have, and the attention takes its outputs.
#include <algorithm>
#include <functional>

#include "codegen/cuda_exec.h"

namespace tracer::codegen {

using rt::DType;
using rt::cuda::DeviceTensor;
using K = ir::Arg::Kind;

namespace {

// Which argument positions of an attention statement may be views: q, k, v (and the
// backward's output gradient and saved output); never the log-sum-exp, which cuDNN wants packed.
bool view_position(const ir::Stmt& s, size_t i) {
  if (s.op->name == "attention") return i <= 2;
  return i <= 4;
}

bool is_attention(const ir::Stmt& s) {  // (masked ones run on the CPU: their operands are values)
  return s.kind == ir::StmtKind::Prim && s.op && (s.op->name == "attention" || s.op->name == "attention_backward") && !attention_masked(s);
}

// The strides of `shape` as a view of memory laid out as (old_shape, old_strides), or false
// when the memory cannot be read that way without a copy (PyTorch's rule for view()).
bool reshape_strides(const rt::Shape& old_shape, const std::vector<int64_t>& old_strides, const rt::Shape& shape,
                     std::vector<int64_t>* out) {
  if (rt::numel(old_shape) != rt::numel(shape) || rt::numel(shape) == 0) return false;
  out->assign(shape.size(), 0);
  if (old_shape.empty()) {
    int64_t st = 1;
    for (size_t i = shape.size(); i-- > 0;) (*out)[i] = st;
    return true;
  }
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t base = old_strides.back(), tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_shape[static_cast<size_t>(d)];
    if (d == 0 || (old_shape[static_cast<size_t>(d - 1)] != 1 && old_strides[static_cast<size_t>(d - 1)] != tensor_numel * base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[static_cast<size_t>(view_d)] == 1)) {
        (*out)[static_cast<size_t>(view_d)] = view_numel * base;
        view_numel *= shape[static_cast<size_t>(view_d)];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        base = old_strides[static_cast<size_t>(d - 1)];
        tensor_numel = view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

// A view [..., s, d] as cuDNN's [b, h, s, d] strides: d innermost, the dimensions before h folding
// into b; false where they do not fold.
bool fold_bhsd(const GpuExecutor::OperandView& v, rt::cuda::AttentionProblem::Strides* st) {
  const size_t r = v.shape.size();
  if (r < 2 || v.strides.size() != r || v.strides[r - 1] != 1) return false;
  int64_t hs = r >= 3 ? v.strides[r - 3] : 0, bs = 0;
  if (r >= 4) {
    bs = v.strides[r - 4];
    for (size_t d = 0; d + 4 < r; ++d)
      if (v.strides[d] != v.strides[d + 1] * v.shape[d + 1]) return false;
  }
  *st = {bs, hs, v.strides[r - 2], 1};
  return true;
}

bool int_list(const ir::Arg& a, std::vector<int64_t>* out) {
  if (!a.is_seq()) return false;
  out->clear();
  for (const ir::Arg& x : a.items) {
    if (x.kind != K::Int) return false;
    out->push_back(x.i);
  }
  return true;
}

}  // namespace

bool GpuExecutor::layout_chain(const ir::Stmt& fusion, const ir::Proxy* out, ViewChain* chain) {
  // Walk back from the output to a fusion input through one-argument layout statements.
  // The primitives that define values, composites' included (ltorch.split is its slices).
  std::unordered_map<const ir::Proxy*, const ir::Stmt*> def;
  std::function<void(const std::vector<ir::Stmt>&)> collect = [&](const std::vector<ir::Stmt>& stmts) {
    for (const ir::Stmt& sub : stmts) {
      if (sub.kind == ir::StmtKind::Prim) {
        for (const auto& p : sub.outputs) def[p.get()] = &sub;
      } else {
        collect(sub.subsymbols);
      }
    }
  };
  collect(fusion.subsymbols);
  std::vector<const ir::Stmt*> steps;
  const ir::Proxy* at = out;
  for (;;) {
    auto it = def.find(at);
    if (it == def.end()) break;
    const ir::Stmt& s = *it->second;
    if (s.kind != ir::StmtKind::Prim || !s.op || s.outputs.size() != 1 || s.args.empty() || s.args[0].kind != K::Proxy) return false;
    const std::string& op = s.op->name;
    if (op != "slice" && op != "reshape" && op != "transpose") return false;
    steps.push_back(&s);
    at = s.args[0].proxy.get();
  }
  if (steps.empty()) return false;
  int source = -1;
  for (size_t i = 0; i < fusion.args.size(); ++i)
    if (fusion.args[i].kind == K::Proxy && fusion.args[i].proxy.get() == at) source = static_cast<int>(i);
  if (source < 0) return false;
  chain->source = static_cast<size_t>(source);
  chain->steps.assign(steps.rbegin(), steps.rend());
  return true;
}

bool GpuExecutor::apply_chain(const ViewChain& chain, const DeviceTensor& src, OperandView* v) {
  v->base = src;
  v->offset = 0;
  v->shape = src.shape;
  v->strides.assign(src.shape.size(), 1);
  for (size_t i = src.shape.size(); i-- > 1;) v->strides[i - 1] = v->strides[i] * src.shape[i];
  for (const ir::Stmt* s : chain.steps) {
    const std::string& op = s->op->name;
    const rt::Shape& to = s->outputs[0]->type.shape;
    if (op == "reshape") {
      std::vector<int64_t> st;
      if (!reshape_strides(v->shape, v->strides, to, &st)) return false;
      v->strides = std::move(st);
    } else if (op == "transpose") {
      std::vector<int64_t> perm;
      if (!int_list(s->args[1], &perm) || perm.size() != v->shape.size()) return false;
      std::vector<int64_t> st(perm.size());
      for (size_t d = 0; d < perm.size(); ++d) {
        int64_t p = perm[d] < 0 ? perm[d] + static_cast<int64_t>(perm.size()) : perm[d];
        if (p < 0 || p >= static_cast<int64_t>(perm.size())) return false;
        st[d] = v->strides[static_cast<size_t>(p)];
      }
      v->strides = std::move(st);
    } else {  // slice, unit steps
      std::vector<int64_t> start, stop, step;
      if (!int_list(s->args[1], &start) || !int_list(s->args[2], &stop) || start.size() != v->shape.size()) return false;
      if (s->args.size() > 3 && s->args[3].kind != K::None) {
        if (!int_list(s->args[3], &step)) return false;
        for (int64_t x : step)
          if (x != 1) return false;
      }
      for (size_t d = 0; d < start.size(); ++d) {
        if (start[d] < 0 || start[d] > v->shape[d]) return false;
        v->offset += start[d] * v->strides[d];
      }
    }
    v->shape = to;
    if (v->strides.size() != to.size()) return false;
  }
  return true;
}

void GpuExecutor::plan_views(const ir::Trace& t, std::unordered_map<const ir::Stmt*, ViewFusion>& out) {
  // TRACER_ATTENTION_VIEWS=0 runs the fusions (for comparison); so do the forced tracer path and
  // TRACER_GPU_CHECK (which compares each statement's outputs, views included, with the CPU).
  if (!views_enabled_ || attention_choice_ == AttentionChoice::Tracer || check_) return;
  if (out_layout_) plan_out_layouts(t);
  std::unordered_set<const ir::Proxy*> returned;
  ir::for_each_proxy(t.output, [&](const ir::ProxyPtr& p) { returned.insert(p.get()); });
  for (size_t i = 0; i < t.stmts.size(); ++i) {
    const ir::Stmt& f = t.stmts[i];
    if (f.kind != ir::StmtKind::Fusion || f.outputs.empty()) continue;
    ViewFusion plan;
    bool ok = true;
    for (const auto& o : f.outputs) {
      ViewChain c;
      if (returned.count(o.get()) || !layout_chain(f, o.get(), &c)) {
        ok = false;
        break;
      }
      plan.chains.push_back(std::move(c));
    }
    if (!ok) continue;
    // Every later reader of an output is an attention statement, at a position that may be a view.
    std::unordered_set<const ir::Proxy*> outs;
    for (const auto& o : f.outputs) outs.insert(o.get());
    // A composite (ltorch.scaled_dot_product_attention) is looked into: its own statements read.
    std::function<void(const ir::Stmt&)> check = [&](const ir::Stmt& s) {
      if (s.kind == ir::StmtKind::Del || !ok) return;
      bool reads = false;
      for (size_t a = 0; a < s.args.size(); ++a) {
        bool here = false;
        ir::for_each_proxy(s.args[a], [&](const ir::ProxyPtr& p) { here = here || outs.count(p.get()); });
        if (!here) continue;
        reads = true;
        if (s.kind == ir::StmtKind::Composite) continue;
        if (!is_attention(s) || s.args[a].kind != K::Proxy || !view_position(s, a)) ok = false;
      }
      if (!reads) return;
      if (s.kind == ir::StmtKind::Composite) {
        for (const ir::Stmt& sub : s.subsymbols) check(sub);
        for (const auto& o : s.outputs)
          if (outs.count(o.get())) ok = false;  // a composite that passes a view on
        return;
      }
      if (ok && std::find(plan.readers.begin(), plan.readers.end(), &s) == plan.readers.end()) plan.readers.push_back(&s);
    };
    for (size_t j = i + 1; j < t.stmts.size() && ok; ++j) check(t.stmts[j]);
    if (ok && !plan.readers.empty()) out.emplace(&f, std::move(plan));
  }
}

bool GpuExecutor::view_problem(const std::vector<OperandView>& ops, bool bw, bool causal, double scale, rt::cuda::AttentionProblem* p) {
  // [..., s, d] with the batch dimensions folded into b and h (the leading ones must fold).
  auto four = fold_bhsd;
  const size_t f = bw ? 1 : 0;
  if (ops.size() != (bw ? 5u : 3u)) return false;
  const rt::Shape& qs = ops[f].shape;
  const size_t r = qs.size();
  if (r < 2 || ops[f + 1].shape.size() != r || ops[f + 2].shape.size() != r || rt::numel(qs) == 0) return false;
  // The sizes first: the outputs (and for the forward the output) are packed over them.
  const int64_t h = r >= 3 ? qs[r - 3] : 1;
  const int64_t b = rt::numel(qs) / (qs[r - 1] * qs[r - 2] * h);
  *p = rt::cuda::AttentionProblem::contiguous(ops[f].base.dtype, b, h, qs[r - 2], ops[f + 1].shape[r - 2], qs[r - 1],
                                              ops[f + 2].shape[r - 1], causal, static_cast<float>(scale));
  if (!four(ops[f], &p->q) || !four(ops[f + 1], &p->k) || !four(ops[f + 2], &p->v)) return false;
  if (bw && (!four(ops[0], &p->dout) || !four(ops[4], &p->o))) return false;
  // With one head the head stride is arbitrary, with one batch the batch stride: give them the
  // values a packed tensor would have over the other strides.
  for (auto* st : {&p->q, &p->k, &p->v, &p->o, &p->dout}) {
    const int64_t rows = st == &p->q || st == &p->o || st == &p->dout ? p->s_q : p->s_kv;
    if (p->h == 1) (*st)[1] = (*st)[2] * rows;
    if (p->b == 1) (*st)[0] = (*st)[1] * p->h;
  }
  return true;
}

bool GpuExecutor::operand_views(const ir::Stmt& s, const Values& env, const std::unordered_map<const ir::Proxy*, OperandView>& extra,
                                rt::cuda::AttentionProblem* p, std::vector<rt::cuda::DevPtr>* ptrs) {
  const bool bw = s.op->name == "attention_backward";
  // Each operand as [b, h, s, d] with strides: a view, or a contiguous value.
  const size_t n = bw ? 5 : 3;
  std::vector<OperandView> ops(n);
  bool any_view = false;
  for (size_t i = 0; i < n; ++i) {
    const ir::Arg& a = s.args[i];
    if (a.kind != K::Proxy) return false;
    auto e = extra.find(a.proxy.get());
    auto v = views_.find(a.proxy.get());
    if (e != extra.end() || v != views_.end()) {
      ops[i] = e != extra.end() ? e->second : v->second;
      any_view = true;
      continue;
    }
    auto it = env.find(a.proxy.get());
    if (it == env.end() || transposed_.count(a.proxy.get())) return false;
    OperandView& c = ops[i];
    c.base = it->second;
    c.shape = it->second.shape;
    c.strides.assign(c.shape.size(), 1);
    for (size_t d = c.shape.size(); d-- > 1;) c.strides[d - 1] = c.strides[d] * c.shape[d];
  }
  if (!any_view) return false;
  const ir::Arg& causal = s.args[bw ? 6 : 3];
  const ir::Arg& scale = s.args[bw ? 7 : 4];
  if (!view_problem(ops, bw, causal.kind == K::Bool && causal.b, scale.number(), p)) return false;
  ptrs->clear();
  p->align = 16;
  for (const OperandView& v : ops) {
    rt::cuda::DevPtr at = v.base.ptr() + static_cast<rt::cuda::DevPtr>(v.offset) * rt::dtype_size(v.base.dtype);
    while (p->align > 1 && at % static_cast<rt::cuda::DevPtr>(p->align)) p->align /= 2;
    ptrs->push_back(at);
  }
  return true;
}

bool GpuExecutor::skip_view_fusion(const ir::Stmt& s, const Values& env) {
  auto it = view_fusions_->find(&s);
  if (it == view_fusions_->end()) return false;
  const ViewFusion& plan = it->second;
  std::unordered_map<const ir::Proxy*, OperandView> views;
  for (size_t i = 0; i < s.outputs.size(); ++i) {
    const ir::Arg& src = s.args[plan.chains[i].source];
    auto e = env.find(src.proxy.get());
    if (e == env.end() || transposed_.count(src.proxy.get())) return false;
    OperandView v;
    if (!apply_chain(plan.chains[i], e->second, &v)) return false;
    v.fusion = &s;
    views.emplace(s.outputs[i].get(), std::move(v));
  }
  // Each reader's problem, with these views, must have a cuDNN plan.
  for (const ir::Stmt* reader : plan.readers) {
    rt::cuda::AttentionProblem p;
    std::vector<rt::cuda::DevPtr> ptrs;
    if (!operand_views(*reader, env, views, &p, &ptrs)) return false;
    bool warn_unused = false;
    if (!cudnn_ready(p, reader->op->name == "attention_backward", &warn_unused).empty()) return false;
  }
  for (auto& [p, v] : views) views_[p] = std::move(v);
  std::vector<DeviceTensor>& keep = viewed_inputs_[&s];
  keep.clear();
  for (const ir::Arg& a : s.args)
    if (a.kind == K::Proxy) keep.push_back(env.at(a.proxy.get()));
  stats_.fusions_viewed++;
  return true;
}

namespace {

// Whether every reader takes a value in a transposed layout: transposes by one permutation (the
// first one met sets *perm when it is empty, else each must equal it) that keeps the last
// dimension last, and attention backwards reading it as their saved output. *z and *op get the
// first transpose's output and op (left alone when there is none).
bool readers_take_layout(const std::vector<std::pair<const ir::Stmt*, size_t>>& rs, size_t rank, std::vector<int64_t>* perm,
                         ir::ProxyPtr* z, const ir::OpDecl** op) {
  if (rank < 2) return false;
  for (const auto& [st, a] : rs) {
    if (st->kind == ir::StmtKind::Prim && st->op && st->op->name == "transpose" && a == 0 && st->outputs.size() == 1) {
      std::vector<int64_t> p;
      if (!int_list(st->args[1], &p) || p.size() != rank) return false;
      for (int64_t& x : p) x = x < 0 ? x + static_cast<int64_t>(rank) : x;
      if (perm->empty()) *perm = p;
      if (p != *perm) return false;
      if (!*z) {
        *z = st->outputs[0];
        *op = st->op;
      }
    } else if (!(st->kind == ir::StmtKind::Prim && st->op && st->op->name == "attention_backward" && a == 4 && !attention_masked(*st))) {
      return false;  // any other reader wants the value packed
    }
  }
  return !perm->empty() && perm->back() == static_cast<int64_t>(rank) - 1;
}

// perm's inverse, or empty when perm is no permutation or the identity.
std::vector<int64_t> inverse_perm(const std::vector<int64_t>& perm) {
  const size_t r = perm.size();
  std::vector<int64_t> inv(r, -1);
  bool identity = true;
  for (size_t k = 0; k < r; ++k) {
    const int64_t p = perm[k];
    if (p < 0 || p >= static_cast<int64_t>(r) || inv[static_cast<size_t>(p)] >= 0) return {};
    inv[static_cast<size_t>(p)] = static_cast<int64_t>(k);
    identity = identity && p == static_cast<int64_t>(k);
  }
  if (identity) return {};
  return inv;
}

// The statement `out = transpose(z, inverse)`: a value held transposed, put back packed.
std::unique_ptr<ir::Stmt> transpose_back(const ir::ProxyPtr& z, const std::vector<int64_t>& inverse, const ir::ProxyPtr& out,
                                         const ir::OpDecl* op) {
  auto back = std::make_unique<ir::Stmt>();
  back->kind = ir::StmtKind::Prim;
  back->op = op;
  std::vector<ir::Arg> items;
  for (int64_t x : inverse) items.push_back(ir::Arg::of_int(x));
  back->args = {ir::Arg::of_proxy(z), ir::Arg::of_seq(K::Tuple, std::move(items))};
  back->outputs = {out};
  return back;
}

// The strides of a value of `shape` held as transpose(value, perm) packed: its dimension perm[k]
// is the packed tensor's dimension k. Empty when the shapes do not agree.
std::vector<int64_t> layout_strides(const rt::Shape& shape, const std::vector<int64_t>& perm) {
  std::vector<int64_t> st(shape.size(), 0);
  if (perm.size() != shape.size()) return {};
  int64_t n = 1;
  for (size_t k = perm.size(); k-- > 0;) {
    st[static_cast<size_t>(perm[k])] = n;
    n *= shape[static_cast<size_t>(perm[k])];
  }
  return st;
}

}  // namespace

const GpuExecutor::ReaderMap& GpuExecutor::readers_of(const ir::Trace& t) {
  auto it = trace_readers_.find(&t);
  if (it != trace_readers_.end()) return it->second;
  return trace_readers_.emplace(&t, reader_map(t)).first->second;
}

bool GpuExecutor::readers_take(const ReaderMap& readers, const ir::Proxy* v, std::vector<int64_t>* perm) {
  auto r = readers.find(v);
  ir::ProxyPtr z;
  const ir::OpDecl* op = nullptr;
  return r != readers.end() && !r->second.empty() && readers_take_layout(r->second, v->type.shape.size(), perm, &z, &op);
}

GpuExecutor::ReaderMap GpuExecutor::reader_map(const ir::Trace& t) {
  // Every reader of every value, with the argument position; composites' statements read what
  // they read, except a composite the executor runs as one kernel (a group), which reads its
  // arguments; a fusion reads its arguments.
  ReaderMap readers;
  std::function<void(const std::vector<ir::Stmt>&)> note = [&](const std::vector<ir::Stmt>& stmts) {
    for (const ir::Stmt& s : stmts) {
      if (s.kind == ir::StmtKind::Del) continue;
      if (s.kind == ir::StmtKind::Composite && !is_elementwise_group(s) && !is_row_group(s) && !is_column_group(s)) {
        note(s.subsymbols);
        continue;
      }
      for (size_t a = 0; a < s.args.size(); ++a)
        ir::for_each_proxy(s.args[a], [&](const ir::ProxyPtr& p) { readers[p.get()].emplace_back(&s, a); });
    }
  };
  note(t.stmts);
  return readers;
}

void GpuExecutor::plan_out_layouts(const ir::Trace& t) {
  // Planned once per trace (the plans hold statements whose kernels are cached by address).
  if (!out_layouts_planned_.insert(&t).second) return;
  std::vector<const ir::Stmt*> attentions;
  std::function<void(const std::vector<ir::Stmt>&)> find = [&](const std::vector<ir::Stmt>& stmts) {
    for (const ir::Stmt& s : stmts) {
      if (s.kind == ir::StmtKind::Composite) find(s.subsymbols);
      if (s.kind == ir::StmtKind::Prim && s.op && s.op->name == "attention" && s.outputs.size() == 2 && !attention_masked(s)) attentions.push_back(&s);
    }
  };
  find(t.stmts);
  if (attentions.empty()) return;
  const ReaderMap& readers = readers_of(t);
  for (const ir::Stmt* s : attentions) {
    // Read by transposes and backwards here; returned (saved for the backward trace), it leaves
    // with its layout, and the next trace reads it in place or puts it back (take_layout_input).
    const ir::ProxyPtr& y = s->outputs[0];
    auto r = readers.find(y.get());
    OutLayout L;
    const ir::OpDecl* op = nullptr;
    if (r == readers.end() || !readers_take_layout(r->second, y->type.shape.size(), &L.perm, &L.z, &op) || !L.z) continue;
    std::vector<int64_t> inverse = inverse_perm(L.perm);
    if (inverse.empty()) continue;
    L.out = y.get();
    L.fits = true;
    L.back = transpose_back(L.z, inverse, y, op);
    L.back->loc = s->loc;
    out_layouts_.emplace(s, std::move(L));
  }
}

void GpuExecutor::take_layout_input(const ir::Trace& t, const ir::ProxyPtr& p, DeviceTensor d, Values& env) {
  auto key = std::make_pair(p.get(), d.layout);
  auto it = input_layouts_.find(key);
  if (it == input_layouts_.end()) {
    OutLayout L;
    L.out = p.get();
    L.perm = d.layout;
    std::vector<int64_t> inverse = inverse_perm(L.perm);
    if (inverse.empty() || L.perm.size() != p->type.shape.size()) throw std::runtime_error("'" + p->name + "' arrives in a layout that is no transpose");
    auto z = std::make_shared<ir::Proxy>();
    z->name = p->name + "_transposed";
    z->type = p->type;
    for (size_t k = 0; k < L.perm.size(); ++k) z->type.shape[k] = p->type.shape[static_cast<size_t>(L.perm[k])];
    L.z = z;
    L.back = transpose_back(z, inverse, p, ir::find_op("transpose"));
    std::vector<int64_t> perm = L.perm;
    L.fits = readers_take(readers_of(t), p.get(), &perm);
    it = input_layouts_.emplace(key, std::move(L)).first;
  }
  const OutLayout& L = it->second;
  DeviceTensor z = std::move(d);
  z.layout.clear();
  z.shape = L.z->type.shape;
  if (L.fits && views_enabled_ && out_layout_ && !check_ && attention_choice_ != AttentionChoice::Tracer) {
    OperandView v;
    v.base = std::move(z);
    v.shape = p->type.shape;
    v.strides = layout_strides(p->type.shape, L.perm);
    v.layout = &L;
    views_[p.get()] = std::move(v);
    return;
  }
  Values local;
  local[L.z.get()] = std::move(z);
  if (!run_simple(*L.back, local)) throw std::runtime_error("'" + p->name + "', held transposed, could not be put back");
  env[p.get()] = local.at(p.get());
}

bool GpuExecutor::launch_cudnn_out_layout(const ir::Stmt& s, Values& env, const rt::cuda::AttentionProblem& p,
                                          const std::vector<rt::cuda::DevPtr>& in) {
  auto it = out_layouts_.find(&s);
  if (it == out_layouts_.end() || materializing_ || !views_enabled_ || check_) return false;
  const OutLayout& L = it->second;
  const ir::TensorType& zt = L.z->type;
  const rt::Shape& ys = s.outputs[0]->type.shape;
  if (zt.dtype != s.outputs[0]->type.dtype || zt.shape.size() != ys.size()) return false;
  // The output as a view of z packed: output dimension perm[k] is z's dimension k.
  for (size_t k = 0; k < zt.shape.size(); ++k)
    if (zt.shape[k] != ys[static_cast<size_t>(L.perm[k])]) return false;
  OperandView v;
  v.shape = ys;
  v.strides = layout_strides(ys, L.perm);
  v.layout = &L;
  rt::cuda::AttentionProblem q = p;
  if (!fold_bhsd(v, &q.o)) return false;
  if (q.h == 1) q.o[1] = q.o[2] * q.s_q;
  if (q.b == 1) q.o[0] = q.o[1] * q.h;
  bool warn_unused = false;
  if (!cudnn_ready(q, false, &warn_unused).empty()) return false;
  rt::cuda::Cudnn& dnn = *cudnn_;
  rt::cuda::Buffer ws(&dev_, dnn.engine_workspace(q, false));
  DeviceTensor z = alloc(zt), lse = alloc(s.outputs[1]->type);
  dnn.forward(q, in[0], in[1], in[2], z.ptr(), lse.ptr(), ws.ptr);
  v.base = std::move(z);
  views_[s.outputs[0].get()] = std::move(v);
  env[s.outputs[1].get()] = std::move(lse);
  stats_.outputs_in_layout++;
  return true;
}

bool GpuExecutor::alias_transposed_view(const ir::Stmt& s, const OperandView& v, Values& env) {
  std::vector<int64_t> perm;
  const rt::Shape& to = s.outputs[0]->type.shape;
  if (!int_list(s.args[1], &perm) || perm.size() != v.shape.size() || v.offset != 0 || v.base.shape != to) return false;
  int64_t st = 1;
  for (size_t d = perm.size(); d-- > 0;) {
    const int64_t p = perm[d] < 0 ? perm[d] + static_cast<int64_t>(perm.size()) : perm[d];
    if (p < 0 || p >= static_cast<int64_t>(perm.size()) || v.strides[static_cast<size_t>(p)] != st) return false;
    st *= to[d];
  }
  env[s.outputs[0].get()] = v.base;  // packed: the view's buffer, relabelled
  return true;
}

void GpuExecutor::materialize_views(const ir::Stmt& s, Values& env, ir::ExecContext& ctx) {
  // An attention output written transposed: transposed back into a packed tensor.
  for (const ir::Arg& a : s.args) {
    if (a.kind != K::Proxy) continue;
    auto v = views_.find(a.proxy.get());
    if (v == views_.end() || !v->second.layout) continue;
    const OutLayout& L = *v->second.layout;
    Values local;
    local[L.z.get()] = v->second.base;
    views_.erase(v);
    if (!run_simple(*L.back, local)) throw std::runtime_error("the attention output written transposed could not be put back");
    env[a.proxy.get()] = local.at(L.out);
  }
  // Run each fusion the statement's views came from, over the tensors the views hold.
  std::vector<const ir::Stmt*> fusions;
  for (const ir::Arg& a : s.args)
    if (a.kind == K::Proxy)
      if (auto v = views_.find(a.proxy.get()); v != views_.end() && v->second.fusion &&
                                               std::find(fusions.begin(), fusions.end(), v->second.fusion) == fusions.end())
        fusions.push_back(v->second.fusion);
  for (const ir::Stmt* f : fusions) {
    Values local;
    const std::vector<DeviceTensor>& inputs = viewed_inputs_.at(f);
    size_t k = 0;
    for (const ir::Arg& a : f->args)
      if (a.kind == K::Proxy) local[a.proxy.get()] = inputs.at(k++);
    materializing_ = true;
    try {
      run_stmt(*f, local, ctx, {}, {});
    } catch (...) {
      materializing_ = false;
      throw;
    }
    materializing_ = false;
    for (const auto& o : f->outputs)
      if (views_.erase(o.get())) env[o.get()] = local.at(o.get());
    viewed_inputs_.erase(f);
  }
}

}  // namespace tracer::codegen
