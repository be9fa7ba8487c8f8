// Which statements run fused on the CPU (see fusion.h).
#include "ir/fusion.h"

namespace tracer::ir {

void flat_prims(const Stmt& s, std::vector<const Stmt*>& out) {
  if (s.kind == StmtKind::Prim) {
    out.push_back(&s);
    return;
  }
  for (const Stmt& sub : s.subsymbols) flat_prims(sub, out);
}

bool runs_fused(const Stmt& s) {
  if (s.kind != StmtKind::Composite && s.kind != StmtKind::Fusion) return false;
  if (s.outputs.empty()) return false;
  std::vector<const Stmt*> prims;
  flat_prims(s, prims);
  if (prims.size() < 2) return false;
  const Shape& shape = s.outputs[0]->type.shape;
  if (shape.empty() || shape[0] < 2) return false;
  size_t rank = shape.size();
  int64_t rows = shape[0];
  auto fits = [&](const TensorType& t, bool must_split) {
    if (t.shape.size() == rank && t.shape[0] == rows) return true;
    if (must_split) return false;
    return t.shape.size() < rank || t.shape[0] == 1;
  };
  for (const Stmt* p : prims) {
    if (!p->op || p->op->kind != OpKind::Elementwise) return false;
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
  return true;
}

}  // namespace tracer::ir
