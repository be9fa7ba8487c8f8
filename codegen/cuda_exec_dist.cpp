// Collectives on the GPU (docs/distributed.md, "Collectives in traces"). In a job, through the
// job's NCCL communicator (ExecContext::device_communicator), for every group the job's size,
// one rank's included: the compute stream records an event that the communication stream waits
// on (so the collective reads its input after it was computed, and writes a buffer the compute
// stream is done with), NCCL runs on the communication stream, and an event recorded after it
// is what a wait (or, for a synchronous collective, the next statement) makes the compute stream
// wait for. Until the wait, the collective's input and output are kept alive, so that the
// caching allocator cannot hand their memory to a kernel while NCCL still reads or writes it.
// A collective along a dimension other than 0 moves it to the front first (a transpose kernel)
// and back at the wait. Outside a job a group of one rank needs no communicator: each value is
// its own (a copy).
#include <cstdio>
#include <numeric>

#include <cstdio>

#include "codegen/cuda_exec.h"
#include "ir/op_rules.h"
#include "runtime/nccl.h"

namespace tracer::codegen {

using rt::cuda::DeviceTensor;
using K = ir::Arg::Kind;

namespace {

int64_t group_size(const ir::Arg& g) { return g.kind == K::Tuple && g.items.size() >= 2 ? g.items[1].i : 1; }

rt::dist::ReduceOp reduce_op(const ir::Arg& a) {
  if (a.s == "avg") return rt::dist::ReduceOp::avg;
  if (a.s == "max") return rt::dist::ReduceOp::max;
  if (a.s == "min") return rt::dist::ReduceOp::min;
  return rt::dist::ReduceOp::sum;
}

int64_t dim_of(const ir::Arg& d, size_t rank) {
  int64_t v = d.kind == K::None ? 0 : d.i;
  return v < 0 ? v + static_cast<int64_t>(rank) : v;
}

// The permutation that moves dimension d to the front, and its inverse.
std::vector<int64_t> to_front(int64_t d, size_t rank) {
  std::vector<int64_t> p(rank);
  std::iota(p.begin(), p.end(), 0);
  p.erase(p.begin() + d);
  p.insert(p.begin(), d);
  return p;
}

std::vector<int64_t> inverse(const std::vector<int64_t>& p) {
  std::vector<int64_t> q(p.size());
  for (size_t i = 0; i < p.size(); ++i) q[static_cast<size_t>(p[i])] = static_cast<int64_t>(i);
  return q;
}

}  // namespace

void GpuExecutor::print_host_times() {
  if (host_times_.empty()) return;
  std::fprintf(stderr, "# host time of GPU executor %p (TRACER_GPU_PROFILE=host): total ms, count, us each\n", static_cast<void*>(this));
  for (const auto& [what, e] : host_times_)
    std::fprintf(stderr, "#   %-28s %10.3f ms %8ld %9.2f us\n", what.c_str(), e.first, e.second, 1e3 * e.first / static_cast<double>(e.second));
  host_times_.clear();
}

GpuExecutor::~GpuExecutor() {
  if (host_profile_) print_host_times();
  if (index_host_) {
    try {
      if (index_read_pending_) dev_.event_wait(index_event_);  // the copy into it has run
    } catch (...) {
    }
    dev_.free_pinned_host(index_host_);
    events_.push_back(index_event_);
  }
  for (auto& [p, pc] : pending_) events_.push_back(pc.event);
  pending_.clear();
  for (void* e : events_) dev_.destroy_event(e);
}

bool GpuExecutor::is_collective(const std::string& op) {
  return op == "all_gather" || op == "reduce_scatter" || op == "all_reduce" || op == "broadcast" || op == "wait" ||
         op == "local_shard" || op == "copy_to_tp" || op == "reduce_from_tp" || op == "gather_from_tp";
}

void* GpuExecutor::take_event() {
  if (!events_.empty()) {
    void* e = events_.back();
    events_.pop_back();
    return e;
  }
  return dev_.new_event();
}

// Runs `out = prims.OP(x, extra...)` as a generated kernel: the statement is made once per
// (owner, role) and kept, so that run_simple's per-statement cache holds its kernel.
DeviceTensor GpuExecutor::run_synthesized(const ir::Stmt& owner, int role, const char* op, const DeviceTensor& x, rt::Shape out_shape,
                                          std::vector<ir::Arg> extra) {
  auto& made = dist_stmts_[&owner];
  if (made.size() <= static_cast<size_t>(role)) made.resize(static_cast<size_t>(role) + 1);
  if (!made[static_cast<size_t>(role)]) {
    auto in = std::make_shared<ir::Proxy>();
    in->name = "collective_in";
    in->type.dtype = x.dtype;
    in->type.shape = x.shape;
    auto out = std::make_shared<ir::Proxy>();
    out->name = "collective_out";
    out->type.dtype = x.dtype;
    out->type.shape = std::move(out_shape);
    auto st = std::make_unique<ir::Stmt>();
    st->kind = ir::StmtKind::Prim;
    st->op = ir::find_op(op);
    st->args = {ir::Arg::of_proxy(in)};
    for (ir::Arg& a : extra) st->args.push_back(std::move(a));
    st->outputs = {out};
    made[static_cast<size_t>(role)] = std::move(st);
  }
  const ir::Stmt& st = *made[static_cast<size_t>(role)];
  Values local;
  local[st.args[0].proxy.get()] = x;
  if (!run_simple(st, local)) throw std::runtime_error(std::string("a collective's ") + op + " has no kernel");
  return local.at(st.outputs[0].get());
}

DeviceTensor GpuExecutor::permuted(const ir::Stmt& owner, int role, const DeviceTensor& x, const std::vector<int64_t>& perm) {
  rt::Shape shape;
  std::vector<ir::Arg> items;
  for (int64_t p : perm) {
    shape.push_back(x.shape[static_cast<size_t>(p)]);
    items.push_back(ir::Arg::of_int(p));
  }
  return run_synthesized(owner, role, "transpose", x, std::move(shape), {ir::Arg::of_seq(K::Tuple, std::move(items))});
}

DeviceTensor GpuExecutor::sliced(const ir::Stmt& owner, int role, const DeviceTensor& x, int64_t dim, int64_t lo, int64_t hi) {
  if (dim == 0) {  // contiguous rows: a copy
    ir::TensorType t;
    t.dtype = x.dtype;
    t.shape = x.shape;
    t.shape[0] = hi - lo;
    DeviceTensor y = alloc(t);
    const size_t row = x.shape.empty() || x.shape[0] == 0 ? 0 : x.nbytes() / static_cast<size_t>(x.shape[0]);
    if (y.nbytes()) dev_.copy_device(y.ptr(), x.ptr() + static_cast<rt::cuda::DevPtr>(row * static_cast<size_t>(lo)), y.nbytes());
    return y;
  }
  rt::Shape shape = x.shape;
  shape[static_cast<size_t>(dim)] = hi - lo;
  std::vector<ir::Arg> start, stop;
  for (size_t i = 0; i < x.shape.size(); ++i) {
    start.push_back(ir::Arg::of_int(static_cast<int64_t>(i) == dim ? lo : 0));
    stop.push_back(ir::Arg::of_int(static_cast<int64_t>(i) == dim ? hi : x.shape[i]));
  }
  return run_synthesized(owner, role, "slice", x, std::move(shape),
                         {ir::Arg::of_seq(K::Tuple, std::move(start)), ir::Arg::of_seq(K::Tuple, std::move(stop)), ir::Arg::none()});
}

void GpuExecutor::finish_collectives() {
  for (auto& [p, pc] : pending_) {
    dev_.stream_wait(dev_.stream(), pc.event);
    events_.push_back(pc.event);
  }
  pending_.clear();
}

void GpuExecutor::run_collective(const ir::Stmt& s, Values& env, ir::ExecContext& ctx) {
  const std::string& op = s.op->name;
  if (in_graph_) throw std::runtime_error("prims." + op + ": collectives are not captured in CUDA graphs (run without --cuda-graph)");
  if (!views_.empty()) materialize_views(s, env, ctx);
  const ir::Proxy* out = s.outputs[0].get();
  auto value = [&](const ir::Arg& a) -> DeviceTensor {
    auto it = env.find(a.proxy.get());
    if (it == env.end()) throw std::runtime_error("'" + a.proxy->name + "' has no value (deleted or never defined)");
    if (transposed_.count(a.proxy.get()) || !it->second.layout.empty())
      throw std::runtime_error("'" + a.proxy->name + "' is held transposed, which a collective does not take");
    return it->second;
  };

  if (op == "wait") {
    auto it = pending_.find(s.args[0].proxy.get());
    if (it == pending_.end()) {  // already handed over (a second wait), or a group of one outside a job
      env[out] = value(s.args[0]);
      return;
    }
    PendingCollective pc = std::move(it->second);
    pending_.erase(it);
    dev_.stream_wait(dev_.stream(), pc.event);
    events_.push_back(pc.event);
    env[out] = pc.back.empty() ? pc.result : permuted(s, 0, pc.result, pc.back);
    return;  // pc.keep goes: later kernels on the compute stream are ordered after the collective
  }
  if (op == "copy_to_tp") {
    env[out] = value(s.args[0]);
    return;
  }

  const DeviceTensor x = value(s.args[0]);
  const size_t group_at = op == "reduce_scatter" || op == "all_reduce" ? 2 : op == "broadcast" ? 2 : 1;
  const int64_t n = group_size(s.args[group_at]);
  if (s.args[group_at].kind == K::Tuple && s.args[group_at].items.size() == 3 && n > 1)  // ('ranks', N, (r0, ...))
    throw std::runtime_error("collectives over a subgroup of the job's ranks run on CPU tensors (Gloo); on the GPU (NCCL) only the world's group runs yet");
  rt::dist::DeviceCommunicator* comm = nullptr;
  if (ctx.device_communicator) {
    comm = ctx.device_communicator();
  } else if (n != 1) {
    throw std::runtime_error("a group of " + std::to_string(n) + " ranks needs a job of that many (run under tracer launch --nproc " +
                             std::to_string(n) + ")");
  }
  if (comm && comm->size() != n)
    throw std::runtime_error("the group has " + std::to_string(n) + " ranks but the job has " + std::to_string(comm->size()) +
                             " (the trace was made for another WORLD_SIZE)");
  const int rank = comm ? comm->rank() : 0;

  if (op == "local_shard") {
    const int64_t d = dim_of(s.args[2], x.shape.size());
    const int64_t k = x.shape[static_cast<size_t>(d)] / n;
    env[out] = sliced(s, 0, x, d, k * rank, k * (rank + 1));
    return;
  }
  const bool async = op == "all_gather" ? s.args[2].b : op == "reduce_scatter" || op == "all_reduce" || op == "broadcast" ? s.args[3].b : false;

  // The operand along dim 0 (moved there when the collective is along another dimension).
  int64_t d = 0;
  if (op == "all_gather") d = dim_of(s.args[3], x.shape.size());
  if (op == "reduce_scatter") d = dim_of(s.args[4], x.shape.size());
  if (op == "gather_from_tp") d = dim_of(s.args[2], x.shape.size());
  std::vector<int64_t> front, back;
  DeviceTensor in = x;
  if (d != 0) {
    front = to_front(d, x.shape.size());
    back = inverse(front);
    in = permuted(s, 1, x, front);
  }
  ir::TensorType rt_type;  // the result as the collective makes it (along dim 0)
  rt_type.dtype = x.dtype;
  rt_type.shape = in.shape;
  if (op == "all_gather" || op == "gather_from_tp") rt_type.shape[0] *= n;
  if (op == "reduce_scatter") rt_type.shape[0] /= n;
  DeviceTensor result = alloc(rt_type);
  const size_t count = static_cast<size_t>(rt::numel(in.shape));

  if (!comm) {  // one rank, no job: its own value
    if (result.nbytes()) dev_.copy_device(result.ptr(), in.ptr(), result.nbytes());
    env[out] = back.empty() ? result : permuted(s, 2, result, back);
    return;
  }
  void* cs = dev_.comm_stream();
  void* ready = take_event();
  if (op == "broadcast" && result.nbytes()) dev_.copy_device(result.ptr(), in.ptr(), result.nbytes());
  dev_.record(ready, dev_.stream());
  dev_.stream_wait(cs, ready);
  events_.push_back(ready);  // the wait is enqueued: the event may be recorded again
  if (count) {
    if (op == "all_gather" || op == "gather_from_tp") {
      comm->all_gather(in.ptr(), result.ptr(), count, x.dtype, cs);
    } else if (op == "reduce_scatter") {
      comm->reduce_scatter(in.ptr(), result.ptr(), count / static_cast<size_t>(n), x.dtype, reduce_op(s.args[1]), cs);
    } else if (op == "all_reduce") {
      comm->all_reduce(in.ptr(), result.ptr(), count, x.dtype, reduce_op(s.args[1]), cs);
    } else if (op == "reduce_from_tp") {
      comm->all_reduce(in.ptr(), result.ptr(), count, x.dtype, rt::dist::ReduceOp::sum, cs);
    } else if (op == "broadcast") {
      comm->broadcast(result.ptr(), count, x.dtype, static_cast<int>(s.args[1].i), cs);
    }
  }
  void* done = take_event();
  dev_.record(done, cs);
  stats_.collectives++;
  if (async) {
    PendingCollective pc;
    pc.event = done;
    pc.keep = {in, result};
    pc.result = result;
    pc.back = back;
    env[out] = result;  // the FUTURE: only a wait reads it
    pending_[out] = std::move(pc);
    return;
  }
  dev_.stream_wait(dev_.stream(), done);
  events_.push_back(done);
  env[out] = back.empty() ? result : permuted(s, 2, result, back);
}

}  // namespace tracer::codegen
