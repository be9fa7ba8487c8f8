// Random inputs for parameters that were not given a file.
#include "api/inputs.h"

#include <functional>

#include "ir/op.h"
#include "runtime/kernels.h"

namespace tracer::api {

rt::Tensor random_input(rt::DType dt, const rt::Shape& shape, uint64_t seed, uint64_t index, rt::Allocator* al, int64_t bound,
                        uint64_t start) {
  uint64_t offset = (uint64_t{1} << 32) + index;
  if (rt::is_float(dt)) return rt::uniform_philox(shape, -1.0, 1.0, dt, seed, offset, al, start);
  if (rt::is_bool(dt)) {
    rt::Tensor u = rt::uniform_philox(shape, 0.0, 1.0, rt::DType::f32, seed, offset, al, start);
    rt::Scalar half;
    half.value = 0.5;
    return rt::binary(rt::BinaryOp::lt, u, half, rt::DType::f32, rt::DType::b8, al);
  }
  // Integers uniform in [0, bound): floor of a uniform draw in [0, bound), in double so that
  // large bounds (a 50304-word vocabulary) stay exact.
  if (bound < 1) bound = 1;
  rt::Tensor u = rt::uniform_philox(shape, 0.0, static_cast<double>(bound), rt::DType::f64, seed, offset, al, start);
  rt::Tensor r = rt::cast(u, dt, al);
  // The cast truncates toward zero (all values are >= 0); a draw that rounds up to bound itself
  // (u just below it, in the dtype) is clamped.
  for (int64_t k = 0; k < r.numel(); ++k)
    if (r.get(k) >= static_cast<double>(bound)) r.set(k, static_cast<double>(bound - 1));
  return r;
}

std::unordered_map<const ir::Proxy*, int64_t> index_bounds(const ir::Trace& t) {
  std::unordered_map<const ir::Proxy*, const ir::Proxy*> root;  // a reshape of an input -> the input
  for (const auto& p : t.inputs) root[p.get()] = p.get();
  std::unordered_map<const ir::Proxy*, int64_t> bounds;
  auto bound = [&](const ir::Arg& a, int64_t n) {
    if (a.kind != ir::Arg::Kind::Proxy || n <= 0) return;
    auto r = root.find(a.proxy.get());
    if (r == root.end()) return;
    auto [it, fresh] = bounds.emplace(r->second, n);
    if (!fresh) it->second = std::min(it->second, n);
  };
  auto shape_of = [](const ir::Arg& a) -> const ir::Shape* {
    return a.kind == ir::Arg::Kind::Proxy ? &a.proxy->type.shape : nullptr;
  };
  std::function<void(const std::vector<ir::Stmt>&)> walk = [&](const std::vector<ir::Stmt>& stmts) {
    for (const ir::Stmt& s : stmts) {
      std::string name = s.kind == ir::StmtKind::Prim && s.op ? s.op->name : s.callee;
      size_t dot = name.rfind('.');
      std::string op = dot == std::string::npos ? name : name.substr(dot + 1);
      if ((op == "reshape" || op == "view" || op == "flatten" || op == "squeeze" || op == "unsqueeze") && !s.args.empty() &&
          s.args[0].kind == ir::Arg::Kind::Proxy && s.outputs.size() == 1) {
        auto r = root.find(s.args[0].proxy.get());
        if (r != root.end()) root[s.outputs[0].get()] = r->second;
      } else if (op == "where" && s.kind == ir::StmtKind::Prim && s.args.size() == 3 && s.outputs.size() == 1) {
        // where(c, target, 0): the targets where they count (cross_entropy's check once grad has
        // taken the composite apart): the values pass through, the other branch a number.
        const ir::Arg &a = s.args[1], &b = s.args[2];
        const ir::Arg* x = a.kind == ir::Arg::Kind::Proxy && b.is_number() ? &a : b.kind == ir::Arg::Kind::Proxy && a.is_number() ? &b : nullptr;
        if (x)
          if (auto r = root.find(x->proxy.get()); r != root.end()) root[s.outputs[0].get()] = r->second;
      } else if ((op == "cross_entropy" || op == "nll_loss") && s.args.size() >= 2) {
        if (const ir::Shape* x = shape_of(s.args[0])) bound(s.args[1], x->size() >= 2 ? (*x)[1] : x->empty() ? 0 : (*x)[0]);
      } else if (op == "embedding" && s.args.size() >= 2) {
        if (const ir::Shape* w = shape_of(s.args[1]); w && !w->empty()) bound(s.args[0], (*w)[0]);
      } else if ((op == "take" || op == "take_along_axis" || op == "take_along_dim" || op == "gather" || op == "scatter_add" ||
                  op == "index_add") && s.args.size() >= 2) {
        // Where the index and the dimension are: Thunder's prims put the index second and the
        // dimension last (take, gather, take_along_axis: third; scatter_add, index_add: fourth);
        // torch's gather, scatter_add and index_add take (a, dim, index, ...).
        const bool prim_form = name.rfind("prims.", 0) == 0 || s.kind == ir::StmtKind::Prim;
        size_t index_at = 1, dim_at = 2;
        if (op == "scatter_add" || op == "index_add") dim_at = 3;
        if (!prim_form && (op == "gather" || op == "scatter_add" || op == "index_add")) index_at = 2, dim_at = 1;
        const ir::Shape* a = shape_of(s.args[0]);
        int64_t dim = s.args.size() > dim_at && s.args[dim_at].kind == ir::Arg::Kind::Int ? s.args[dim_at].i : 0;
        if (a && !a->empty() && s.args.size() > index_at) {
          if (dim < 0) dim += static_cast<int64_t>(a->size());
          if (dim >= 0 && dim < static_cast<int64_t>(a->size())) bound(s.args[index_at], (*a)[static_cast<size_t>(dim)]);
        }
      }
      walk(s.subsymbols);
    }
  };
  walk(t.stmts);
  return bounds;
}

}  // namespace tracer::api
