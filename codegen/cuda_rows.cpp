// Row groups to CUDA kernels: one block per row (see cuda_codegen.h, generate_row, and
// docs/codegen.md, "Row groups").
#include <algorithm>
#include <cstdlib>
#include <cctype>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

#include "codegen/cuda_codegen.h"
#include "codegen/cuda_codegen_detail.h"
#include "codegen/cuda_prelude.h"
#include "ir/fusion.h"
#include "ir/group.h"
#include "ir/op.h"

namespace tracer::codegen {

using namespace detail;
using ir::Arg;
using ir::DType;
using ir::Stmt;
using ir::StmtKind;

bool is_row_group(const Stmt& s, std::string* why) {
  auto no = [&](const std::string& w) {
    if (why) *why = w;
    return false;
  };
  if (s.kind != StmtKind::Fusion && s.kind != StmtKind::Composite) return no("not a fusion");
  ir::GroupPlan g = ir::plan_group(s);
  if (g.kind == ir::GroupKind::Rows || g.kind == ir::GroupKind::RowsColumns) return true;
  return no(g.kind == ir::GroupKind::None ? g.why : "no reduction over rows");
}

namespace {
// A reduction's initial value in double, and its step acc <- op(acc, v) (NaN first for amax and
// amin, as the CPU), as C text; shared by the row reductions and the column accumulators.
std::string init_double(const std::string& op) {
  return op == "sum" ? std::string("0.0") : op == "amax" ? std::string("-__longlong_as_double(0x7ff0000000000000LL)")
                                                        : std::string("__longlong_as_double(0x7ff0000000000000LL)");
}
std::string reduce_step(const std::string& op, const std::string& acc, const std::string& v) {
  return op == "sum" ? acc + " + " + v : op == "amax" ? "(" + acc + " != " + acc + " || " + acc + " >= " + v + ") ? " + acc + " : " + v
                                                      : "(" + acc + " != " + acc + " || " + acc + " <= " + v + ") ? " + acc + " : " + v;
}

Kernel generate_row_kernel(const Stmt& s, const std::string& name, bool canonical, const std::unordered_set<const ir::Proxy*>& may_alias_in,
                           long long max_shared) {
  std::string why;
  if (!is_row_group(s, &why)) throw std::invalid_argument("codegen: '" + ir::print_stmt_line(s) + "' is not a row group: " + why);
  std::vector<const Stmt*> prims;
  prims_of(s, prims);
  ir::GroupPlan plan = ir::plan_group(s);
  ir::Shape shape = plan.shape;
  ir::Shape row = shape;
  row.back() = 1;
  const int64_t C = shape.back();
  // A RowsColumns group of one row: an output of the rows' shape written over an input of one
  // row's size would be read again, overwritten, by the second kernel's per-column values (an
  // input of [C] broadcasts to them). No output takes an input's buffer there.
  const std::unordered_set<const ir::Proxy*> no_alias;
  const std::unordered_set<const ir::Proxy*>& may_alias =
      plan.kind == ir::GroupKind::RowsColumns && rt::numel(shape) == C ? no_alias : may_alias_in;
  Kernel k;
  k.name = name;
  k.origin = ir::print_stmt_line(s);
  k.elements = rt::numel(shape);
  k.row_length = C;
  k.rows = C ? k.elements / C : 0;

  const std::vector<ir::ProxyPtr> inputs = plan.inputs;
  auto input_ptr = [&](const ir::Proxy* b) -> ir::ProxyPtr {
    for (const auto& q : inputs)
      if (q.get() == b) return q;
    throw std::logic_error("codegen: a view's input is not one of the group's");
  };
  auto stripped = [](const ir::Shape& x) {
    size_t j = 0;
    while (j < x.size() && x[j] == 1) ++j;
    return ir::Shape(x.begin() + static_cast<std::ptrdiff_t>(j), x.end());
  };
  // A view that reads its input in order and has the rows' shape is read as the input itself.
  auto full_view = [&](const ir::Proxy* q) {
    auto v = plan.views.find(q);
    return v != plan.views.end() && v->second.contiguous() && stripped(v->second.shape) == stripped(shape);
  };
  Namer name_of(canonical);
  // Outputs of the rows' shape may be written over an input of their type that dies here: each
  // thread writes the elements it read, after the row's last reduction (no restrict on either).
  auto aliased_output = [&](const ir::ProxyPtr& o) {
    if (o->type.shape != shape) return false;  // one per row: thread 0 writes it while others read
    for (const auto& p : inputs)
      if (may_alias.count(p.get()) && p->type.dtype == o->type.dtype && rt::numel(p->type.shape) == rt::numel(o->type.shape)) return true;
    return false;
  };
  for (const auto& p : inputs) k.params.push_back({p->name, p->type, false, p, may_alias.count(p.get()) > 0});
  for (const auto& o : s.outputs) k.params.push_back({o->name, o->type, true, o, aliased_output(o)});

  std::vector<const Stmt*> reductions;
  for (const Stmt* p : prims)
    if (ir::row_reduction(*p)) reductions.push_back(p);
  // A RowsColumns group (ir/group.h): reductions over every leading dimension too. Each lane
  // accumulates its columns over the rows its warp takes (in f32; f64 values in double), the
  // block's warps combine in a fixed tree, and the block writes one double per column and
  // reduction; a second kernel adds the blocks' partials in order and computes the values of
  // the reduced shape (`post`) from them.
  const bool rowcols = plan.kind == ir::GroupKind::RowsColumns;
  std::vector<const Stmt*> colreds;
  std::unordered_set<const ir::Proxy*> post;
  if (rowcols) {
    if (C > 4096) throw std::logic_error("codegen: a row group with column reductions over rows of more than 4096 elements");
    for (const Stmt* p : prims) {
      bool reads_post = false;
      for (const Arg& a : p->args) ir::for_each_proxy(a, [&](const ir::ProxyPtr& q) { reads_post = reads_post || post.count(q.get()); });
      if (ir::column_reduction(*p)) {
        colreds.push_back(p);
        post.insert(p->outputs[0].get());
      } else if (reads_post) {
        for (const auto& o : p->outputs) post.insert(o.get());
      }
    }
  }
  // Online sums of exponentials: sum(exp(a - m)) where m is the row's amax of a (a softmax's or
  // a logsumexp's denominator) is computed in the same pass as the maximum, each thread keeping
  // its running maximum and rescaling its sum when the maximum grows, as flash attention does;
  // one pass over the row, not two. online[j] = the amax's index and a, for such a sum j.
  struct Online {
    size_t amax = 0;
    ir::ProxyPtr a;
  };
  std::unordered_map<size_t, Online> online;
  // On for long rows (over 4096 elements, a block each, read from memory on every pass); short
  // rows read their values once into registers, where a second pass costs no memory.
  // TRACER_ROWS_ONLINE=0 turns it off, 1 on for every row. Measured on the GPT's cross entropy
  // over [8192, 50304] bf16 logits: on an H100 (session 23) 1.035 ms for its forward and backward
  // kernels online against 1.128 in two passes (the step's forward and backward 16.17 against
  // 16.31 ms); on the H200 (session 6, bench/results/2026-12-02-h200-gpt-s6.md) the forward took
  // 0.454 ms online against 0.431 in two passes, bound there by its exponentials and compares.
  // The kernels' sources differ, so their caches do too.
  const char* online_env = std::getenv("TRACER_ROWS_ONLINE");
  const std::string online_mode = online_env ? online_env : "";
  const bool online_on = online_mode == "0" ? false : online_mode == "1" ? true : C > 4096;
  if (online_on) {
    std::unordered_map<const ir::Proxy*, const Stmt*> producer;
    for (const Stmt* p : prims)
      for (const auto& o : p->outputs) producer[o.get()] = p;
    auto resolve = [&](const ir::Proxy* q) {  // through the group's identities (a broadcast of m)
      for (int n = 0; n < 8; ++n) {
        auto it = plan.same_as.find(q);
        if (it == plan.same_as.end()) break;
        q = it->second.get();
      }
      return q;
    };
    for (size_t j = 0; j < reductions.size(); ++j) {
      const Stmt* r = reductions[j];
      if (r->op->name != "sum" || r->args[0].kind != Arg::Kind::Proxy) continue;
      auto e = producer.find(resolve(r->args[0].proxy.get()));
      if (e == producer.end() || e->second->op->name != "exp" || e->second->args[0].kind != Arg::Kind::Proxy) continue;
      auto d = producer.find(resolve(e->second->args[0].proxy.get()));
      if (d == producer.end() || d->second->op->name != "sub" || d->second->args[0].kind != Arg::Kind::Proxy ||
          d->second->args[1].kind != Arg::Kind::Proxy)
        continue;
      const ir::Proxy* m = resolve(d->second->args[1].proxy.get());
      for (size_t q = 0; q < reductions.size(); ++q) {
        const Stmt* mx = reductions[q];
        // (f32 values only: the online state is f32, as the two-pass form's exp of an f32 is.)
        if (mx->op->name == "amax" && mx->outputs[0].get() == m && mx->args[0].kind == Arg::Kind::Proxy &&
            reg_of(d->second->args[0].proxy->type.dtype) == Reg::f32 &&
            resolve(mx->args[0].proxy.get()) == resolve(d->second->args[0].proxy.get())) {
          online[j] = Online{q, d->second->args[0].proxy};
          break;
        }
      }
    }
  }
  // Reductions that do not depend on one another share a pass over the row (a cross entropy's
  // maximum and its target's logit); a reduction of a value computed from another's result
  // starts a new pass.
  std::unordered_map<const ir::Proxy*, std::unordered_set<size_t>> deps;  // value -> reductions it needs
  for (const Stmt* p : prims) {
    std::unordered_set<size_t> d;
    for (const Arg& a : p->args)
      ir::for_each_proxy(a, [&](const ir::ProxyPtr& q) {
        auto it = deps.find(q.get());
        if (it != deps.end()) d.insert(it->second.begin(), it->second.end());
      });
    auto same = plan.same_as.find(p->outputs[0].get());
    if (same != plan.same_as.end() && deps.count(same->second.get())) d = deps[same->second.get()];
    for (size_t j = 0; j < reductions.size(); ++j)
      if (reductions[j] == p) d.insert(j);
    for (const auto& o : p->outputs) deps[o.get()] = d;
  }
  std::vector<std::vector<size_t>> passes;
  for (size_t j = 0; j < reductions.size(); ++j) {
    // An online sum needs what its a needs, not the maximum.
    auto on = online.find(j);
    const auto& need = deps[on != online.end() ? on->second.a.get() : reductions[j]->args[0].proxy.get()];
    bool joins = !passes.empty();
    for (size_t q : joins ? passes.back() : std::vector<size_t>{}) joins = joins && !need.count(q);
    if (joins) passes.back().push_back(j);
    else passes.push_back({j});
  }
  // The lines that compute `targets` for flat index i: loads of the inputs they need, then the
  // elementwise primitives in order. Reduction results are the row's variables already.
  // Vector width: 16 bytes of the narrowest row-shaped tensor per access, when it divides C.
  size_t narrow = 16;
  for (const auto& p : inputs)
    if (p->type.shape == shape) narrow = std::min(narrow, rt::dtype_size(p->type.dtype));
  for (const auto& o : s.outputs)
    if (o->type.shape == shape) narrow = std::min(narrow, rt::dtype_size(o->type.dtype));
  for (const auto& [q, v] : plan.views)
    if (full_view(q)) narrow = std::min(narrow, rt::dtype_size(q->type.dtype));
  const int V = C % static_cast<int64_t>(std::min<size_t>(8, 16 / narrow)) == 0 ? static_cast<int>(std::min<size_t>(8, 16 / narrow)) : 1;
  k.vector_width = V;
  // Rows of up to 4096 elements: one warp each (8 a block), reduced by shuffles; longer rows one
  // block of 256 threads each, reduced in shared memory. (A block per short row spent its time in
  // barriers: 0.09 ms for a [8192, 768] layer norm, 140 GB/s.)
  const int lanes = C <= 4096 ? 32 : 256;
  k.row_lanes = lanes;
  // Short rows whose inputs fit in registers are read once (one warp a row, each lane NCH vectors
  // of V), and every pass over the row runs on the registers: a layer norm reads its input once,
  // not once per statistic. mode: 0 vector or scalar loop per pass (vec_ok decides), 1 the
  // cached registers, 2 scalar only.
  int mode = 0;
  const int64_t NCH = V > 1 ? C / (32 * V) : 0;
  std::vector<ir::ProxyPtr> cached;
  if (lanes == 32 && V > 1 && C % (32 * V) == 0) {
    // Inputs with the rows' last dimension (the row itself, a position embedding broadcast over
    // the batch, a norm's weight): the lane's columns of row r start at the row's offset.
    for (const auto& p : inputs)
      if (!plan.view_only.count(p.get()) && !p->type.shape.empty() && p->type.shape.back() == C) cached.push_back(p);
    for (const auto& [q, v] : plan.views)
      if (full_view(q)) {
        ir::ProxyPtr b = input_ptr(v.base);
        if (std::find(cached.begin(), cached.end(), b) == cached.end()) cached.push_back(b);
      }
    if (cached.empty() || NCH * V * static_cast<int64_t>(cached.size()) > 128) cached.clear();
  }
  k.row_cached = !cached.empty();
  // Passes over the row: one per reduction pass, one more for outputs of the rows' shape.
  size_t row_passes = passes.size();
  bool last_pass = !colreds.empty();
  for (const auto& o : s.outputs) {
    bool is_red = false;
    for (const Stmt* r : reductions) is_red = is_red || r->outputs[0] == o;
    if (!is_red && o->type.shape == shape) last_pass = true;
  }
  if (last_pass) ++row_passes;
  k.row_passes = static_cast<int>(std::max<size_t>(1, row_passes));
  // Long rows (a block each), with TRACER_ROWS_SHARED=1: inputs of the rows' shape are copied
  // once per row into shared memory (two blocks a multiprocessor) and every pass reads them
  // there, not from memory.
  std::vector<ir::ProxyPtr> shared;
  std::unordered_map<const ir::Proxy*, int64_t> shared_at;
  if (lanes == 256 && V > 1) {
    int64_t at = 0;
    auto add = [&](const ir::ProxyPtr& p) {
      if (shared_at.count(p.get())) return;
      shared.push_back(p);
      shared_at[p.get()] = at;
      at += (C * static_cast<int64_t>(rt::dtype_size(p->type.dtype)) + 15) / 16 * 16;
    };
    for (const auto& p : inputs)
      if (p->type.shape == shape && !plan.view_only.count(p.get())) add(p);
    for (const auto& [q, v] : plan.views)  // a reshape of an input read in order: its rows are the input's
      if (full_view(q)) add(input_ptr(v.base));
    // Up to 112 KiB (two blocks a multiprocessor on Hopper), within what the device allows; not
    // when the row is read only once (one pass, nothing of the rows' shape written after it).
    // Off unless TRACER_ROWS_SHARED=1: every pass reads the rows from memory, the later ones
    // mostly from L2, with more blocks a multiprocessor than the copies allow. On the H200 the
    // GPT's cross entropy forward over [8192, 50304] bf16 logits took 0.523 ms so against 0.639
    // ms with the copies (bench/sessions/2026-12-02-s5-call6.sh; the online form 0.856 ms).
    const char* shared_env = std::getenv("TRACER_ROWS_SHARED");
    const bool shared_on = shared_env && std::string(shared_env) == "1";
    if (!shared_on || at > std::min<long long>(112 * 1024, max_shared - 8 * 1024) || shared.empty() || row_passes <= 1) {
      shared.clear();
      shared_at.clear();
    } else {
      k.shared_bytes = at;
    }
  }
  auto in_shared = [&](const ir::ProxyPtr& p) { return shared_at.count(p.get()) > 0; };
  auto vec_ref = [&](const ir::ProxyPtr& p) {
    return mode == 1 ? name_of(p) + "_r[tr_it * " + std::to_string(V) + " + k]" : name_of(p) + "_v[k]";
  };

  // The lines that compute `targets` for element i = base + c: loads of the inputs they need
  // (row-shaped ones from the vector `NAME_v[k]` when vec), then the elementwise primitives in
  // order. Reduction results are the row's variables already. *row_inputs gets the row-shaped
  // inputs read.
  // Index expressions over the row and the column (i = tr_r * C + tr_c), not 64-bit divisions
  // of i per element (a cross entropy's targets gather was 4 of them per logit).
  const Index rows_ix("LL", C, rt::numel(shape) / std::max<int64_t>(C, 1));
  auto element_lines = [&](const std::vector<ir::ProxyPtr>& targets, const std::string& indent, bool vec,
                           std::vector<ir::ProxyPtr>* row_inputs) {
    std::unordered_set<const ir::Proxy*> need;
    std::vector<const Stmt*> chosen = needed_prims(prims, plan, targets, [](const Stmt&) { return false; }, &need);
    std::ostringstream o;
    std::unordered_set<const ir::Proxy*> vec_loaded;
    auto vector_base = [&](const ir::ProxyPtr& b) {
      if (vec_loaded.insert(b.get()).second) row_inputs->push_back(b);
    };
    for (const auto& p : inputs) {
      if (!need.count(p.get()) || plan.view_only.count(p.get())) continue;
      bool row_shaped = p->type.shape == shape;
      bool in_regs = mode == 1 && std::find(cached.begin(), cached.end(), p) != cached.end();
      if (row_shaped && vec) vector_base(p);
      std::string ref = (vec && row_shaped) || in_regs ? vec_ref(p)
                        : in_shared(p) ? name_of(p) + "_s[tr_c]"
                                       : "p_" + name_of(p) + "[" + offset_expr(p->type.shape, shape, rows_ix) + "]";
      o << indent << "const " << reg_name(reg_of(p->type.dtype)) << " " << name_of(p) << " = " << load_expr(p->type.dtype, ref) << ";\n";
    }
    for (const Stmt* p : prims) {  // views of inputs, in the group's order
      const ir::ProxyPtr& q = p->outputs[0];
      auto v = plan.views.find(q.get());
      if (v == plan.views.end() || !need.count(q.get())) continue;
      ir::ProxyPtr b = input_ptr(v->second.base);
      std::string ref;
      if (full_view(q.get())) {
        if (vec) vector_base(b);
        ref = vec ? vec_ref(b) : in_shared(b) ? name_of(b) + "_s[tr_c]" : "p_" + name_of(b) + "[i]";
      } else {
        ref = "p_" + name_of(b) + "[" + view_offset_expr(v->second, shape, rows_ix) + "]";
      }
      o << indent << "const " << reg_name(reg_of(q->type.dtype)) << " " << name_of(q) << " = " << load_expr(q->type.dtype, ref) << ";\n";
    }
    o << prim_lines(chosen, plan, shape, rows_ix, canonical, name_of, [&](const ir::Proxy* b) { return "p_" + name_of(input_ptr(b)); }, indent);
    return o.str();
  };

  // A loop over the row's columns computing `targets`, then `tail` per element: with vector
  // accesses when the launcher says the pointers allow (vec_ok), else one element at a time.
  // full_outs are stored from the element's variables (vectors of V in the vector loop).
  // vec_tail, when it has post lines, replaces tail_lines in the vector steps: decl before the
  // loop over the V elements, elem in it, post once after it (an online sum's rescale, once per
  // vector).
  struct VecTail {
    std::vector<std::string> decl, elem, post;
  };
  // acc_lines (a RowsColumns group's last pass): lines per element adding to the lane's column
  // accumulators at index @A@; the loops are then unrolled (tr_it a constant, so the
  // accumulators stay in registers): a vector's element k at tr_it * V + k, a scalar step's at
  // tr_it.
  const int64_t NV = V > 1 ? (C + 32 * V - 1) / (32 * V) : 0, NS = (C + 31) / 32;
  auto column_loop = [&](const std::vector<ir::ProxyPtr>& targets, const std::vector<ir::ProxyPtr>& full_outs,
                         const std::vector<std::string>& tail_lines, const std::string& indent, const VecTail& vec_tail = {},
                         const std::vector<std::string>& acc_lines = {}) {
    const bool colacc = !acc_lines.empty();
    auto tail = [&](const std::string& ind, const std::string& at) {
      std::string t;
      for (const auto& l : tail_lines) t += ind + l + "\n";
      for (std::string l : acc_lines) {
        for (size_t q = l.find("@A@"); q != std::string::npos; q = l.find("@A@", q + at.size())) l.replace(q, 3, at);
        t += ind + l + "\n";
      }
      return t;
    };
    const std::string vat = "tr_it * " + std::to_string(V) + " + k";
    std::ostringstream o;
    std::string in2 = indent + "  ", in3 = indent + "    ", in4 = indent + "      ";
    // The V elements from column tr_c0 on: `lines` computes each (at `inner`), full_outs gather in
    // vectors stored with one access each (at `outer`).
    auto vector_step = [&](const std::string& lines, const std::string& outer, const std::string& inner) {
      std::ostringstream v;
      for (const auto& p : full_outs)
        v << outer << "__align__(16) " << storage_name(p->type.dtype) << " " << name_of(p) << "_o[" << V << "];\n";
      if (!vec_tail.post.empty())
        for (const auto& l : vec_tail.decl) v << outer << l << "\n";
      v << outer << "#pragma unroll\n" << outer << "for (int k = 0; k < " << V << "; ++k) {\n";
      v << inner << "const long long tr_c = tr_c0 + k, i = tr_base + tr_c;\n" << lines;
      for (const auto& p : full_outs) v << inner << name_of(p) << "_o[k] = " << store_expr(p->type.dtype, name_of(p), true) << ";\n";
      if (vec_tail.post.empty()) {
        v << tail(inner, vat) << outer << "}\n";
      } else {
        for (const auto& l : vec_tail.elem) v << inner << l << "\n";
        v << outer << "}\n";
        for (const auto& l : vec_tail.post) v << outer << l << "\n";
      }
      for (const auto& p : full_outs)
        v << outer << "tr_copy<" << V << " * sizeof(" << storage_name(p->type.dtype) << ")>(p_" << name_of(p) << " + tr_base + tr_c0, "
          << name_of(p) << "_o);\n";
      return v.str();
    };
    if (mode == 1) {  // the lane's NCH vectors, from the registers loaded at the row's start
      std::vector<ir::ProxyPtr> row_in;
      std::string lines = element_lines(targets, in3, true, &row_in);
      o << indent << "#pragma unroll\n" << indent << "for (int tr_it = 0; tr_it < " << NCH << "; ++tr_it) {\n";
      o << in2 << "const long long tr_c0 = (long long)tr_lane * " << V << " + tr_it * " << 32 * V << "LL;\n";
      o << vector_step(lines, in2, in3) << indent << "}\n";
      return o.str();
    }
    if (V > 1 && mode == 0) {
      std::vector<ir::ProxyPtr> row_in;
      std::string lines = element_lines(targets, colacc ? in4 + "  " : in4, true, &row_in);
      o << indent << "if (vec_ok) {\n";
      std::string at = in3;
      if (colacc) {
        o << in2 << "#pragma unroll\n" << in2 << "for (int tr_it = 0; tr_it < " << NV << "; ++tr_it) {\n";
        o << in3 << "const long long tr_c0 = (long long)tr_lane * " << V << " + tr_it * " << 32 * V << "LL;\n";
        o << in3 << "if (tr_c0 < tr_C) {\n";
        at = in4;
      } else {
        // A block's long rows from memory: two vectors in flight a thread.
        if (lanes == 256 && shared.empty()) o << in2 << "#pragma unroll 2\n";
        o << in2 << "for (long long tr_c0 = (long long)tr_lane * " << V << "; tr_c0 < tr_C; tr_c0 += " << lanes * V << "LL) {\n";
      }
      for (const auto& p : row_in)
        o << at << "__align__(16) " << storage_name(p->type.dtype) << " " << name_of(p) << "_v[" << V << "];\n"
          << at << "tr_copy<" << V << " * sizeof(" << storage_name(p->type.dtype) << ")>(" << name_of(p) << "_v, "
          << (in_shared(p) ? name_of(p) + "_s + tr_c0" : "p_" + name_of(p) + " + tr_base + tr_c0") << ");\n";
      o << vector_step(lines, at, at + "  ");
      if (colacc) o << in3 << "}\n";
      o << in2 << "}\n" << indent << "} else {\n";
    }
    std::vector<ir::ProxyPtr> unused;
    const bool both = V > 1 && mode == 0;
    std::string ind = both ? in2 : indent;
    if (colacc) {
      o << ind << "#pragma unroll\n" << ind << "for (int tr_it = 0; tr_it < " << NS << "; ++tr_it) {\n";
      o << ind << "  const long long tr_c = (long long)tr_lane + tr_it * 32LL;\n" << ind << "  if (tr_c < tr_C) {\n";
      const std::string ind2 = ind + "    ";
      o << ind2 << "const long long i = tr_base + tr_c;\n";
      o << element_lines(targets, ind2, false, &unused);
      for (const auto& p : full_outs) o << ind2 << "p_" << name_of(p) << "[i] = " << store_expr(p->type.dtype, name_of(p), true) << ";\n";
      o << tail(ind2, "tr_it") << ind << "  }\n" << ind << "}\n";
    } else {
      o << ind << "for (long long tr_c = tr_lane; tr_c < tr_C; tr_c += " << lanes << ") {\n" << ind << "  const long long i = tr_base + tr_c;\n";
      o << element_lines(targets, ind + "  ", false, &unused);
      for (const auto& p : full_outs) o << ind << "  p_" << name_of(p) << "[i] = " << store_expr(p->type.dtype, name_of(p), true) << ";\n";
      o << tail(ind + "  ", "") << ind << "}\n";
    }
    if (both) o << indent << "}\n";
    return o.str();
  };

  std::unordered_set<const ir::Proxy*> outs;
  for (const auto& o : s.outputs) outs.insert(o.get());

  std::ostringstream body;
  if (!canonical) body << "// " << k.origin << "\n";
  body << "extern \"C\" __global__ void __launch_bounds__(256) " << name << "(";
  for (const auto& p : k.params)
    body << (p.output ? "" : "const ") << storage_name(p.type.dtype) << (p.may_alias ? "* p_" : "* __restrict__ p_") << name_of(p.proxy) << ", ";
  body << "long long tr_rows, int vec_ok" << (rowcols ? ", double* __restrict__ tr_partial" : "") << ") {\n";
  // A RowsColumns group's column accumulators: A a lane for each column reduction, in f32 (in
  // double for f64 values); its blocks take fixed chunks of rows (row_chunk, from the shape
  // alone), so the partials, and the results, do not depend on the device.
  const int64_t A = std::max<int64_t>(NV * V, NS);
  auto acc_type = [&](const Stmt* r) { return reg_of(r->args[0].proxy->type.dtype) == Reg::f64 ? std::string("double") : std::string("float"); };
  auto acc_init = [&](const Stmt* r) {
    const std::string& op = r->op->name;
    if (acc_type(r) == "double") return init_double(op);
    return op == "sum" ? std::string("0.f") : op == "amax" ? std::string("(-__int_as_float(0x7f800000))") : std::string("__int_as_float(0x7f800000)");
  };
  const auto& acc_step = reduce_step;
  int64_t RB = 0, chunks = 0;
  // The lanes' column accumulators live in shared memory, each warp its own [A][32] per
  // reduction (at cs_at), so the kernel keeps the registers of a row kernel and two blocks fit a
  // multiprocessor; TRACER_ROWCOL_SHARED=0 keeps them in registers (for measuring).
  static const bool acc_shared_env = [] {
    const char* e = std::getenv("TRACER_ROWCOL_SHARED");
    return !(e && std::string(e) == "0");
  }();
  bool acc_shared = acc_shared_env;
  std::vector<int64_t> cs_at;
  if (rowcols) {
    // 264 blocks (one wave of two a multiprocessor on an H100 or H200), each warp taking at
    // most 32 rows, so its f32 sums add few terms; TRACER_ROWCOL_BLOCKS sets the target.
    static const int64_t target = [] {
      const char* e = std::getenv("TRACER_ROWCOL_BLOCKS");
      return e && std::atoll(e) > 0 ? static_cast<int64_t>(std::atoll(e)) : int64_t{264};
    }();
    RB = std::min<int64_t>(256, std::max<int64_t>(8, (k.rows + target - 1) / target));
    RB = (RB + 7) / 8 * 8;
    chunks = (k.rows + RB - 1) / RB;
    k.row_columns = true;
    k.row_chunk = RB;
    if (acc_shared) {
      int64_t at = 0;
      for (const Stmt* r : colreds) {
        cs_at.push_back(at);
        at += 8 * 32 * A * (acc_type(r) == "double" ? 8 : 4);
      }
      // (At most 96 KiB within the accumulator budget; a device with less shared memory a block
      // keeps them in registers.)
      if (at <= max_shared) k.shared_bytes = at;
      else acc_shared = false;
    }
    k.column_chunks = chunks;
    k.partials = chunks * static_cast<int64_t>(colreds.size()) * C;
  }
  if (lanes == 256) {  // one block per row
    body << "  __shared__ double tr_part[256];\n";
    if (!online.empty()) body << "  __shared__ double tr_part2[256];\n";
    if (!shared.empty()) body << "  extern __shared__ __align__(16) unsigned char tr_smem[];\n";
    for (const auto& p : shared)
      body << "  " << storage_name(p->type.dtype) << "* " << name_of(p) << "_s = (" << storage_name(p->type.dtype) << "*)(tr_smem + "
           << shared_at.at(p.get()) << ");\n";
    body << "  const int tr_lane = threadIdx.x;\n";
    body << "  const long long tr_C = " << C << "LL;\n";
    body << "  for (long long tr_r = blockIdx.x; tr_r < tr_rows; tr_r += gridDim.x) {\n";
    if (!shared.empty()) {
      body << "    __syncthreads();  // the previous row's passes are done with the shared copies\n";
      for (const auto& p : shared) {
        std::string t = storage_name(p->type.dtype);
        // Unrolled, so each thread has several loads in flight (one at a time held the copy of a
        // 50304-wide row to about 1 TB/s).
        body << "    if (vec_ok) {\n      #pragma unroll 4\n      for (long long c0 = (long long)threadIdx.x * " << V << "; c0 < tr_C; c0 += " << 256 * V
             << "LL) tr_copy<" << V << " * sizeof(" << t << ")>(" << name_of(p) << "_s + c0, p_" << name_of(p) << " + tr_r * tr_C + c0);\n    }\n";
        body << "    else { for (long long c = threadIdx.x; c < tr_C; c += 256) " << name_of(p) << "_s[c] = p_" << name_of(p) << "[tr_r * tr_C + c]; }\n";
      }
      body << "    __syncthreads();\n";
    }
  } else {  // one warp per row, 8 rows a block: reductions by shuffles, no block barrier
    body << "  const int tr_lane = threadIdx.x & 31;\n";
    body << "  const long long tr_C = " << C << "LL;\n";
    if (rowcols && acc_shared) {
      body << "  extern __shared__ __align__(16) unsigned char tr_smem[];\n";
      body << "  const int tr_cw = (threadIdx.x >> 5) * " << A * 32 << " + tr_lane;  // this lane's accumulators: [warp][a][lane]\n";
      for (size_t j = 0; j < colreds.size(); ++j) {
        const std::string t = acc_type(colreds[j]);
        body << "  " << t << "* tr_cs" << j << " = (" << t << "*)(tr_smem + " << cs_at[j] << ");\n";
        body << "  for (int e = threadIdx.x; e < " << 8 * 32 * A << "; e += 256) tr_cs" << j << "[e] = " << acc_init(colreds[j]) << ";\n";
      }
      body << "  __syncthreads();\n";
    }
    if (rowcols) {
      if (!acc_shared)
        for (size_t j = 0; j < colreds.size(); ++j)
          body << "  " << acc_type(colreds[j]) << " tr_ca" << j << "[" << A << "];\n  #pragma unroll\n  for (int a = 0; a < " << A << "; ++a) tr_ca" << j
               << "[a] = " << acc_init(colreds[j]) << ";\n";
      body << "  const long long tr_r1 = tr_rows < ((long long)blockIdx.x + 1) * " << RB << "LL ? tr_rows : ((long long)blockIdx.x + 1) * " << RB << "LL;\n";
      body << "  for (long long tr_r = (long long)blockIdx.x * " << RB << "LL + (threadIdx.x >> 5); tr_r < tr_r1; tr_r += 8) {\n";
    } else {
      body << "  for (long long tr_r = (long long)blockIdx.x * 8 + (threadIdx.x >> 5); tr_r < tr_rows; tr_r += (long long)gridDim.x * 8) {\n";
    }
  }
  body << "    const long long tr_base = tr_r * tr_C;\n";
  auto emit_row = [&](std::ostringstream& body) {
  const auto& red_init = init_double;
  auto red_step = [](const std::string& op, const std::string& acc) { return reduce_step(op, acc, "v"); };
  for (const auto& pass : passes) {
    std::vector<ir::ProxyPtr> targets;
    std::vector<std::string> tail;
    VecTail vtail;
    // An amax whose online sum is in this pass: its result is that sum's running maximum.
    std::unordered_map<size_t, size_t> merged_amax;  // the amax's index -> the online sum's
    for (size_t j : pass) {
      auto on = online.find(j);
      if (on != online.end() && std::count(pass.begin(), pass.end(), on->second.amax) && !merged_amax.count(on->second.amax))
        merged_amax[on->second.amax] = j;
    }
    for (size_t j : pass) {
      const Stmt* red = reductions[j];
      const ir::ProxyPtr& y = red->outputs[0];
      const std::string J = std::to_string(j);
      auto on = online.find(j);
      body << "    // " << (canonical ? name_of(y) : y->name) << " = prims." << red->op->name << " over the row"
           << (on != online.end() ? " (online: with its own running maximum)" : "")
           << (merged_amax.count(j) ? " (the running maximum of reduction " + std::to_string(merged_amax.at(j)) + "'s online sum)" : "") << "\n";
      if (merged_amax.count(j)) {
        body << "    double tr_red" << j << ";\n";
        continue;
      }
      body << "    double tr_red" << j << ", tr_acc" << j << " = " << red_init(red->op->name) << ";\n";
      if (on == online.end()) {
        targets.push_back(red->args[0].proxy);
        tail.push_back("{ const double v = (double)" + name_of(red->args[0].proxy) + "; tr_acc" + J + " = " +
                       red_step(red->op->name, "tr_acc" + J) + "; }");
        if (reg_of(red->args[0].proxy->type.dtype) != Reg::f32) {
          vtail.elem.push_back(tail.back());
          continue;
        }
        // f32 values: the V elements of a vector step reduce in f32 (a maximum is exact in
        // f32; a sum of V rounds once more), then one conversion and one double operation per
        // vector, not per element: f32-to-f64 conversions run at a quarter of the f32 rate,
        // and held a cross entropy's pass over 50304-wide rows to 0.5 ms on the H200.
        const std::string vp = "tr_vp" + J, op = red->op->name;
        const std::string finit = op == "sum" ? "0.f" : op == "amax" ? "(-__int_as_float(0x7f800000))" : "__int_as_float(0x7f800000)";
        vtail.decl.push_back("float " + vp + " = " + finit + ";");
        vtail.elem.push_back("{ const float v = " + name_of(red->args[0].proxy) + "; " + vp + " = " + red_step(op, vp) + "; }");
        vtail.post.push_back("{ const double v = (double)" + vp + "; tr_acc" + J + " = " + red_step(op, "tr_acc" + J) + "; }");
        continue;
      }
      // The thread's running maximum tr_fm of a and its sum tr_fs of exp(a - tr_fm), in f32 as
      // the two-pass form computes exp(a - m): in the vector loop the V elements' maximum first,
      // then one rescale of the sum and V exponentials (no branch per element); one element at a
      // time otherwise. -inf elements add nothing; a NaN or an infinite maximum makes the result
      // NaN at the end, as exp(a - m) does in the two-pass form. A NaN makes the running maximum
      // NaN for good (tr_max_nan; one element at a time, the NaN itself), so the sum turns NaN
      // too; the maximum is then the row's amax exactly, and an amax of a in the same pass is not
      // accumulated apart (merged_amax). The exponentials take tr_exp_le0 (their argument is at
      // most 0).
      const std::string a = name_of(on->second.a), fm = "tr_fm" + J, fs = "tr_fs" + J, ov = "tr_ov" + J;
      const std::string ninf = "(-__int_as_float(0x7f800000))";
      body << "    float " << fm << " = " << ninf << ", " << fs << " = 0.f;\n";
      targets.push_back(on->second.a);
      tail.push_back("{ const float v = (float)" + a + "; if (v != v) " + fm + " = v; else if (v > " + fm + ") { " + fs + " = (" + fm +
                     " == " + ninf + " ? 0.f : " + fs + " * tr_exp_le0(" + fm + " - v)) + 1.f; " + fm + " = v; } else if (" + fm + " != " + ninf +
                     ") " + fs + " += tr_exp_le0(v - " + fm + "); }");
      vtail.elem.push_back(ov + "[k] = (float)" + a + ";");
      vtail.post.push_back("{ float mx = " + fm + "; for (int k = 0; k < " + std::to_string(V) + "; ++k) mx = tr_max_nan(mx, " + ov + "[k]);");
      vtail.post.push_back("  if (mx != " + ninf + ") { float t = 0.f; for (int k = 0; k < " + std::to_string(V) + "; ++k) t += tr_exp_le0(" + ov +
                             "[k] - mx); " + fs + " = (" + fm + " == " + ninf + " ? 0.f : " + fs + " * tr_exp_le0(" + fm + " - mx)) + t; " + fm +
                             " = mx; } }");
      vtail.decl.push_back("float " + ov + "[" + std::to_string(V) + "];");
    }
    body << "    {\n" << column_loop(targets, {}, tail, "      ", vtail) << "    }\n";
    // The result, stored as the CPU stores it (its dtype), as every thread's register.
    auto result = [&](size_t j) {
      const ir::ProxyPtr& y = reductions[j]->outputs[0];
      DType od = y->type.dtype;
      std::string r = "tr_red" + std::to_string(j);
      std::string val = od == DType::f64 ? r : od == DType::bf16 ? "tr_round_bf16((float)" + r + ")"
                        : od == DType::f16 ? "tr_round_f16((float)" + r + ")" : "(float)" + r;
      body << "    const " << reg_name(reg_of(od)) << " " << name_of(y) << " = " << val << ";\n";
      if (outs.count(y.get())) body << "    if (tr_lane == 0) p_" << name_of(y) << "[tr_r] = " << store_expr(od, name_of(y), true) << ";\n";
    };
    for (size_t j : pass) {
      if (merged_amax.count(j)) continue;  // after its online sum
      const Stmt* red = reductions[j];
      const std::string acc = "tr_acc" + std::to_string(j);
      const std::string step = red_step(red->op->name, acc);
      if (online.count(j)) {
        // (m1, s1) and (m2, s2) combine to m = max (NaN first, as amax), s = s1 e^(m1 - m) + s2 e^(m2 - m),
        // an empty side (m = -inf) adding nothing; the same fixed tree as the other reductions.
        const std::string om = "tr_om" + std::to_string(j), ninf = "-__longlong_as_double(0x7ff0000000000000LL)";
        const std::string J = std::to_string(j);
        // The thread's f32 state as the doubles the merge takes (a NaN seen: a NaN maximum).
        body << "    double " << om << " = (double)tr_fm" << J << ";\n";
        body << "    " << acc << " = (double)tr_fs" << J << ";\n";
        auto merge = [&](const std::string& m2, const std::string& s2) {
          return "{ const double m1 = " + om + ", s1 = " + acc + ", m2 = " + m2 + ", s2 = " + s2 +
                 "; const double m = (m1 != m1 || m1 >= m2) ? m1 : m2; " + acc + " = (m1 == " + ninf + " ? 0.0 : s1 * exp(m1 - m)) + (m2 == " +
                 ninf + " ? 0.0 : s2 * exp(m2 - m)); " + om + " = m; }";
        };
        if (lanes == 256) {
          body << "    tr_part[threadIdx.x] = " << acc << "; tr_part2[threadIdx.x] = " << om << ";\n    __syncthreads();\n";
          body << "    for (int tr_w = blockDim.x / 2; tr_w > 0; tr_w >>= 1) {\n";
          body << "      if (threadIdx.x < tr_w) { " << acc << " = tr_part[threadIdx.x]; " << om << " = tr_part2[threadIdx.x]; "
               << merge("tr_part2[threadIdx.x + tr_w]", "tr_part[threadIdx.x + tr_w]") << " tr_part[threadIdx.x] = " << acc
               << "; tr_part2[threadIdx.x] = " << om << "; }\n";
          body << "      __syncthreads();\n    }\n";
          body << "    " << acc << " = tr_part[0]; " << om << " = tr_part2[0];\n    __syncthreads();  // tr_part is reused\n";
        } else {
          body << "    for (int tr_w = 16; tr_w > 0; tr_w >>= 1) { const double o_s = __shfl_down_sync(0xffffffffu, " << acc
               << ", tr_w), o_m = __shfl_down_sync(0xffffffffu, " << om << ", tr_w); if (tr_lane < tr_w) " << merge("o_m", "o_s") << " }\n";
          body << "    " << acc << " = __shfl_sync(0xffffffffu, " << acc << ", 0); " << om << " = __shfl_sync(0xffffffffu, " << om << ", 0);\n";
        }
        body << "    tr_red" << j << " = isfinite(" << om << ") ? " << acc << " : __longlong_as_double(0x7ff8000000000000LL);\n";
        for (const auto& [q, sum] : merged_amax)
          if (sum == j) {
            body << "    tr_red" << q << " = " << om << ";\n";
            result(q);
          }
      } else if (lanes == 256) {
        body << "    tr_part[threadIdx.x] = " << acc << ";\n    __syncthreads();\n";
        body << "    for (int tr_w = blockDim.x / 2; tr_w > 0; tr_w >>= 1) {\n";
        body << "      if (threadIdx.x < tr_w) { const double v = tr_part[threadIdx.x + tr_w]; " << acc << " = tr_part[threadIdx.x]; tr_part[threadIdx.x] = " << step << "; }\n";
        body << "      __syncthreads();\n    }\n";
        body << "    tr_red" << j << " = tr_part[0];\n    __syncthreads();  // tr_part is reused\n";
      } else {
        // A fixed tree (lane l takes lane l + w), then lane 0's result to every lane: the same value
        // on all lanes and on every run.
        body << "    for (int tr_w = 16; tr_w > 0; tr_w >>= 1) { const double v = __shfl_down_sync(0xffffffffu, " << acc << ", tr_w); if (tr_lane < tr_w) " << acc << " = " << step << "; }\n";
        body << "    tr_red" << j << " = __shfl_sync(0xffffffffu, " << acc << ", 0);\n";
      }
      result(j);
    }
  }
  std::vector<ir::ProxyPtr> full, per_row;
  for (const auto& o : s.outputs) {
    bool is_red = false;
    for (const Stmt* red : reductions) is_red = is_red || red->outputs[0] == o;
    if (is_red || post.count(o.get())) continue;
    (o->type.shape == shape ? full : per_row).push_back(o);
  }
  if (!colreds.empty()) {  // the outputs of the rows' shape, and the columns' sums beside them
    std::vector<ir::ProxyPtr> targets = full;
    std::vector<std::string> acc;
    for (size_t j = 0; j < colreds.size(); ++j) {
      const Stmt* r = colreds[j];
      targets.push_back(r->args[0].proxy);
      const std::string a = acc_shared ? "tr_cs" + std::to_string(j) + "[tr_cw + (@A@) * 32]" : "tr_ca" + std::to_string(j) + "[@A@]";
      acc.push_back("{ const " + acc_type(r) + " v = (" + acc_type(r) + ")" + name_of(r->args[0].proxy) + "; " + a + " = " +
                    acc_step(r->op->name, a, "v") + "; }");
    }
    body << column_loop(targets, full, {}, "    ", {}, acc);
  } else if (!full.empty()) {
    body << column_loop(full, full, {}, "    ");
  }
  if (!per_row.empty()) {
    // A value of the row's shape [.., 1] is the same at every column: computed once, at column 0,
    // by lane 0 (a cross entropy's loss; before, every column computed it and column 0 stored it).
    int saved = mode;
    mode = 0;  // scalar loads: nothing of it is in the lane's registers
    std::vector<ir::ProxyPtr> unused;
    body << "    if (tr_lane == 0) {\n      const long long tr_c = 0, i = tr_base;\n      (void)tr_c; (void)i;\n";
    body << element_lines(per_row, "      ", false, &unused);
    for (const auto& o : per_row) body << "      p_" << name_of(o) << "[tr_r] = " << store_expr(o->type.dtype, name_of(o), true) << ";\n";
    body << "    }\n";
    mode = saved;
  }
  };
  if (cached.empty()) {
    mode = 0;
    emit_row(body);
  } else {
    body << "    if (vec_ok) {\n";
    for (const auto& c : cached) {
      std::string t = storage_name(c->type.dtype);
      body << "    __align__(16) " << t << " " << name_of(c) << "_r[" << NCH * V << "];\n";
      // Where the row starts in this input: its element for (row, column 0).
      // (a reshape of an input read in order, or the rows themselves: the row's own offset)
      const bool in_order = rt::numel(c->type.shape) == rt::numel(shape);
      std::string start = in_order ? std::string("tr_base") : "(" + offset_expr(c->type.shape, shape, "LL") + ")";
      for (size_t at = start.find('i'); at != std::string::npos; at = start.find('i', at + 1))
        if ((at == 0 || !std::isalnum(static_cast<unsigned char>(start[at - 1]))) &&
            (at + 1 == start.size() || !std::isalnum(static_cast<unsigned char>(start[at + 1]))))
          start.replace(at, 1, "tr_base");
      body << "    #pragma unroll\n    for (int tr_it = 0; tr_it < " << NCH << "; ++tr_it) tr_copy<" << V << " * sizeof(" << t
           << ")>(" << name_of(c) << "_r + tr_it * " << V << ", p_" << name_of(c) << " + " << start << " + tr_lane * " << V << " + tr_it * "
           << 32 * V << "LL);\n";
    }
    mode = 1;
    emit_row(body);
    body << "    } else {\n";
    mode = 2;
    emit_row(body);
    body << "    }\n";
  }
  body << "  }\n";
  if (rowcols && acc_shared) {
    // The block's 8 warps' accumulators added in warp order, one thread per (a, lane) entry, and
    // written as one double per column, where entry (a, lane) maps to the column the loops dealt
    // it (vectors of V when vec_ok, else one column a step).
    body << "  __syncthreads();\n";
    for (size_t j = 0; j < colreds.size(); ++j) {
      const std::string t = acc_type(colreds[j]), cs = "tr_cs" + std::to_string(j);
      body << "  for (int e = threadIdx.x; e < " << A * 32 << "; e += 256) {\n";
      body << "    const int a = e >> 5, l = e & 31;\n";
      body << "    " << t << " v = " << cs << "[e];\n";
      body << "    for (int w = 1; w < 8; ++w) { const " << t << " u = " << cs << "[w * " << A * 32 << " + e]; v = "
           << acc_step(colreds[j]->op->name, "v", "u") << "; }\n";
      if (V > 1)
        body << "    const long long tr_c = vec_ok ? (a < " << NV * V << " ? (long long)l * " << V << " + (a / " << V << ") * " << 32 * V
             << "LL + a % " << V << " : tr_C) : (a < " << NS << " ? (long long)l + a * 32LL : tr_C);\n";
      else
        body << "    const long long tr_c = a < " << NS << " ? (long long)l + a * 32LL : tr_C;\n";
      body << "    if (tr_c < tr_C) tr_partial[((long long)blockIdx.x * " << colreds.size() << " + " << j << ") * tr_C + tr_c] = (double)v;\n  }\n";
    }
  }
  if (rowcols && !acc_shared) {
    // The block's warps combine in a fixed tree (warps 4-7 into 0-3, 2-3 into 0-1, 1 into 0)
    // through shared memory, a slice of at most 48 KiB at a time; then warp 0 writes one double
    // per column, where its lanes' accumulators map to columns as the loops dealt them (vectors
    // of V when vec_ok, else one column a step).
    body << "  const int tr_w = threadIdx.x >> 5;\n";
    int64_t cp_bytes = 0;
    for (const Stmt* r : colreds) {
      const int64_t b = acc_type(r) == "double" ? 8 : 4;
      cp_bytes = std::max(cp_bytes, 4 * 32 * b * std::min<int64_t>(A, 49152 / (4 * 32 * b)));
    }
    body << "  __shared__ __align__(8) unsigned char tr_cpb[" << cp_bytes << "];\n";
    for (size_t j = 0; j < colreds.size(); ++j) {
      const std::string t = acc_type(colreds[j]), J = std::to_string(j), ca = "tr_ca" + J;
      const int64_t slice = 49152 / (4 * 32 * static_cast<int64_t>(t == "double" ? 8 : 4));
      body << "  {\n    " << t << "* tr_cp = (" << t << "*)tr_cpb;\n";
      for (int64_t a0 = 0; a0 < A; a0 += slice) {
        const int64_t a1 = std::min<int64_t>(A, a0 + slice), n = a1 - a0;
        for (int h : {4, 2, 1}) {
          body << "    if (tr_w >= " << h << " && tr_w < " << 2 * h << ") {\n      #pragma unroll\n      for (int a = 0; a < " << n
               << "; ++a) tr_cp[((tr_w - " << h << ") * " << n << " + a) * 32 + tr_lane] = " << ca << "[" << a0 << " + a];\n    }\n";
          body << "    __syncthreads();\n";
          body << "    if (tr_w < " << h << ") {\n      #pragma unroll\n      for (int a = 0; a < " << n << "; ++a) { const " << t
               << " v = tr_cp[(tr_w * " << n << " + a) * 32 + tr_lane]; " << ca << "[" << a0 << " + a] = "
               << acc_step(colreds[j]->op->name, ca + "[" + std::to_string(a0) + " + a]", "v") << "; }\n    }\n";
          body << "    __syncthreads();\n";
        }
      }
      const std::string dst = "tr_partial[((long long)blockIdx.x * " + std::to_string(colreds.size()) + " + " + J + ") * tr_C + tr_c]";
      body << "    if (tr_w == 0) {\n";
      if (V > 1) {
        body << "      if (vec_ok) {\n        #pragma unroll\n        for (int a = 0; a < " << NV * V << "; ++a) {\n";
        body << "          const long long tr_c = (long long)tr_lane * " << V << " + (a / " << V << ") * " << 32 * V << "LL + a % " << V << ";\n";
        body << "          if (tr_c < tr_C) " << dst << " = (double)" << ca << "[a];\n        }\n      } else {\n";
      }
      body << "        #pragma unroll\n        for (int a = 0; a < " << NS << "; ++a) {\n";
      body << "          const long long tr_c = (long long)tr_lane + a * 32LL;\n";
      body << "          if (tr_c < tr_C) " << dst << " = (double)" << ca << "[a];\n        }\n";
      if (V > 1) body << "      }\n";
      body << "    }\n  }\n";
    }
  }
  body << "}\n";
  if (rowcols) {
    // The second kernel: 32 columns a block and 8 lanes of chunks (lane l adds chunks l, l + 8,
    // ... in order, lane 0 then the 8 lanes' sums in order), each result rounded to its dtype as
    // the CPU rounds it, then the values computed from them, per column.
    body << "\nextern \"C\" __global__ void __launch_bounds__(256) " << name << "_2(";
    for (const auto& p : k.params)
      body << (p.output ? "" : "const ") << storage_name(p.type.dtype) << (p.may_alias ? "* p_" : "* __restrict__ p_") << name_of(p.proxy) << ", ";
    body << "long long tr_rows, int vec_ok, double* __restrict__ tr_partial) {\n";
    body << "  (void)tr_rows; (void)vec_ok;\n";
    body << "  const long long tr_C = " << C << "LL;\n";
    body << "  const int tr_tx = threadIdx.x % 32, tr_ty = threadIdx.x / 32;\n";
    body << "  const long long tr_c = (long long)blockIdx.x * 32 + tr_tx;\n";
    body << "  __shared__ double tr_lanes[256];\n";
    for (size_t j = 0; j < colreds.size(); ++j) {
      const std::string& op = colreds[j]->op->name;
      const std::string a = "tr_a" + std::to_string(j);
      body << "  double " << a << " = " << init_double(op) << ";\n";
      body << "  if (tr_c < tr_C)\n    for (long long q = tr_ty; q < " << chunks << "LL; q += 8) { const double v = tr_partial[(q * " << colreds.size()
           << " + " << j << ") * tr_C + tr_c]; " << a << " = " << acc_step(op, a, "v") << "; }\n";
      body << "  tr_lanes[threadIdx.x] = " << a << ";\n  __syncthreads();\n";
      body << "  if (tr_ty == 0) for (int l = 1; l < 8; ++l) { const double v = tr_lanes[l * 32 + tr_tx]; " << a << " = " << acc_step(op, a, "v")
           << "; }\n  __syncthreads();\n";
    }
    std::vector<ir::ProxyPtr> post_outs;
    for (const auto& o : s.outputs)
      if (post.count(o.get())) post_outs.push_back(o);
    body << "  if (tr_ty == 0 && tr_c < tr_C) {\n    const long long tr_r = 0, tr_base = 0, i = tr_c;\n    (void)tr_r; (void)tr_base; (void)i;\n";
    for (size_t j = 0; j < colreds.size(); ++j) {
      const ir::ProxyPtr& y = colreds[j]->outputs[0];
      const std::string a = "tr_a" + std::to_string(j);
      DType od = y->type.dtype;
      std::string val = od == DType::f64 ? a : od == DType::bf16 ? "tr_round_bf16((float)" + a + ")" : od == DType::f16 ? "tr_round_f16((float)" + a + ")" : "(float)" + a;
      body << "    const " << reg_name(reg_of(od)) << " " << name_of(y) << " = " << val << ";\n";
    }
    mode = 0;
    std::vector<ir::ProxyPtr> unused;
    body << element_lines(post_outs, "    ", false, &unused);
    for (const auto& q : post_outs) body << "    p_" << name_of(q) << "[tr_c] = " << store_expr(q->type.dtype, name_of(q), true) << ";\n";
    body << "  }\n}\n";
  }
  k.source = std::string(cuda_prelude()) + "\n" + body.str();
  return k;
}
}  // namespace

Kernel generate_row(const Stmt& s, const std::string& name, const std::unordered_set<const ir::Proxy*>& may_alias,
                    long long max_shared) {
  Kernel k = generate_row_kernel(s, name, false, may_alias, max_shared);
  Kernel c = generate_row_kernel(s, "tr_kernel", true, may_alias, max_shared);
  k.symbol = name_by_hash(c.source);
  if (k.row_columns) k.symbol2 = k.symbol + "_2";
  k.structure = std::move(c.source);
  return k;
}

}  // namespace tracer::codegen
