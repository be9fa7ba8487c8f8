// The CPU executor: runs a trace statement by statement with the primitives' CPU kernels.
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "ir/fusion.h"
#include "ir/verify.h"

namespace tracer::ir {
namespace {

using Env = std::unordered_map<const Proxy*, rt::Tensor>;
using K = Arg::Kind;
using Dying = std::unordered_set<const Proxy*>;
using Lazy = std::unordered_set<const Proxy*>;  // unmaterialized transposes (lazy_transposes)
const Lazy kNoLazy;

Arg substitute(const Arg& a, const Env& env) {
  if (a.kind == K::Proxy) {
    auto it = env.find(a.proxy.get());
    if (it == env.end()) throw std::runtime_error("'" + a.proxy->name + "' has no value (deleted or never defined)");
    return Arg::of_tensor(it->second);
  }
  if (a.items.empty()) return a;
  Arg out = a;
  for (Arg& x : out.items) x = substitute(x, env);
  return out;
}

void run_stmts(const std::vector<Stmt>& stmts, Env& env, ExecContext& ctx, const Lazy& lazy);

// Buffer reuse (docs/memory.md): an elementwise statement writes its output over an argument
// whose last use it is (a `del` follows), when that argument's buffer has no other owner and
// the output's dtype and shape. Returns the donor's proxy, or null. estimate_memory() makes the
// same choice (donor_arg in ir/memory.cpp decides by the same rule on the static types).
const Proxy* find_donor(const Stmt& s, const TensorType& out, const Dying& dying, const Env& env,
                        const std::vector<const Proxy*>& taken) {
  const Proxy* found = nullptr;
  for (const Arg& a : s.args)
    for_each_proxy(a, [&](const ProxyPtr& p) {
      if (found || !dying.count(p.get()) || std::find(taken.begin(), taken.end(), p.get()) != taken.end()) return;
      if (p->type.dtype != out.dtype || p->type.shape != out.shape) return;
      auto it = env.find(p.get());
      if (it == env.end() || !it->second.sole_owner()) return;
      if (it->second.dtype() != out.dtype || it->second.shape() != out.shape) return;
      found = p.get();
    });
  return found;
}

void run_prim(const Stmt& s, Env& env, ExecContext& ctx, const Dying& dying, const Lazy& lazy) {
  if (!lazy.empty() && s.outputs.size() == 1 && lazy.count(s.outputs[0].get())) {
    env[s.outputs[0].get()] = env.at(s.args[0].proxy.get());  // read transposed by the matmul
    return;
  }
  bool transposed[2] = {false, false};
  if (!lazy.empty() && s.op->name == "matmul")
    for (size_t i = 0; i < 2 && i < s.args.size(); ++i)
      transposed[i] = s.args[i].kind == K::Proxy && lazy.count(s.args[i].proxy.get());
  const Proxy* donor = nullptr;
  if (s.op->kind == OpKind::Elementwise && s.outputs.size() == 1 && !dying.empty())
    donor = find_donor(s, s.outputs[0]->type, dying, env, {});
  std::vector<Arg> args;
  args.reserve(s.args.size());
  for (const Arg& a : s.args) args.push_back(substitute(a, env));
  rt::Tensor reuse;
  if (donor) {
    reuse = std::move(env.at(donor));
    env.erase(donor);
    ctx.reuse = &reuse;
  }
  ctx.matmul_transposed[0] = transposed[0];
  ctx.matmul_transposed[1] = transposed[1];
  std::vector<rt::Tensor> outs;
  try {
    outs = s.op->cpu(args, ctx);
  } catch (...) {
    ctx.reuse = nullptr;
    ctx.matmul_transposed[0] = ctx.matmul_transposed[1] = false;
    throw;
  }
  ctx.reuse = nullptr;
  ctx.matmul_transposed[0] = ctx.matmul_transposed[1] = false;
  if (outs.size() != s.outputs.size()) throw std::runtime_error("kernel returned the wrong number of outputs");
  for (size_t i = 0; i < outs.size(); ++i) env[s.outputs[i].get()] = std::move(outs[i]);
}

bool row_split(const TensorType& t, size_t rank, int64_t rows) { return t.shape.size() == rank && t.shape[0] == rows; }

// Runs an elementwise group block by block: each block's intermediates live in a scratch
// allocator for the length of the block only; the outputs are allocated whole up front.
void run_fused(const Stmt& s, Env& env, ExecContext& ctx, const Dying& dying) {
  std::vector<const Stmt*> prims;
  flat_prims(s, prims);
  const Shape& shape = s.outputs[0]->type.shape;
  size_t rank = shape.size();
  int64_t rows = shape[0], row_elems = rows ? rt::numel(shape) / rows : 0;
  int64_t block = std::max<int64_t>(1, 65536 / std::max<int64_t>(row_elems, 1));
  std::vector<rt::Tensor> outs;
  std::vector<const Proxy*> donors;
  for (const auto& o : s.outputs) {
    const Proxy* d = dying.empty() ? nullptr : find_donor(s, o->type, dying, env, donors);
    if (d) {
      // Block r of the donor is read before block r of the output is written (row views).
      donors.push_back(d);
      outs.push_back(env.at(d));
    } else {
      outs.push_back(rt::Tensor::empty(o->type.dtype, o->type.shape, ctx.allocator));
    }
  }
  rt::Allocator scratch;
  ExecContext local_ctx = ctx;
  local_ctx.allocator = &scratch;
  local_ctx.reuse = nullptr;
  for (int64_t r0 = 0; r0 < rows; r0 += block) {
    int64_t r1 = std::min(rows, r0 + block);
    Env local;
    auto value = [&](const ProxyPtr& p) -> rt::Tensor {
      auto it = local.find(p.get());
      if (it != local.end()) return it->second;
      auto outer = env.find(p.get());
      if (outer == env.end()) throw std::runtime_error("'" + p->name + "' has no value (deleted or never defined)");
      rt::Tensor t = row_split(p->type, rank, rows) ? outer->second.rows(r0, r1) : outer->second;
      local.emplace(p.get(), t);
      return t;
    };
    for (const Stmt* p : prims) {
      if (p->op->name == "uniform_philox") {  // this block's elements of the draw
        const TensorType& t = p->outputs[0]->type;
        rt::Shape bs = t.shape;
        bool split = row_split(t, rank, rows);  // else it broadcasts along the rows: drawn whole
        if (split) bs[0] = r1 - r0;
        uint64_t start = split ? static_cast<uint64_t>(r0 * (rt::numel(t.shape) / rows)) : 0;
        auto word = [&](const Arg& a) -> uint64_t {
          if (a.kind == Arg::Kind::Proxy) return static_cast<uint64_t>(static_cast<int64_t>(value(a.proxy).get(0)));
          return static_cast<uint64_t>(a.i);
        };
        local[p->outputs[0].get()] = rt::uniform_philox(bs, p->args[1].number(), p->args[2].number(), t.dtype, word(p->args[5]),
                                                        word(p->args[6]), local_ctx.allocator, start);
        continue;
      }
      std::vector<Arg> args;
      for (const Arg& a : p->args) {
        if (a.kind == Arg::Kind::Proxy) args.push_back(Arg::of_tensor(value(a.proxy)));
        else args.push_back(a);
      }
      std::vector<rt::Tensor> res = p->op->cpu(args, local_ctx);
      for (size_t i = 0; i < res.size(); ++i) local[p->outputs[i].get()] = std::move(res[i]);
    }
    for (size_t i = 0; i < s.outputs.size(); ++i) {
      const rt::Tensor& part = local.at(s.outputs[i].get());
      rt::Tensor dst = outs[i].rows(r0, r1);
      if (part.nbytes()) std::memcpy(dst.data(), part.data(), part.nbytes());
    }
  }
  for (const Proxy* d : donors) env.erase(d);
  for (size_t i = 0; i < s.outputs.size(); ++i) env[s.outputs[i].get()] = std::move(outs[i]);
}

void run_stmt(const Stmt& s, Env& env, ExecContext& ctx, const Dying& dying, const Lazy& lazy) {
  try {
    if (runs_fused(s)) {
      run_fused(s, env, ctx, dying);
      return;
    }
    switch (s.kind) {
      case StmtKind::Del:
        for (const ProxyPtr& p : s.deleted) env.erase(p.get());
        return;
      case StmtKind::Prim:
        run_prim(s, env, ctx, dying, lazy);
        return;
      case StmtKind::Composite:
      case StmtKind::Fusion: {
        run_stmts(s.subsymbols, env, ctx, kNoLazy);
        // Free the decomposition's intermediates, as a fused kernel would never hold them.
        for (const Stmt& sub : s.subsymbols)
          for (const ProxyPtr& p : sub.outputs) {
            bool is_out = false;
            for (const ProxyPtr& o : s.outputs) is_out = is_out || o == p;
            if (!is_out) env.erase(p.get());
          }
        return;
      }
    }
  } catch (const ExecError&) {
    throw;
  } catch (const std::exception& e) {
    throw ExecError{std::string(s.op ? s.op->name + ": " : "") + e.what(), s.loc, print_stmt_line(s)};
  }
}

void run_stmts(const std::vector<Stmt>& stmts, Env& env, ExecContext& ctx, const Lazy& lazy) {
  Dying dying;
  for (size_t i = 0; i < stmts.size(); ++i) {
    dying_after(stmts, i, dying);
    run_stmt(stmts[i], env, ctx, dying, lazy);
  }
}

}  // namespace

Arg execute(const Trace& t, std::vector<rt::Tensor> inputs, ExecContext& ctx) {
  if (inputs.size() != t.inputs.size())
    throw ExecError{"the trace takes " + std::to_string(t.inputs.size()) + " inputs but " +
                        std::to_string(inputs.size()) + " were given",
                    {}, ""};
  Env env;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorType& want = t.inputs[i]->type;
    if (inputs[i].dtype() != want.dtype || inputs[i].shape() != want.shape)
      throw ExecError{"input '" + t.inputs[i]->name + "' should be " + rt::dtype_name(want.dtype) +
                          rt::shape_str(want.shape) + " but is " + rt::dtype_name(inputs[i].dtype()) +
                          rt::shape_str(inputs[i].shape()),
                      {}, ""};
    env[t.inputs[i].get()] = std::move(inputs[i]);
  }
  inputs.clear();
  run_stmts(t.stmts, env, ctx, lazy_transposes(t.stmts, &t.output));
  try {
    return substitute(t.output, env);
  } catch (const std::exception& e) {
    throw ExecError{e.what(), {}, "return"};
  }
}

}  // namespace tracer::ir
