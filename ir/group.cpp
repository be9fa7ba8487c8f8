// Fused groups; see group.h.
#include "ir/group.h"

#include <algorithm>
#include <cstdlib>
#include <string>

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

View base_view(const ProxyPtr& q) {
  View v;
  v.base = q.get();
  v.shape = q->type.shape;
  std::vector<int64_t> st = contiguous_strides(q->type.shape);
  for (size_t k = 0; k < v.shape.size(); ++k)
    v.dims.push_back(v.shape[k] == 1 ? std::vector<SubDim>{} : std::vector<SubDim>{{v.shape[k], st[k]}});
  return v;
}

// The view reshaped to `shape` (same number of elements): its sub-dimensions, outer to inner,
// regrouped into the new dimensions, a sub-dimension split where a new dimension ends inside it
// (always possible when the sizes divide; otherwise false).
bool reshape_view(const View& v, const Shape& shape, View* out) {
  std::vector<SubDim> flat;
  for (const auto& d : v.dims)
    for (const SubDim& x : d)
      if (x.size != 1) flat.push_back(x);
  *out = v;
  out->shape = shape;
  out->dims.assign(shape.size(), {});
  size_t j = 0;
  for (size_t k = 0; k < shape.size(); ++k) {
    int64_t need = shape[k];
    while (need > 1) {
      if (j >= flat.size()) return false;
      SubDim& x = flat[j];
      if (x.size <= need) {
        if (need % x.size != 0) return false;
        out->dims[k].push_back(x);
        need /= x.size;
        ++j;
      } else {
        if (x.size % need != 0) return false;
        int64_t rest = x.size / need;
        out->dims[k].push_back({need, x.stride * rest});
        x.size = rest;
        need = 1;
      }
    }
  }
  return j == flat.size();
}

}  // namespace

bool View::contiguous() const {
  if (offset != 0 || !base) return false;
  std::vector<SubDim> flat;
  for (const auto& d : dims)
    for (const SubDim& x : d)
      if (x.size != 1) flat.push_back(x);
  int64_t expect = 1;
  for (size_t k = flat.size(); k-- > 0;) {
    if (flat[k].stride != expect) return false;
    expect *= flat[k].size;
  }
  return expect == rt::numel(base->type.shape) && rt::numel(shape) == expect;
}

int64_t View::at(const std::vector<int64_t>& c) const {
  int64_t off = offset;
  for (size_t k = 0; k < dims.size(); ++k) {
    int64_t inner = 1;
    for (size_t j = dims[k].size(); j-- > 0;) {
      off += ((c[k] / inner) % dims[k][j].size) * dims[k][j].stride;
      inner *= dims[k][j].size;
    }
  }
  return off;
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
  if (in.shape.empty() || rt::numel(in.shape) == 0 || !rt::is_float(in.dtype) || !rt::is_float(out.dtype)) return false;
  std::vector<int64_t> dims;
  try {
    dims = reduce_dims(s.args[0], s.args[1]);
  } catch (const std::exception&) {
    return false;
  }
  std::sort(dims.begin(), dims.end());
  // Every dimension (a loss summed to a scalar) counts: one column, which the GPU folds
  // (codegen/cuda_columns.cpp).
  if (dims.empty() || dims.size() > in.shape.size()) return false;
  for (size_t k = 0; k < dims.size(); ++k)
    if (dims[k] != static_cast<int64_t>(k)) return false;
  if (in_shape) *in_shape = in.shape;
  if (lead) *lead = dims.size();
  return true;
}

std::unordered_set<const Proxy*> in_order_inputs(const GroupPlan& g) {
  std::unordered_set<const Proxy*> out, bad;
  // Column reductions whose reduced dimensions are all of size 1: an input the size of the whole
  // shape is also the size of the reduced one, and the per-column values computed after the rows
  // may read it again: none lends its buffer.
  if (g.kind == GroupKind::Columns || g.kind == GroupKind::RowsColumns) {
    int64_t lead_rows = 1;
    for (size_t d = 0; d < g.lead && d < g.shape.size(); ++d) lead_rows *= g.shape[d];
    if (lead_rows == 1) return out;
  }
  int64_t n = rt::numel(g.shape);
  for (const auto& q : g.inputs)
    if (!g.view_only.count(q.get()) && rt::numel(q->type.shape) == n) out.insert(q.get());
  for (const auto& [v, view] : g.views)
    if (!(view.contiguous() && rt::numel(view.shape) == n)) bad.insert(view.base);
  for (const auto& [v, c] : g.cats)
    for (const View& piece : c.pieces) bad.insert(piece.base);
  for (const auto& [v, view] : g.views)
    if (view.contiguous() && rt::numel(view.shape) == n && !bad.count(view.base)) out.insert(view.base);
  for (const Proxy* b : bad) out.erase(b);
  // An input read directly but of another size (broadcast) is not in order either.
  for (const auto& q : g.inputs)
    if (!g.view_only.count(q.get()) && rt::numel(q->type.shape) != n) out.erase(q.get());
  return out;
}

bool group_prim(const Stmt& p) {
  return fusible_prim(p) || row_reduction(p) || column_reduction(p) || layout_prim(p) || is_op(p, "cat");
}

std::vector<OffsetTerm> view_terms(const View& v, const Shape& S, int64_t dim) {
  std::vector<OffsetTerm> terms;
  size_t R = S.size(), r = v.shape.size();
  std::vector<int64_t> ostride = contiguous_strides(S);
  for (size_t e = 0; e < r; ++e) {
    size_t d = e + (R - r);
    bool shifted = static_cast<int64_t>(d) == dim;
    int64_t inner = 1;
    for (size_t j = v.dims[e].size(); j-- > 0;) {
      const SubDim& x = v.dims[e][j];
      if (x.size != 1 && x.stride != 0) {
        OffsetTerm t;
        t.shifted = shifted;
        t.div = shifted ? inner : ostride[d] * inner;
        // The outermost sub-dimension of the outermost dimension needs no modulus.
        t.mod = (d == 0 && j == 0 && !shifted && inner * x.size == S[d]) ? 0 : x.size;
        t.stride = x.stride;
        terms.push_back(t);
      }
      inner *= x.size;
    }
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
  bool moves = false;  // something a kernel must write: arithmetic, or a layout op that copies
  for (const Stmt* p : prims) {
    if (!group_prim(*p)) return no("prims." + (p->op ? p->op->name : std::string("?")) + " cannot be part of a fused kernel");
    if (!is_op(*p, "reshape")) moves = true;
  }
  if (!moves) return no("it only reshapes");
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
  if (rows && cols) {
    // One kernel when the column reductions sum the rows' own shape over every leading
    // dimension, and their accumulators fit a warp's lanes (kRowsColumnsAccumulators).
    // TRACER_FUSE_ROWS_COLUMNS=0 keeps them two groups (for measuring).
    static const bool on = [] {
      const char* e = std::getenv("TRACER_FUSE_ROWS_COLUMNS");
      return !(e && std::string(e) == "0");
    }();
    if (!on) return no("reductions over rows and over columns");
    if (cols_shape != rows_shape || rows_shape.size() < 2 || lead + 1 != rows_shape.size())
      return no("reductions over rows and over columns of other dimensions");
    // (ceil(C / 32) a lane, or, where vectors of up to 8 columns are dealt out, up to 8 more.)
    const int64_t C = rows_shape.back();
    const int64_t per_lane = std::max<int64_t>((C + 31) / 32, (C + 255) / 256 * 8);
    int64_t acc = 0;
    for (const Stmt* p : prims)
      if (column_reduction(*p)) acc += per_lane * (p->args[0].proxy->type.dtype == DType::f64 ? 2 : 1);
    if (acc > kRowsColumnsAccumulators)
      return no("reductions over rows and over columns needing " + std::to_string(acc) + " accumulators a lane (at most " +
                std::to_string(kRowsColumnsAccumulators) + ")");
    g.kind = GroupKind::RowsColumns;
    g.shape = rows_shape;
    g.lead = lead;
  } else if (rows) {
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

  std::unordered_set<const Proxy*> defined, after_columns, after_rows;
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
    *v = base_view(q);
    return true;
  };
  auto aligned = [&](const ProxyPtr& q) { return !g.view_only.count(q.get()) && broadcasts(q->type.shape, S); };
  for (const Stmt* p : prims) {
    const std::string& op = p->op->name;
    const ProxyPtr& out = p->outputs[0];
    bool creation = is_op(*p, "full") || is_op(*p, "iota");
    if ((!layout_prim(*p) || creation) && !broadcasts(out->type.shape, S))
      return no("a value of shape " + rt::shape_str(out->type.shape) + " does not broadcast to " + rt::shape_str(S));
    bool reads_post = false, reads_rows = false;
    for (const Arg& a : p->args)
      for_each_proxy(a, [&](const ProxyPtr& q) {
        reads_post = reads_post || after_columns.count(q.get());
        reads_rows = reads_rows || after_rows.count(q.get());
      });
    // (A column reduction's result is per column whatever it read: the second kernel has it.)
    if ((reads_rows || row_reduction(*p)) && !column_reduction(*p))
      for (const auto& o : p->outputs) after_rows.insert(o.get());
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
          w.dims.assign(shape.size(), {});
          for (size_t d = 0; d < shape.size(); ++d)
            if (shape[d] != 1) w.dims[d] = {{shape[d], 0}};
          for (size_t k = 0; k < bd.size(); ++k) {
            size_t d = static_cast<size_t>(bd[k]);
            if (v.shape[k] == shape[d]) w.dims[d] = v.dims[k];
            else if (v.shape[k] != 1) ok = false;
          }
        } else if (op == "transpose") {
          std::vector<int64_t> perm = normalized_perm(p->args[0], p->args[1]);
          for (size_t k = 0; k < perm.size(); ++k) {
            w.shape[k] = v.shape[static_cast<size_t>(perm[k])];
            w.dims[k] = v.dims[static_cast<size_t>(perm[k])];
          }
        } else if (op == "slice") {
          SliceSpec sp = slice_spec(p->args[0], p->args[1], p->args[2], p->args[3]);
          w.shape = out->type.shape;
          for (size_t k = 0; k < sp.start.size() && ok; ++k) {
            int64_t len = w.shape[k], start = sp.start[k], step = sp.step[k];
            std::vector<SubDim>& ds = w.dims[k];
            if (len == v.shape[k] && start == 0) continue;  // untouched
            if (ds.size() <= 1) {
              int64_t stride = ds.empty() ? 0 : ds[0].stride;
              w.offset += start * stride;
              ds = len == 1 ? std::vector<SubDim>{} : std::vector<SubDim>{{len, stride * step}};
            } else {  // a merged dimension: only whole rows of its outermost sub-dimension
              int64_t inner = 1;
              for (size_t j = 1; j < ds.size(); ++j) inner *= ds[j].size;
              if (step != 1 || start % inner != 0 || len % inner != 0) {
                ok = false;
                break;
              }
              w.offset += (start / inner) * ds[0].stride;
              ds[0].size = len / inner;
              if (ds[0].size == 1) ds.erase(ds.begin());
            }
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
    if (op == "cat") {  // a cat of views of inputs, read piece by piece
      if (g.kind == GroupKind::Rows || g.kind == GroupKind::RowsColumns) return no("a cat in a row group");
      const Shape& os = out->type.shape;
      if (strip_leading_ones(os) != strip_leading_ones(S)) return no("a cat of another shape than the group's");
      CatPlan c;
      int64_t d = normalize_dim(p->args[1].i, static_cast<int64_t>(os.size()), "dim");
      c.dim = static_cast<size_t>(d) + (S.size() - os.size());
      int64_t at = 0;
      for (const Arg& piece : p->args[0].items) {
        if (piece.kind != K::Proxy) return no("a cat of a constant");
        View v;
        if (!view_of(piece.proxy, &v)) return no("a cat of the computed value " + piece.proxy->name);
        if (v.shape.size() != os.size()) return no("a cat piece of another rank");
        int64_t len = v.shape[static_cast<size_t>(d)];
        if (len == 0) continue;
        // Aligned to S: leading dimensions of size 1.
        size_t lead = S.size() - v.shape.size();
        v.shape.insert(v.shape.begin(), lead, 1);
        v.dims.insert(v.dims.begin(), lead, std::vector<SubDim>{});
        c.bounds.push_back(at);
        c.pieces.push_back(v);
        at += len;
      }
      c.bounds.push_back(at);
      if (c.pieces.empty()) return no("an empty cat");
      g.cats[out.get()] = c;
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
    if (g.kind == GroupKind::Columns || g.kind == GroupKind::RowsColumns) {
      // Values computed from a column reduction are computed per column after the pass over
      // the rows: nothing of the whole shape and no other reduction may read them.
      if (reads_post && (is_col || is_row || strip_leading_ones(out->type.shape).size() > col.size() || !broadcasts(out->type.shape, col)))
        return no("a value of the rows' shape computed from a reduction over the columns");
      // (A RowsColumns group's per-column values are computed in its second kernel, where no
      // row's statistics exist.)
      if (reads_post && reads_rows) return no("a value computed from reductions over both the rows and the columns");
      if (is_col || reads_post) after_columns.insert(out.get());
    }
    for (const auto& o : p->outputs) defined.insert(o.get());
  }
  for (const auto& o : outputs) {
    if (g.views.count(o.get()) || g.same_as.count(o.get())) {
      // A view leaving the group is materialized by the kernel (a copy through strides).
      if (g.kind != GroupKind::Elementwise || g.view_only.count(o.get())) return no("an output (" + o->name + ") is a view");
      continue;
    }
    if (!defined.count(o.get())) return no("an output (" + o->name + ") is not computed by the group");
    const Shape& os = o->type.shape;
    if (g.kind == GroupKind::Rows && os != S && os != row) return no("an output neither of the rows' shape nor one per row");
    if (g.kind == GroupKind::Columns) {
      bool per_column = after_columns.count(o.get()) > 0;
      if (per_column ? strip_leading_ones(os) != strip_leading_ones(col) : os != S)
        return no("an output neither of the reduced shape nor of the rows' shape");
    }
    if (g.kind == GroupKind::RowsColumns) {
      bool per_column = after_columns.count(o.get()) > 0;
      if (per_column ? strip_leading_ones(os) != strip_leading_ones(col) : os != S && os != row)
        return no("an output neither of the rows' shape, nor one per row, nor one per column");
    }
  }
  return g;
}

}  // namespace tracer::ir
