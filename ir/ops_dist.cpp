// Collectives as primitives (docs/distributed.md, "Collectives in traces"): all_gather,
// reduce_scatter, all_reduce, broadcast and wait, with the parameters of Thunder's
// thunder.distributed.prims (and its torch executor's torch_*_prim_impl names as aliases). A group
// is the tuple (name, size): ('world', N) for the job's N ranks. An asynchronous collective
// (do_async) gives a FUTURE, which only wait reads. On the CPU an asynchronous collective is
// submitted to the job's communicator (ExecContext::communicator), whose thread runs it while the
// trace goes on, and its wait blocks until it is done; a group of one rank needs none.
#include <algorithm>
#include <numeric>

#include "ir/op.h"
#include "ir/op_rules.h"
#include "runtime/comm.h"

namespace tracer::ir {
namespace {

using K = Arg::Kind;

struct Group {
  std::string name;
  int64_t size = 1;
  std::vector<int64_t> ranks;  // a subgroup's members, in its rank order; empty: the world
};

Group group_arg(const Arg& a) {
  const char* what = "group must be a process group: the tuple that dist.group() gives, ('world', N) for the job's N ranks or ('ranks', N, (r0, ...)) for N of them";
  if (a.kind != K::Tuple || a.items.size() < 2 || a.items[0].kind != K::Str || a.items[1].kind != K::Int || a.items[1].i < 1) throw OpError(what);
  Group g{a.items[0].s, a.items[1].i, {}};
  if (g.name == "world") {
    if (a.items.size() != 2) throw OpError(what);
    return g;
  }
  if (g.name != "ranks")
    throw OpError("group '" + g.name + "' is not known: groups are 'world' (every rank of the job) and 'ranks' (dist.group((r0, r1, ...)))");
  if (a.items.size() != 3 || a.items[2].kind != K::Tuple || static_cast<int64_t>(a.items[2].items.size()) != g.size) throw OpError(what);
  for (const Arg& r : a.items[2].items) {
    if (r.kind != K::Int || r.i < 0) throw OpError("a group's ranks must be non-negative ints");
    if (std::find(g.ranks.begin(), g.ranks.end(), r.i) != g.ranks.end())
      throw OpError("rank " + std::to_string(r.i) + " is twice in the group");
    g.ranks.push_back(r.i);
  }
  return g;
}

// A collective's result over a subgroup is the same on the group's ranks only: across the
// job's ranks it differs.
Dist across_job(const Group& g, Dist within) { return g.ranks.empty() ? within : Dist::per_rank; }

rt::dist::ReduceOp reduce_arg(const Arg& a) {
  if (a.kind == K::Str) {
    if (a.s == "sum") return rt::dist::ReduceOp::sum;
    if (a.s == "avg") return rt::dist::ReduceOp::avg;
    if (a.s == "max") return rt::dist::ReduceOp::max;
    if (a.s == "min") return rt::dist::ReduceOp::min;
  }
  throw OpError("op must be 'sum', 'avg', 'max' or 'min'");
}

int64_t dim_arg(const Arg& d, size_t rank) {
  if (rank == 0) throw OpError("a collective needs a tensor of at least one dimension");
  int64_t r = static_cast<int64_t>(rank);
  int64_t v = d.kind == K::None ? 0 : int_arg(d, "dim");
  if (v < -r || v >= r) throw OpError("dim " + std::to_string(v) + " is out of range for a tensor of " + std::to_string(r) + " dimensions");
  return v < 0 ? v + r : v;
}

TensorType input_type(const Arg& a) {
  TensorType t = tensor_type(a, "a");
  if (t.future) throw OpError("a is a FUTURE: prims.wait gives its tensor");
  return t;
}

// t's dimension d divided among the group's ranks (this rank's slice), or an error saying it
// does not divide.
void split_dim(TensorType& t, int64_t d, const Group& g, const char* hint) {
  int64_t& n = t.shape[static_cast<size_t>(d)];
  if (n % g.size != 0)
    throw OpError("dimension " + std::to_string(d) + " of a (" + std::to_string(n) + ") does not divide among the group's " +
                  std::to_string(g.size) + " ranks" + hint);
  n /= g.size;
}

std::vector<TensorType> meta_all_gather(const std::vector<Arg>& a) {
  TensorType t = input_type(a[0]);
  Group g = group_arg(a[1]);
  int64_t d = dim_arg(a[3], t.shape.size());
  t.shape[static_cast<size_t>(d)] *= g.size;
  t.future = bool_arg(a[2], "do_async");
  t.dist = across_job(g, Dist::replicated);  // every rank's pieces, in rank order: the same on every rank
  return {t};
}

std::vector<TensorType> meta_reduce_scatter(const std::vector<Arg>& a) {
  TensorType t = input_type(a[0]);
  reduce_arg(a[1]);
  Group g = group_arg(a[2]);
  int64_t d = dim_arg(a[4], t.shape.size());
  split_dim(t, d, g, "");
  t.future = bool_arg(a[3], "do_async");
  t.dist = across_job(g, Dist::sharded);  // this rank's slice of the reduction
  if (g.ranks.empty()) t.shard_dim = static_cast<int>(d);
  return {t};
}

std::vector<TensorType> meta_all_reduce(const std::vector<Arg>& a) {
  TensorType t = input_type(a[0]);
  rt::dist::ReduceOp op = reduce_arg(a[1]);
  Group g = group_arg(a[2]);
  if (op == rt::dist::ReduceOp::avg && !rt::is_float(t.dtype)) throw OpError("op 'avg' needs a floating-point tensor");
  t.future = bool_arg(a[3], "do_async");
  t.dist = across_job(g, Dist::replicated);
  return {t};
}

std::vector<TensorType> meta_broadcast(const std::vector<Arg>& a) {
  TensorType t = input_type(a[0]);
  int64_t root = int_arg(a[1], "root");
  Group g = group_arg(a[2]);
  if (root < 0 || root >= g.size) throw OpError("root " + std::to_string(root) + " is not a rank of the group's " + std::to_string(g.size) + (g.ranks.empty() ? "" : " (a subgroup's root is its place in the group)"));
  t.future = bool_arg(a[3], "do_async");
  t.dist = across_job(g, Dist::replicated);
  return {t};
}

std::vector<TensorType> meta_wait(const std::vector<Arg>& a) {
  TensorType t = tensor_type(a[0], "a");
  if (a[0].kind == K::Proxy && !t.future) throw OpError("a is a tensor, not a FUTURE: only the result of an asynchronous collective is waited on");
  t.future = false;
  return {t};
}

// This rank's slice along dim: no communication. Of a value the same on every rank, the slice is
// sharded(dim); of anything else, it differs between ranks as its input does.
std::vector<TensorType> meta_local_shard(const std::vector<Arg>& a) {
  TensorType t = input_type(a[0]);
  Group g = group_arg(a[1]);
  int64_t d = dim_arg(a[2], t.shape.size());
  split_dim(t, d, g, " (pad it first)");
  if (!g.ranks.empty()) {
    t.dist = Dist::per_rank;
  } else if (t.dist == Dist::replicated) {
    t.dist = Dist::sharded;
    t.shard_dim = static_cast<int>(d);
  } else if (t.dist != Dist::unknown) {
    t.dist = Dist::per_rank;
  }
  return {t};
}

// Tensor parallelism's conjugate pair and its gather (Megatron's mappings; the tp pass inserts
// them before grad). copy_to_tp: the same tensor (the input of column-parallel linears); its
// gradient sums every rank's partial cotangent. reduce_from_tp: the sum over the ranks of each
// rank's partial result (a row-parallel linear's), the same on every rank; its gradient is the
// cotangent itself. gather_from_tp: every rank's slice along dim; its gradient is this rank's
// slice of the cotangent. The objective is then the replicated loss counted once, as in Megatron.
std::vector<TensorType> meta_copy_to_tp(const std::vector<Arg>& a) {
  TensorType t = input_type(a[0]);
  group_arg(a[1]);
  return {t};
}

std::vector<TensorType> meta_reduce_from_tp(const std::vector<Arg>& a) {
  TensorType t = input_type(a[0]);
  t.dist = across_job(group_arg(a[1]), Dist::replicated);
  return {t};
}

std::vector<TensorType> meta_gather_from_tp(const std::vector<Arg>& a) {
  TensorType t = input_type(a[0]);
  Group g = group_arg(a[1]);
  int64_t d = dim_arg(a[2], t.shape.size());
  t.shape[static_cast<size_t>(d)] *= g.size;
  t.dist = across_job(g, Dist::replicated);
  return {t};
}

// The communicator for a group (a group of one needs none): the job's for the world, a
// subgroup's own (opened by the host at its first collective) for a subgroup.
rt::dist::Communicator* comm_for(const Group& g, ExecContext& c) {
  if (g.size == 1) return nullptr;
  rt::dist::Communicator* comm = c.communicator ? c.communicator() : nullptr;
  if (!comm)
    throw OpError("a group of " + std::to_string(g.size) + " ranks needs a job of " + (g.ranks.empty() ? "that many" : "them") +
                  " (run under tracer launch --nproc " +
                  std::to_string(g.ranks.empty() ? g.size : *std::max_element(g.ranks.begin(), g.ranks.end()) + 1) + ")");
  if (g.ranks.empty()) {
    if (comm->size() != g.size)
      throw OpError("the group has " + std::to_string(g.size) + " ranks but the job has " + std::to_string(comm->size()) +
                    " (the trace was made for another WORLD_SIZE)");
    return comm;
  }
  std::string members;
  for (int64_t r : g.ranks) members += (members.empty() ? "" : ", ") + std::to_string(r);
  for (int64_t r : g.ranks)
    if (r >= comm->size())
      throw OpError("the group (" + members + ") names rank " + std::to_string(r) + " of a job of " + std::to_string(comm->size()));
  if (std::find(g.ranks.begin(), g.ranks.end(), int64_t{comm->rank()}) == g.ranks.end())
    throw OpError("rank " + std::to_string(comm->rank()) + " is not in the group (" + members + "): a rank runs collectives of its own groups");
  if (!c.group_communicator) throw OpError("this host runs no subgroup collectives");
  return c.group_communicator(g.ranks);
}

rt::Tensor copy(const rt::Tensor& x, ExecContext& c) { return rt::cast(x, x.dtype(), c.allocator); }

// x with dimension d moved to the front (contiguous), and the permutation that puts it back.
rt::Tensor to_front(const rt::Tensor& x, int64_t d, ExecContext& c, std::vector<int64_t>* back) {
  std::vector<int64_t> perm(static_cast<size_t>(x.dim()));
  std::iota(perm.begin(), perm.end(), 0);
  perm.erase(perm.begin() + d);
  perm.insert(perm.begin(), d);
  back->assign(perm.size(), 0);
  for (size_t i = 0; i < perm.size(); ++i) (*back)[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return rt::permute(x, perm, c.allocator);
}

// Runs fn on the communicator: submitted, its Work kept by the data of out for the wait, when
// the collective is asynchronous; else at once.
void issue(rt::dist::Communicator& comm, bool async, const rt::Tensor& out, ExecContext& c, std::function<void(rt::dist::Communicator&)> fn,
           std::vector<rt::Tensor> keep = {}) {
  if (!async) {
    fn(comm);
    return;
  }
  c.pending[out.data()] = {comm.submit(std::move(fn)), std::move(keep)};
}

std::vector<rt::Tensor> cpu_all_gather(const std::vector<Arg>& a, ExecContext& c) {
  TensorType t = meta_all_gather(a)[0];
  Group g = group_arg(a[1]);
  rt::dist::Communicator* comm = comm_for(g, c);
  if (!comm) return {copy(a[0].tensor, c)};
  int64_t d = dim_arg(a[3], t.shape.size());
  rt::Tensor out = rt::Tensor::empty(t.dtype, t.shape, c.allocator);
  rt::Tensor in = a[0].tensor;
  if (d == 0) {
    issue(*comm, t.future, out, c, [in, out](rt::dist::Communicator& m) mutable { m.all_gather(in, out); });
    return {out};
  }
  // Gathered along dim 0 of copies with d in front, then put back into out.
  std::vector<int64_t> back;
  rt::Tensor front = to_front(in, d, c, &back);
  rt::Shape s = front.shape();
  s[0] *= g.size;
  rt::Tensor gathered = rt::Tensor::empty(t.dtype, s, c.allocator);
  issue(*comm, t.future, out, c, [front, gathered, back, out](rt::dist::Communicator& m) mutable {
    m.all_gather(front, gathered);
    rt::permute_into(gathered, back, out);
  }, {front, gathered});
  return {out};
}

std::vector<rt::Tensor> cpu_reduce_scatter(const std::vector<Arg>& a, ExecContext& c) {
  TensorType t = meta_reduce_scatter(a)[0];
  Group g = group_arg(a[2]);
  rt::dist::ReduceOp op = reduce_arg(a[1]);
  rt::dist::Communicator* comm = comm_for(g, c);
  if (!comm) return {copy(a[0].tensor, c)};
  int64_t d = dim_arg(a[4], t.shape.size());
  rt::Tensor out = rt::Tensor::empty(t.dtype, t.shape, c.allocator);
  rt::Tensor in = a[0].tensor;
  if (d == 0) {
    issue(*comm, t.future, out, c, [in, out, op](rt::dist::Communicator& m) mutable { m.reduce_scatter(in, out, op); });
    return {out};
  }
  std::vector<int64_t> back;
  rt::Tensor front = to_front(in, d, c, &back);
  rt::Shape s = front.shape();
  s[0] /= g.size;
  rt::Tensor scattered = rt::Tensor::empty(t.dtype, s, c.allocator);
  issue(*comm, t.future, out, c, [front, scattered, back, out, op](rt::dist::Communicator& m) mutable {
    m.reduce_scatter(front, scattered, op);
    rt::permute_into(scattered, back, out);
  }, {front, scattered});
  return {out};
}

std::vector<rt::Tensor> cpu_all_reduce(const std::vector<Arg>& a, ExecContext& c) {
  TensorType t = meta_all_reduce(a)[0];
  rt::Tensor out = copy(a[0].tensor, c);
  rt::dist::ReduceOp op = reduce_arg(a[1]);
  if (rt::dist::Communicator* comm = comm_for(group_arg(a[2]), c))
    issue(*comm, t.future, out, c, [out, op](rt::dist::Communicator& m) mutable { m.all_reduce(out, op); });
  return {out};
}

std::vector<rt::Tensor> cpu_broadcast(const std::vector<Arg>& a, ExecContext& c) {
  TensorType t = meta_broadcast(a)[0];
  rt::Tensor out = copy(a[0].tensor, c);
  int root = static_cast<int>(a[1].i);
  if (rt::dist::Communicator* comm = comm_for(group_arg(a[2]), c))
    issue(*comm, t.future, out, c, [out, root](rt::dist::Communicator& m) mutable { m.broadcast(out, root); });
  return {out};
}

std::vector<rt::Tensor> cpu_local_shard(const std::vector<Arg>& a, ExecContext& c) {
  TensorType t = meta_local_shard(a)[0];
  Group g = group_arg(a[1]);
  rt::dist::Communicator* comm = comm_for(g, c);
  if (!comm) return {copy(a[0].tensor, c)};
  int64_t d = dim_arg(a[2], t.shape.size());
  int64_t n = t.shape[static_cast<size_t>(d)];
  std::vector<int64_t> lo(t.shape.size(), 0), hi(a[0].tensor.shape().begin(), a[0].tensor.shape().end());
  lo[static_cast<size_t>(d)] = n * comm->rank();
  hi[static_cast<size_t>(d)] = n * (comm->rank() + 1);
  return {rt::slice(a[0].tensor, lo, hi, std::vector<int64_t>(lo.size(), 1), c.allocator)};
}

// The same tensor (shared, as a wait's): only its gradient differs from the identity's.
std::vector<rt::Tensor> cpu_copy_to_tp(const std::vector<Arg>& a, ExecContext& c) {
  (void)c;
  meta_copy_to_tp(a);
  return {a[0].tensor};
}

std::vector<rt::Tensor> cpu_reduce_from_tp(const std::vector<Arg>& a, ExecContext& c) {
  meta_reduce_from_tp(a);
  rt::Tensor out = copy(a[0].tensor, c);
  if (rt::dist::Communicator* comm = comm_for(group_arg(a[1]), c)) comm->all_reduce(out, rt::dist::ReduceOp::sum);
  return {out};
}

std::vector<rt::Tensor> cpu_gather_from_tp(const std::vector<Arg>& a, ExecContext& c) {
  meta_gather_from_tp(a);
  // all_gather(a, group, False, dim)
  return cpu_all_gather({a[0], a[1], Arg::of_bool(false), a[2]}, c);
}

// The future's value is its tensor, once its collective is done (a group of one has none).
std::vector<rt::Tensor> cpu_wait(const std::vector<Arg>& a, ExecContext& c) {
  auto p = c.pending.find(a[0].tensor.data());
  if (p != c.pending.end()) {
    ExecContext::Pending done = std::move(p->second);
    c.pending.erase(p);
    done.work.wait();
  }
  return {a[0].tensor};
}

ParamSpec req(const char* n) { return {n, true, {}, false}; }
ParamSpec opt(const char* n, Arg d) { return {n, false, std::move(d), false}; }

}  // namespace

void ExecContext::finish_pending() {
  std::exception_ptr first;
  for (auto& [data, p] : pending) {
    try {
      p.work.wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  pending.clear();
  if (first) std::rethrow_exception(first);
}

bool async_collective(const Stmt& s) {
  if (s.kind != StmtKind::Prim || !s.op || s.op->ns != "prims" || s.args.empty()) return false;
  const std::string& n = s.op->name;
  size_t at = n == "all_gather" ? 2 : n == "reduce_scatter" || n == "all_reduce" || n == "broadcast" ? 3 : 0;
  return at && s.args.size() > at && s.args[at].kind == Arg::Kind::Bool && s.args[at].b;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
std::vector<OpDecl> dist_ops() {
  const Arg kNone, kFalse = Arg::of_bool(false);
  return {
      {"all_gather", OpKind::Other, {req("a"), req("group"), req("do_async"), opt("dim", kNone)}, &meta_all_gather, &cpu_all_gather,
       "all_gather(a, group, do_async, dim=None): every rank's a, in rank order, along dim (0 when None); a FUTURE when "
       "do_async (prims.wait gives the tensor). group: ('world', N), as dist.group() gives.",
       {"torch_all_gather_prim_impl"}},
      {"reduce_scatter", OpKind::Other, {req("a"), req("op"), req("group"), req("do_async"), opt("dim", kNone)},
       &meta_reduce_scatter, &cpu_reduce_scatter,
       "reduce_scatter(a, op, group, do_async, dim=None): this rank's slice along dim (0 when None) of the reduction "
       "('sum', 'avg', 'max', 'min') of every rank's a; the dimension must divide among the ranks.",
       {"torch_reduce_scatter_prim_impl"}},
      {"all_reduce", OpKind::Other, {req("a"), req("op"), req("group"), req("do_async"), opt("skip_clone", kFalse)},
       &meta_all_reduce, &cpu_all_reduce,
       "all_reduce(a, op, group, do_async, skip_clone=False): the reduction ('sum', 'avg', 'max', 'min') of every "
       "rank's a, on every rank (a new tensor: a is not changed, whatever skip_clone says).",
       {"torch_all_reduce_prim_impl"}},
      {"broadcast", OpKind::Other, {req("a"), req("root"), req("group"), req("do_async")}, &meta_broadcast, &cpu_broadcast,
       "broadcast(a, root, group, do_async): rank root's a, on every rank.", {"torch_broadcast_prim_impl"}},
      {"local_shard", OpKind::Other, {req("a"), req("group"), req("dim")}, &meta_local_shard, &cpu_local_shard,
       "local_shard(a, group, dim): this rank's slice along dim of a (no communication; the dimension must divide "
       "among the ranks). Of a replicated a, the slice is sharded(dim); the shard pass saves such slices.",
       {}},
      {"copy_to_tp", OpKind::Other, {req("a"), req("group")}, &meta_copy_to_tp, &cpu_copy_to_tp,
       "copy_to_tp(a, group): a itself (the input of column-parallel linears); its gradient is the sum over the ranks "
       "of their cotangents (Megatron's f; the tp pass inserts it).",
       {}},
      {"reduce_from_tp", OpKind::Other, {req("a"), req("group")}, &meta_reduce_from_tp, &cpu_reduce_from_tp,
       "reduce_from_tp(a, group): the sum over the ranks of a (a row-parallel linear's partial result), on every rank; "
       "its gradient is the cotangent itself (Megatron's g; the tp pass inserts it).",
       {}},
      {"gather_from_tp", OpKind::Other, {req("a"), req("group"), req("dim")}, &meta_gather_from_tp, &cpu_gather_from_tp,
       "gather_from_tp(a, group, dim): every rank's slice along dim, in rank order (a column-parallel output that "
       "leaves the parallel region); its gradient is this rank's slice of the cotangent.",
       {}},
      {"wait", OpKind::Other, {req("a")}, &meta_wait, &cpu_wait,
       "wait(a): the tensor of the FUTURE a (the result of an asynchronous collective).", {"torch_wait_prim_impl"}},
  };
}
#pragma GCC diagnostic pop

}  // namespace tracer::ir
