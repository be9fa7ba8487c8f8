// Which statements run fused on the CPU (see fusion.h).
#include "ir/fusion.h"

#include "ir/group.h"

#include "ir/op_rules.h"

namespace tracer::ir {

void flat_prims(const Stmt& s, std::vector<const Stmt*>& out) {
  if (s.kind == StmtKind::Prim) {
    out.push_back(&s);
    return;
  }
  for (const Stmt& sub : s.subsymbols) flat_prims(sub, out);
}

void dying_after(const std::vector<Stmt>& stmts, size_t i, std::unordered_set<const Proxy*>& out) {
  out.clear();
  if (stmts[i].kind == StmtKind::Del) return;
  for (size_t j = i + 1; j < stmts.size() && stmts[j].kind == StmtKind::Del; ++j)
    for (const ProxyPtr& p : stmts[j].deleted) out.insert(p.get());
}

bool fusible_prim(const Stmt& p) {
  return p.kind == StmtKind::Prim && p.op && p.op->ns == "prims" &&
         (p.op->kind == OpKind::Elementwise || p.op->name == "uniform_philox");
}

bool row_reduction(const Stmt& s, Shape* in_shape) {
  if (s.kind != StmtKind::Prim || !s.op || s.op->ns != "prims" || s.args.size() < 2 || s.outputs.size() != 1) return false;
  const std::string& op = s.op->name;
  if (op != "sum" && op != "amax" && op != "amin") return false;
  if (s.args[0].kind != Arg::Kind::Proxy) return false;
  const TensorType& in = s.args[0].proxy->type;
  const TensorType& out = s.outputs[0]->type;
  if (in.shape.empty() || in.shape.back() == 0 || !rt::is_float(in.dtype) || !rt::is_float(out.dtype)) return false;
  Shape want = in.shape;
  want.back() = 1;
  if (out.shape != want) return false;
  std::vector<int64_t> dims;
  try {
    dims = reduce_dims(s.args[0], s.args[1]);
  } catch (const std::exception&) {
    return false;
  }
  if (dims.size() != 1 || dims[0] != static_cast<int64_t>(in.shape.size()) - 1) return false;
  if (in_shape) *in_shape = in.shape;
  return true;
}

bool swaps_last_two(const Stmt& s) {
  if (s.kind != StmtKind::Prim || !s.op || s.op->name != "transpose" || s.args.size() < 2) return false;
  if (s.args[0].kind != Arg::Kind::Proxy || !s.args[1].is_seq()) return false;
  const std::vector<Arg>& perm = s.args[1].items;
  size_t n = perm.size();
  if (n < 2 || n != s.args[0].proxy->type.shape.size()) return false;
  for (size_t d = 0; d < n; ++d) {
    if (perm[d].kind != Arg::Kind::Int) return false;
    int64_t want = d == n - 2 ? int64_t(n - 1) : d == n - 1 ? int64_t(n - 2) : int64_t(d);
    if (perm[d].i != want) return false;
  }
  return true;
}

std::unordered_set<const Proxy*> lazy_transposes(const std::vector<Stmt>& stmts, const Arg* output) {
  std::unordered_set<const Proxy*> lazy;
  for (const Stmt& s : stmts)
    if (swaps_last_two(s) && s.outputs.size() == 1) lazy.insert(s.outputs[0].get());
  if (lazy.empty()) return lazy;
  auto reject = [&](const ProxyPtr& p) { lazy.erase(p.get()); };
  for (const Stmt& s : stmts) {
    if (s.kind == StmtKind::Del) continue;
    if (s.kind == StmtKind::Prim && s.op && s.op->name == "matmul") {
      // Only the operands themselves; a matmul that reads one value as both operands copies.
      if (s.args.size() == 2 && s.args[0].kind == Arg::Kind::Proxy && s.args[1].kind == Arg::Kind::Proxy &&
          s.args[0].proxy == s.args[1].proxy)
        reject(s.args[0].proxy);
      continue;
    }
    for (const Arg& a : s.args) for_each_proxy(a, reject);
    for (const auto& kv : s.kwargs) for_each_proxy(kv.second, reject);
    // A value redefined by a later statement is not this transpose's output any more.
    if (!swaps_last_two(s))
      for (const ProxyPtr& p : s.outputs) reject(p);
  }
  if (output) for_each_proxy(*output, reject);
  return lazy;
}

size_t block_dim(const Shape& shape) {
  size_t k = 0;
  while (k < shape.size() && shape[k] == 1) ++k;
  return k;
}

bool block_split(const Shape& s, size_t rank, size_t k, int64_t rows) {
  if (s.size() != rank || k >= rank || s[k] != rows) return false;
  for (size_t d = 0; d < k; ++d)
    if (s[d] != 1) return false;
  return true;
}

namespace {

// Elementwise primitives and reductions over the last dimension whose every value splits into
// blocks of rows or broadcasts along them (the rule before groups held views and creations).
bool splits_by_rows(const Stmt& s, const std::vector<const Stmt*>& prims) {
  const Shape& shape = s.outputs[0]->type.shape;
  const size_t rank = shape.size(), k = block_dim(shape);
  if (k >= rank) return false;
  const int64_t rows = shape[k];
  auto fits = [&](const TensorType& t, bool must_split) {
    if (block_split(t.shape, rank, k, rows)) return true;
    if (must_split) return false;
    return t.shape.size() < rank || t.shape[k] == 1;
  };
  bool reduces = false;
  for (const Stmt* p : prims) {
    bool row = row_reduction(*p);
    reduces = reduces || row;
    if (!fusible_prim(*p) && !row) return false;
    for (const auto& o : p->outputs)
      if (!fits(o->type, false)) return false;
    for (const Arg& a : p->args) {
      bool ok = true;
      for_each_proxy(a, [&](const ProxyPtr& q) { ok = ok && fits(q->type, false); });
      if (!ok) return false;
    }
  }
  for (const auto& o : s.outputs)
    if (!fits(o->type, true)) return false;
  // A row group splits by rows only when the reduced (last) dimension is not the block dimension.
  if (reduces && k + 1 >= rank) return false;
  return true;
}

}  // namespace

bool runs_fused(const Stmt& s) {
  if (s.kind != StmtKind::Composite && s.kind != StmtKind::Fusion) return false;
  if (s.outputs.empty()) return false;
  std::vector<const Stmt*> prims;
  flat_prims(s, prims);
  if (prims.size() < 2) return false;
  const Shape& first = s.outputs[0]->type.shape;
  if (block_dim(first) < first.size() && first[block_dim(first)] >= 2 && splits_by_rows(s, prims)) return true;
  // A group (ir/group.h) with views, creations or reductions over columns: blocks of rows of
  // its iteration shape S at its block dimension k; every value splits by those rows or
  // broadcasts along them.
  GroupPlan g = plan_group(prims, s.outputs);
  if (g.kind == GroupKind::None) return false;
  const Shape& S = g.shape;
  const size_t R = S.size(), k = block_dim(S);
  if (k >= R || S[k] < 2) return false;
  if ((g.kind == GroupKind::Rows || g.kind == GroupKind::RowsColumns) && k + 1 >= R) return false;
  // Columns: the blocks accumulate the reduced leading dimensions, so they must split one of them.
  if ((g.kind == GroupKind::Columns || g.kind == GroupKind::RowsColumns) && k >= g.lead) return false;
  const int64_t rows = S[k];
  for (const auto& [v, c] : g.cats)
    if (c.dim <= k) return false;  // pieces along the rows: not by blocks
  auto fits = [&](const Shape& sh) { return block_split(sh, R, k, rows) || sh.size() < R || sh[k] == 1; };
  for (const Stmt* p : prims) {
    for (const auto& o : p->outputs) {
      auto v = g.views.find(o.get());
      if (v != g.views.end()) {
        if (!g.view_only.count(o.get()) && !fits(v->second.shape)) return false;
      } else if (!fits(o->type.shape)) {
        return false;
      }
    }
    for (const Arg& a : p->args) {
      bool ok = true;
      for_each_proxy(a, [&](const ProxyPtr& q) { ok = ok && (g.view_only.count(q.get()) || g.views.count(q.get()) || fits(q->type.shape)); });
      if (!ok) return false;
    }
  }
  return true;
}

std::vector<Arg> fusion_inputs(const std::vector<Stmt>& body) {
  std::vector<Arg> out;
  std::unordered_set<const Proxy*> defined, seen;
  for (const Stmt& s : body) {
    auto use = [&](const ProxyPtr& p) {
      if (!defined.count(p.get()) && seen.insert(p.get()).second) out.push_back(Arg::of_proxy(p));
    };
    for (const Arg& x : s.args) for_each_proxy(x, use);
    for (const auto& kv : s.kwargs) for_each_proxy(kv.second, use);
    for (const auto& p : s.outputs) defined.insert(p.get());
  }
  return out;
}

}  // namespace tracer::ir
