// Fused groups; see group.h.
#include "ir/group.h"

#include <algorithm>

#include "ir/fusion.h"
#include "ir/op.h"
#include "ir/op_rules.h"

namespace tracer::ir {

namespace {

using K = Arg::Kind;

Shape strip_leading_ones(const Shape& s) {
  size_t k = 0;
  while (k < s.size() && s[k] == 1) ++k;
  return Shape(s.begin() + static_cast<std::ptrdiff_t>(k), s.end());
}

std::vector<int64_t> contiguous_strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

bool broadcasts(const Shape& in, const Shape& out) {
  if (in.size() > out.size()) return false;
  for (size_t j = 0; j < in.size(); ++j) {
    int64_t a = in[in.size() - 1 - j], b = out[out.size() - 1 - j];
    if (a != b && a != 1) return false;
  }
  return true;
}

bool is_op(const Stmt& p, const char* name) { return p.kind == StmtKind::Prim && p.op && p.op->ns == "prims" && p.op->name == name; }

// The view reshaped to `shape` (same number of elements), if strides can express it: a view
// whose non-broadcast dimensions are contiguous takes contiguous strides; otherwise only
// dimensions of size 1 may come and go.
bool reshape_view(const View& v, const Shape& shape, View* out) {
  *out = v;
  out->shape = shape;
  // Dimensions of size > 1 and their strides.
  std::vector<std::pair<int64_t, int64_t>> big;
  for (size_t k = 0; k < v.shape.size(); ++k)
    if (v.shape[k] != 1) big.push_back({v.shape[k], v.strides[k]});
  std::vector<int64_t> want;
  for (int64_t s : shape)
    if (s != 1) want.push_back(s);
  bool same = want.size() == big.size();
  for (size_t k = 0; same && k < want.size(); ++k) same = want[k] == big[k].first;
  if (same) {  // only ones inserted or removed
    out->strides.assign(shape.size(), 0);
    size_t j = 0;
    for (size_t k = 0; k < shape.size(); ++k)
      if (shape[k] != 1) out->strides[k] = big[j++].second;
    return true;
  }
  // Contiguous (in the order of the dimensions, no broadcast among them): any reshape.
  int64_t expect = 1;
  for (size_t k = big.size(); k-- > 0;) {
    if (big[k].second != expect) return false;
    expect *= big[k].first;
  }
  out->strides = contiguous_strides(shape);
  for (size_t k = 0; k < shape.size(); ++k)
    if (shape[k] == 1) out->strides[k] = 0;
  return true;
}

}  // namespace

bool View::contiguous() const {
  if (offset != 0) return false;
  Shape s = strip_leading_ones(shape);
  std::vector<int64_t> want = contiguous_strides(s);
  size_t lead = shape.size() - s.size();
  for (size_t k = 0; k < s.size(); ++k)
    if (s[k] != 1 && strides[lead + k] != want[k]) return false;
  return base && strip_leading_ones(base->type.shape) == s;
}

bool layout_prim(const Stmt& p) {
  return is_op(p, "reshape") || is_op(p, "broadcast_in_dim") || is_op(p, "transpose") || is_op(p, "slice") ||
         is_op(p, "full") || is_op(p, "iota");
}

bool column_reduction(const Stmt& s, Shape* in_shape, size_t* lead) {
  if (s.kind != StmtKind::Prim || !s.op || s.op->ns != "prims" || s.args.size() < 2 || s.outputs.size() != 1) return false;
  const std::string& op = s.op->name;
  if (op != "sum" && op != "amax" && op != "amin") return false;
  if (s.args[0].kind != K::Proxy) return false;
  const TensorType& in = s.args[0].proxy->type;
  const TensorType& out = s.outputs[0]->type;
  if (in.shape.size() < 2 || rt::numel(in.shape) == 0 || !rt::is_float(in.dtype) || !rt::is_float(out.dtype)) return false;
  std::vector<int64_t> dims;
  try {
    dims = reduce_dims(s.args[0], s.args[1]);
  } catch (const std::exception&) {
    return false;
  }
  std::sort(dims.begin(), dims.end());
  if (dims.empty() || dims.size() >= in.shape.size()) return false;
  for (size_t k = 0; k < dims.size(); ++k)
    if (dims[k] != static_cast<int64_t>(k)) return false;
  if (in_shape) *in_shape = in.shape;
  if (lead) *lead = dims.size();
  return true;
}

bool group_prim(const Stmt& p) {
  return fusible_prim(p) || row_reduction(p) || column_reduction(p) || layout_prim(p);
}

std::vector<OffsetTerm> view_terms(const View& v, const Shape& S) {
  std::vector<OffsetTerm> terms;
  size_t R = S.size(), r = v.shape.size();
  std::vector<int64_t> ostride = contiguous_strides(S);
  for (size_t e = 0; e < r; ++e) {
    if (v.shape[e] == 1 || v.strides[e] == 0) continue;
    size_t d = e + (R - r);
    OffsetTerm t;
    t.div = ostride[d];
    t.mod = d > 0 ? S[d] : 0;
    t.stride = v.strides[e];
    terms.push_back(t);
  }
  return terms;
}

GroupPlan plan_group(const Stmt& s) {
  std::vector<const Stmt*> prims;
  if (s.kind == StmtKind::Prim) prims.push_back(&s);
  else flat_prims(s, prims);
  return plan_group(prims, s.outputs);
}

GroupPlan plan_group(const std::vector<const Stmt*>& prims, const std::vector<ProxyPtr>& outputs) {
  GroupPlan g;
  auto no = [&](const std::string& why) {
    GroupPlan n;
    n.why = why;
    return n;
  };
  if (prims.empty()) return no("no primitives");
  if (outputs.empty()) return no("no outputs");
  bool any_compute = false;
  for (const Stmt* p : prims) {
    if (!group_prim(*p)) return no("prims." + (p->op ? p->op->name : std::string("?")) + " cannot be part of a fused kernel");
    if (!layout_prim(*p)) any_compute = true;
  }
  if (!any_compute) return no("it only moves or creates data");
  // The kind and the iteration shape.
  Shape rows_shape, cols_shape;
  size_t lead = 0;
  bool rows = false, cols = false;
  for (const Stmt* p : prims) {
    Shape in;
    size_t k = 0;
    if (row_reduction(*p, &in)) {
      if (rows && in != rows_shape) return no("reductions over rows of different shapes");
      rows_shape = in;
      rows = true;
    } else if (column_reduction(*p, &in, &k)) {
      if (cols && (in != cols_shape || k != lead)) return no("reductions over columns of different shapes");
      cols_shape = in;
      lead = k;
      cols = true;
    }
  }
  if (rows && cols) return no("reductions over rows and over columns");
  if (rows) {
    g.kind = GroupKind::Rows;
    g.shape = rows_shape;
  } else if (cols) {
    g.kind = GroupKind::Columns;
    g.shape = cols_shape;
    g.lead = lead;
  } else {
    g.kind = GroupKind::Elementwise;
    g.shape = outputs[0]->type.shape;
    for (const auto& o : outputs)
      if (o->type.shape != g.shape) return no("its outputs have different shapes");
    if (rt::numel(g.shape) == 0) return no("the output is empty");
  }
  const Shape& S = g.shape;
  Shape row = S;
  if (!row.empty()) row.back() = 1;
  Shape col(S.begin() + static_cast<std::ptrdiff_t>(g.lead), S.end());  // a column group's reduced shape

  std::unordered_set<const Proxy*> defined, after_columns;
  std::unordered_set<const Proxy*> seen_input;
  auto input = [&](const ProxyPtr& q) {
    if (defined.count(q.get()) || g.views.count(q.get())) return;
    if (seen_input.insert(q.get()).second) {
      g.inputs.push_back(q);
      if (!broadcasts(q->type.shape, S)) g.view_only.insert(q.get());
    }
  };
  // A view of a base: an input (or a view already).
  auto view_of = [&](const ProxyPtr& q, View* v) {
    auto it = g.views.find(q.get());
    if (it != g.views.end()) {
      *v = it->second;
      return true;
    }
    if (defined.count(q.get())) return false;
    input(q);
    v->base = q.get();
    v->shape = q->type.shape;
    v->strides = contiguous_strides(q->type.shape);
    v->offset = 0;
    return true;
  };
  auto aligned = [&](const ProxyPtr& q) { return !g.view_only.count(q.get()) && broadcasts(q->type.shape, S); };
  for (const Stmt* p : prims) {
    const std::string& op = p->op->name;
    const ProxyPtr& out = p->outputs[0];
    bool creation = is_op(*p, "full") || is_op(*p, "iota");
    if ((!layout_prim(*p) || creation) && !broadcasts(out->type.shape, S))
      return no("a value of shape " + rt::shape_str(out->type.shape) + " does not broadcast to " + rt::shape_str(S));
    bool reads_post = false;
    for (const Arg& a : p->args) for_each_proxy(a, [&](const ProxyPtr& q) { reads_post = reads_post || after_columns.count(q.get()); });
    if (layout_prim(*p) && !creation && p->args.size() > 0 && p->args[0].kind == K::Proxy) {
      const ProxyPtr& a = p->args[0].proxy;
      View v;
      if (view_of(a, &v)) {  // a view of an input
        View w = v;
        bool ok = true;
        if (op == "reshape") {
          ok = reshape_view(v, out->type.shape, &w);
        } else if (op == "broadcast_in_dim") {
          std::vector<int64_t> bd = int_list(p->args[2], "broadcast_dimensions");
          const Shape& shape = out->type.shape;
          w.shape = shape;
          w.strides.assign(shape.size(), 0);
          for (size_t k = 0; k < bd.size(); ++k) {
            size_t d = static_cast<size_t>(bd[k]);
            if (v.shape[k] == shape[d]) w.strides[d] = v.strides[k];
            else if (v.shape[k] != 1) ok = false;
          }
        } else if (op == "transpose") {
          std::vector<int64_t> perm = normalized_perm(p->args[0], p->args[1]);
          for (size_t k = 0; k < perm.size(); ++k) {
            w.shape[k] = v.shape[static_cast<size_t>(perm[k])];
            w.strides[k] = v.strides[static_cast<size_t>(perm[k])];
          }
        } else if (op == "slice") {
          SliceSpec sp = slice_spec(p->args[0], p->args[1], p->args[2], p->args[3]);
          w.shape = out->type.shape;
          for (size_t k = 0; k < sp.start.size(); ++k) {
            w.offset += sp.start[k] * v.strides[k];
            w.strides[k] = v.strides[k] * sp.step[k];
          }
        }
        if (!ok) return no("prims." + op + " of an input cannot be read through strides");
        g.views[out.get()] = w;  // one that does not broadcast to S serves only further views
        if (!broadcasts(w.shape, S)) g.view_only.insert(out.get());
        continue;
      }
      // A shape op of a computed value: only as an identity under right-aligned broadcasting.
      if (!aligned(a)) return no("prims." + op + " of " + a->name + ", which is not computed per element");
      bool identity = false;
      if (op == "reshape") {
        identity = strip_leading_ones(a->type.shape) == strip_leading_ones(out->type.shape);
      } else if (op == "broadcast_in_dim") {
        std::vector<int64_t> bd = int_list(p->args[2], "broadcast_dimensions");
        size_t shift = out->type.shape.size() - a->type.shape.size();
        identity = bd.size() == a->type.shape.size();
        for (size_t k = 0; identity && k < bd.size(); ++k) identity = bd[k] == static_cast<int64_t>(k + shift);
      }
      if (!identity) return no("prims." + op + " of the computed value " + a->name + " moves its elements");
      if (reads_post) after_columns.insert(out.get());
      g.same_as[out.get()] = a;
      defined.insert(out.get());
      continue;
    }
    // Compute, reductions and creations: their operands must be aligned values or views.
    bool ok = true;
    std::string bad;
    for (const Arg& a : p->args)
      for_each_proxy(a, [&](const ProxyPtr& q) {
        if (g.views.count(q.get())) {
          if (g.view_only.count(q.get())) ok = false, bad = q->name;
          return;
        }
        if (!defined.count(q.get())) input(q);
        if (!aligned(q)) ok = false, bad = q->name;
      });
    if (!ok) return no(bad + " does not broadcast to " + rt::shape_str(S));
    if (op == "uniform_philox" && out->type.shape != S) return no("a random draw of another shape than the group's");
    if (op == "uniform_philox" && g.kind != GroupKind::Elementwise) return no("a random draw in a reduction group");
    bool is_row = row_reduction(*p), is_col = column_reduction(*p);
    if ((is_row || is_col) && p->args[0].proxy->type.shape != S && !g.views.count(p->args[0].proxy.get()))
      return no("a reduction of a value of another shape");
    if (g.kind == GroupKind::Columns) {
      // Values computed from a column reduction are computed per column after the pass over
      // the rows: nothing of the whole shape and no other reduction may read them.
      if (reads_post && (is_col || strip_leading_ones(out->type.shape).size() > col.size() || !broadcasts(out->type.shape, col)))
        return no("a value of the rows' shape computed from a reduction over the columns");
      if (is_col || reads_post) after_columns.insert(out.get());
    }
    for (const auto& o : p->outputs) defined.insert(o.get());
  }
  for (const auto& o : outputs) {
    if (g.views.count(o.get()) || g.same_as.count(o.get())) return no("an output (" + o->name + ") is a view");
    if (!defined.count(o.get())) return no("an output (" + o->name + ") is not computed by the group");
    const Shape& os = o->type.shape;
    if (g.kind == GroupKind::Rows && os != S && os != row) return no("an output neither of the rows' shape nor one per row");
    if (g.kind == GroupKind::Columns) {
      bool per_column = after_columns.count(o.get()) > 0;
      if (per_column ? strip_leading_ones(os) != strip_leading_ones(col) : os != S)
        return no("an output neither of the reduced shape nor of the rows' shape");
    }
  }
  return g;
}

}  // namespace tracer::ir
