// The CPU executor: runs a trace statement by statement with the primitives' CPU kernels.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "ir/fusion.h"
#include "ir/group.h"
#include "ir/op_rules.h"
#include "ir/verify.h"
#include "runtime/kernels.h"

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
// in_order: for a fused group, the inputs it reads at the element it writes (ir/group.h); those
// may lend their buffer to an output of their dtype and size (of another shape: a reshape).
const Proxy* find_donor(const Stmt& s, const TensorType& out, const Dying& dying, const Env& env,
                        const std::vector<const Proxy*>& taken, const std::unordered_set<const Proxy*>* in_order = nullptr) {
  const Proxy* found = nullptr;
  for (const Arg& a : s.args)
    for_each_proxy(a, [&](const ProxyPtr& p) {
      if (found || !dying.count(p.get()) || std::find(taken.begin(), taken.end(), p.get()) != taken.end()) return;
      if (in_order && !in_order->count(p.get())) return;
      bool same = in_order ? rt::numel(p->type.shape) == rt::numel(out.shape) : p->type.shape == out.shape;
      if (p->type.dtype != out.dtype || !same) return;
      auto it = env.find(p.get());
      if (it == env.end() || !it->second.sole_owner()) return;
      if (it->second.dtype() != out.dtype || it->second.numel() != rt::numel(out.shape)) return;
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
  // An asynchronous collective's input stays until its wait (as on the GPU, where NCCL reads it
  // until then), so that the CPU's peak is the one the estimate and the GPU have.
  if (async_collective(s) && args[0].kind == K::Tensor) ctx.in_flight[s.outputs[0].get()] = args[0].tensor;
  if (s.op->name == "wait" && s.args[0].kind == K::Proxy) ctx.in_flight.erase(s.args[0].proxy.get());
}

// Rows [r0, r1) at block dimension k of a tensor split by blocks (every dimension before k is
// one, so the block is one contiguous run: a view).
rt::Tensor block_rows(const rt::Tensor& t, size_t k, int64_t r0, int64_t r1) {
  if (k == 0) return t.rows(r0, r1);
  const Shape& sh = t.shape();
  const int64_t rows = sh[k];
  Shape bs = sh;
  bs[k] = r1 - r0;
  return t.view({rows, rows ? t.numel() / rows : 0}).rows(r0, r1).view(bs);
}

// Elements of `base` read through view w (ir/group.h): the block of `shape` whose first element
// is w's element with coordinate r0 at dimension k, 0 elsewhere (r0 = 0: the whole view).
rt::Tensor gather_view(const rt::Tensor& base, const View& w, const Shape& shape, int64_t r0, rt::Allocator* al, size_t k = 0) {
  rt::Tensor out = rt::Tensor::empty(base.dtype(), shape, al);
  size_t es = rt::dtype_size(base.dtype());
  int64_t n = rt::numel(shape);
  const char* src = static_cast<const char*>(base.data());
  char* dst = static_cast<char*>(out.data());
  std::vector<int64_t> c(shape.size(), 0);
  for (int64_t j = 0; j < n; ++j) {
    std::vector<int64_t> at = c;
    if (k < at.size()) at[k] += r0;
    std::memcpy(dst + static_cast<size_t>(j) * es, src + static_cast<size_t>(w.at(at)) * es, es);
    for (size_t d = shape.size(); d-- > 0;) {  // the next coordinate, row-major
      if (++c[d] < shape[d]) break;
      c[d] = 0;
    }
  }
  return out;
}

// Runs a fused group block by block of rows (of its iteration shape, ir/group.h; else of its
// first output): each block's intermediates live in a scratch allocator for the length of the
// block only; the outputs are allocated whole up front. Views of inputs are gathered a block at a
// time; reductions over the leading dimensions accumulate across the blocks in double, in the
// order the unfused reduction adds (so the results are bit for bit the same), and the values
// computed from them run once after the last block.
void run_fused(const Stmt& s, Env& env, ExecContext& ctx, const Dying& dying) {
  std::vector<const Stmt*> prims;
  flat_prims(s, prims);
  GroupPlan g = plan_group(prims, s.outputs);
  const bool planned = g.kind != GroupKind::None;
  const Shape shape = planned ? g.shape : s.outputs[0]->type.shape;
  const size_t rank = shape.size(), k = block_dim(shape);  // (runs_fused: k < rank)
  const int64_t rows = shape[k], row_elems = rows ? rt::numel(shape) / rows : 0;
  auto row_split = [&](const Shape& sh) { return block_split(sh, rank, k, rows); };
  int64_t block = std::max<int64_t>(1, 65536 / std::max<int64_t>(row_elems, 1));
  // Column reductions and what is computed from them run after the blocks.
  std::unordered_set<const Proxy*> post;
  std::unordered_set<const Stmt*> post_prims;
  struct Columns {
    rt::ReduceOp op;
    std::vector<double> acc;
  };
  std::unordered_map<const Stmt*, Columns> cols;
  if (g.kind == GroupKind::Columns || g.kind == GroupKind::RowsColumns) {
    int64_t per = rt::numel(Shape(shape.begin() + static_cast<std::ptrdiff_t>(g.lead), shape.end()));
    for (const Stmt* p : prims) {
      bool reads_post = false;
      for (const Arg& a : p->args) for_each_proxy(a, [&](const ProxyPtr& q) { reads_post = reads_post || post.count(q.get()); });
      if (column_reduction(*p)) {
        const std::string& op = p->op->name;
        rt::ReduceOp r = op == "sum" ? rt::ReduceOp::sum : op == "amax" ? rt::ReduceOp::amax : rt::ReduceOp::amin;
        double init = r == rt::ReduceOp::sum ? 0.0 : r == rt::ReduceOp::amax ? -INFINITY : INFINITY;
        cols[p] = Columns{r, std::vector<double>(static_cast<size_t>(per), init)};
        post.insert(p->outputs[0].get());
        post_prims.insert(p);
      } else if (reads_post) {
        for (const auto& o : p->outputs) post.insert(o.get());
        post_prims.insert(p);
      }
    }
  }
  // Only inputs read at the element written lend a buffer (a transposed one is read elsewhere).
  std::vector<const Proxy*> donors;
  std::unordered_set<const Proxy*> in_order;
  if (planned) in_order = in_order_inputs(g);
  std::vector<rt::Tensor> outs(s.outputs.size());
  for (size_t i = 0; i < s.outputs.size(); ++i) {
    const auto& o = s.outputs[i];
    if (post.count(o.get())) continue;  // computed after the blocks
    const Proxy* d = dying.empty() ? nullptr : find_donor(s, o->type, dying, env, donors, planned ? &in_order : nullptr);
    if (d) {
      // Block r of the donor is read before block r of the output is written (row views).
      donors.push_back(d);
      outs[i] = env.at(d).view(o->type.shape);
    } else {
      outs[i] = rt::Tensor::empty(o->type.dtype, o->type.shape, ctx.allocator);
    }
  }
  rt::Allocator scratch;
  ExecContext local_ctx = ctx;
  local_ctx.allocator = &scratch;
  local_ctx.reuse = nullptr;
  auto block_shape = [&](Shape sh, int64_t b) {
    if (row_split(sh)) sh[k] = b;
    return sh;
  };
  auto run_prim_on = [&](const Stmt* p, const std::function<rt::Tensor(const ProxyPtr&)>& value, ExecContext& c) {
    std::vector<Arg> args;
    for (const Arg& a : p->args) {
      if (a.kind == Arg::Kind::Proxy) args.push_back(Arg::of_tensor(value(a.proxy)));
      else if (a.is_seq()) {
        Arg x = a;
        for (Arg& y : x.items)
          if (y.kind == Arg::Kind::Proxy) y = Arg::of_tensor(value(y.proxy));
        args.push_back(x);
      } else {
        args.push_back(a);
      }
    }
    return p->op->cpu(args, c);
  };
  for (int64_t r0 = 0; r0 < rows; r0 += block) {
    int64_t r1 = std::min(rows, r0 + block), b = r1 - r0;
    Env local;
    auto value = [&](const ProxyPtr& p) -> rt::Tensor {
      auto it = local.find(p.get());
      if (it != local.end()) return it->second;
      auto v = g.views.find(p.get());
      if (v != g.views.end()) {
        const View& w = v->second;
        bool split = row_split(w.shape);
        Shape bs = split ? block_shape(w.shape, b) : w.shape;
        rt::Tensor t = gather_view(env.at(w.base), w, bs, split ? r0 : 0, local_ctx.allocator, k);
        local.emplace(p.get(), t);
        return t;
      }
      auto outer = env.find(p.get());
      if (outer == env.end()) throw std::runtime_error("'" + p->name + "' has no value (deleted or never defined)");
      rt::Tensor t = row_split(p->type.shape) ? block_rows(outer->second, k, r0, r1) : outer->second;
      local.emplace(p.get(), t);
      return t;
    };
    for (const Stmt* p : prims) {
      const ProxyPtr& out = p->outputs[0];
      if (auto c = cols.find(p); c != cols.end()) {  // accumulate this block's rows, in order
        rt::Tensor x = value(p->args[0].proxy);
        std::vector<double>& acc = c->second.acc;
        size_t per = acc.size();
        int64_t n = x.numel();
        for (int64_t j = 0; j < n; ++j) {
          double v = x.get(j), &a = acc[static_cast<size_t>(j) % per];
          switch (c->second.op) {
            case rt::ReduceOp::sum: a = a + v; break;
            case rt::ReduceOp::amax: a = (std::isnan(a) || a >= v) ? a : v; break;
            default: a = (std::isnan(a) || a <= v) ? a : v; break;
          }
        }
        continue;
      }
      if (post_prims.count(p) || g.views.count(out.get())) continue;
      if (auto c = g.cats.find(out.get()); c != g.cats.end()) {  // the pieces' blocks, gathered and joined
        std::vector<rt::Tensor> parts;
        for (const View& w : c->second.pieces) {
          bool split = row_split(w.shape);
          Shape bs = split ? block_shape(w.shape, b) : w.shape;
          parts.push_back(gather_view(env.at(w.base), w, bs, split ? r0 : 0, local_ctx.allocator, k));
        }
        rt::Tensor joined = rt::cat(parts, static_cast<int64_t>(c->second.dim), local_ctx.allocator);
        local[out.get()] = joined.view(block_shape(out->type.shape, b));
        continue;
      }
      if (auto same = g.same_as.find(out.get()); same != g.same_as.end()) {
        rt::Tensor a = value(same->second);
        Shape bs = block_shape(out->type.shape, b);
        if (p->op->name == "broadcast_in_dim")  // the same values, broadcast to the block
          local[out.get()] = rt::broadcast_in_dim(a, bs, int_list(p->args[2], "broadcast_dimensions"), local_ctx.allocator);
        else
          local[out.get()] = a.view(bs);
        continue;
      }
      if (p->op->name == "full") {
        local[out.get()] = rt::full(block_shape(out->type.shape, b), to_scalar(p->args[1]), out->type.dtype, local_ctx.allocator);
        continue;
      }
      if (p->op->name == "iota") {
        int64_t n = p->args[0].i, start = p->args[1].kind == Arg::Kind::Int ? p->args[1].i : 0;
        int64_t step = p->args[2].kind == Arg::Kind::Int ? p->args[2].i : 1;
        bool split = row_split(out->type.shape);
        local[out.get()] = rt::iota(split ? b : n, split ? static_cast<int64_t>(static_cast<uint64_t>(start) + static_cast<uint64_t>(r0) * static_cast<uint64_t>(step)) : start,
                                    step, out->type.dtype, local_ctx.allocator);
        continue;
      }
      if (p->op->name == "uniform_philox") {  // this block's elements of the draw
        const TensorType& t = out->type;
        rt::Shape bs = t.shape;
        bool split = row_split(t.shape);  // else it broadcasts along the rows: drawn whole
        if (split) bs[k] = b;
        uint64_t start = split ? static_cast<uint64_t>(r0 * (rt::numel(t.shape) / rows)) : 0;
        auto word = [&](const Arg& a) -> uint64_t {
          if (a.kind == Arg::Kind::Proxy) return static_cast<uint64_t>(static_cast<int64_t>(value(a.proxy).get(0)));
          return static_cast<uint64_t>(a.i);
        };
        local[out.get()] = rt::uniform_philox(bs, p->args[1].number(), p->args[2].number(), t.dtype, word(p->args[5]),
                                              word(p->args[6]), local_ctx.allocator, start);
        continue;
      }
      std::vector<rt::Tensor> res = run_prim_on(p, value, local_ctx);
      for (size_t i = 0; i < res.size(); ++i) local[p->outputs[i].get()] = std::move(res[i]);
    }
    for (size_t i = 0; i < s.outputs.size(); ++i) {
      if (post.count(s.outputs[i].get())) continue;
      const rt::Tensor part = value(s.outputs[i]);  // a view the group hands on is gathered here
      rt::Tensor dst = block_rows(outs[i], k, r0, r1);
      if (part.nbytes()) std::memcpy(dst.data(), part.data(), part.nbytes());
    }
  }
  if (!post.empty()) {  // the reduced values, then what is computed from them, whole
    // Values the blocks computed that those read (of the reduced shape, from the group's inputs
    // alone: `a + b` in `(a + b) + sum(x)`) are computed again here, whole.
    std::unordered_set<const Stmt*> again;
    {
      std::unordered_set<const Proxy*> need;
      for (auto it = prims.rbegin(); it != prims.rend(); ++it) {
        const Stmt* p = *it;
        bool wanted = post_prims.count(p) > 0;
        if (!wanted)
          for (const auto& o : p->outputs) wanted = wanted || need.count(o.get()) > 0;
        if (!wanted || cols.count(p)) continue;
        if (!post_prims.count(p)) again.insert(p);
        for (const Arg& a : p->args) for_each_proxy(a, [&](const ProxyPtr& q) { need.insert(q.get()); });
      }
    }
    Env done;
    auto value = [&](const ProxyPtr& p) -> rt::Tensor {
      auto it = done.find(p.get());
      if (it != done.end()) return it->second;
      auto outer = env.find(p.get());
      if (outer == env.end()) throw std::runtime_error("'" + p->name + "' has no value (deleted or never defined)");
      return outer->second;
    };
    for (const Stmt* p : prims) {
      if (!post_prims.count(p) && !again.count(p)) continue;
      const ProxyPtr& out = p->outputs[0];
      if (auto v = g.views.find(out.get()); v != g.views.end()) {
        done[out.get()] = gather_view(env.at(v->second.base), v->second, v->second.shape, 0, local_ctx.allocator);
        continue;
      }
      if (auto c = cols.find(p); c != cols.end()) {
        rt::Tensor t = rt::Tensor::empty(out->type.dtype, out->type.shape, local_ctx.allocator);
        for (size_t j = 0; j < c->second.acc.size(); ++j) t.set(static_cast<int64_t>(j), c->second.acc[j]);
        done[out.get()] = t;
        continue;
      }
      if (auto same = g.same_as.find(out.get()); same != g.same_as.end()) {
        rt::Tensor a = value(same->second);
        done[out.get()] = p->op->name == "broadcast_in_dim"
                              ? rt::broadcast_in_dim(a, out->type.shape, int_list(p->args[2], "broadcast_dimensions"), local_ctx.allocator)
                              : a.view(out->type.shape);
        continue;
      }
      std::vector<rt::Tensor> res = run_prim_on(p, value, local_ctx);
      for (size_t i = 0; i < res.size(); ++i) done[p->outputs[i].get()] = std::move(res[i]);
    }
    for (size_t i = 0; i < s.outputs.size(); ++i)
      if (post.count(s.outputs[i].get())) outs[i] = rt::cast(done.at(s.outputs[i].get()), s.outputs[i]->type.dtype, ctx.allocator);
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
    throw exec_error(s, e.what());
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

ExecError exec_error(const Stmt& s, const std::string& what) {
  const std::string prefix = s.op ? s.op->name + ": " : "";
  return ExecError{(what.rfind(prefix, 0) == 0 ? "" : prefix) + what, s.loc, print_stmt_line(s), s.inlined_at};
}

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
  ctx.in_flight.clear();
  ctx.pending.clear();
  try {
    run_stmts(t.stmts, env, ctx, lazy_transposes(t.stmts, &t.output));
    ctx.finish_pending();  // a collective never waited on is done by the trace's end
  } catch (...) {
    ctx.in_flight.clear();
    ctx.pending.clear();  // the communicator's thread keeps what those still read
    throw;
  }
  ctx.in_flight.clear();
  try {
    return substitute(t.output, env);
  } catch (const std::exception& e) {
    throw ExecError{e.what(), {}, "return"};
  }
}

static void output_tensors(const Arg& proxies, const Arg& values, std::unordered_map<const Proxy*, const rt::Tensor*>* out) {
  if (proxies.kind == Arg::Kind::Proxy && values.kind == Arg::Kind::Tensor) {
    out->emplace(proxies.proxy.get(), &values.tensor);
    return;
  }
  for (size_t i = 0; i < proxies.items.size() && i < values.items.size(); ++i) output_tensors(proxies.items[i], values.items[i], out);
}

Arg execute_backward(const Trace& fw, const Trace& bw, Arg& fw_out, ExecContext& ctx) {
  if (!fw_out.is_seq() || fw_out.items.size() != 2 || !fw_out.items[1].is_seq() || !fw.output.is_seq() ||
      fw.output.items.size() != 2)
    throw ExecError{"the forward trace must return (output, saved) for its backward", {}, ""};
  std::unordered_map<const Proxy*, size_t> saved;
  const auto& saved_proxies = fw.output.items[1].items;
  for (size_t i = 0; i < saved_proxies.size(); ++i)
    if (saved_proxies[i].kind == Arg::Kind::Proxy) saved.emplace(saved_proxies[i].proxy.get(), i);
  std::unordered_map<const Proxy*, const rt::Tensor*> outputs;
  output_tensors(fw.output.items[0], fw_out.items[0], &outputs);
  std::unordered_set<const Proxy*> forward_values;
  for (const auto& p : fw.inputs) forward_values.insert(p.get());
  for (const auto& s : fw.stmts)
    for (const auto& p : s.outputs) forward_values.insert(p.get());
  std::vector<rt::Tensor> in;
  for (const auto& p : bw.inputs) {
    auto it = saved.find(p.get());
    auto out = outputs.find(p.get());
    if (it != saved.end()) {
      in.push_back(std::move(fw_out.items[1].items[it->second].tensor));
    } else if (out != outputs.end()) {
      in.push_back(*out->second);
    } else if (forward_values.count(p.get())) {
      throw ExecError{"the backward reads '" + p->name + "', which the forward computes but does not save", {}, ""};
    } else {
      in.push_back(rt::full(p->type.shape, rt::Scalar{1.0, 1, false}, p->type.dtype, ctx.allocator));
    }
  }
  fw_out.items[1].items.clear();
  return execute(bw, std::move(in), ctx);
}

}  // namespace tracer::ir
