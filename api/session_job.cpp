// Session::join_job and leave_job: a rank's part in a distributed job's rendezvous, through the
// runtime's store (runtime/store.h). See docs/distributed.md.
#include <cmath>
#include <cstdlib>
#include <thread>

#include "api/session_impl.h"
#include "runtime/comm.h"
#include "runtime/cuda.h"
#include "runtime/nccl.h"

namespace tracer {

bool Session::join_job() {
  Impl& m = *impl_;
  if (m.job) return true;
  try {
    std::optional<rt::dist::JobEnv> env = rt::dist::JobEnv::from_env();
    if (!env) return true;  // not a distributed run
    if (const char* t = std::getenv("TRACER_DIST_TIMEOUT"); t && *t) {
      char* end = nullptr;
      double s = std::strtod(t, &end);
      if (*end != '\0' || !(s > 0) || !std::isfinite(s))
        throw rt::dist::StoreError(std::string("TRACER_DIST_TIMEOUT must be a positive number of seconds, got '") + t + "'");
      m.job_timeout = std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
    }
    std::unique_ptr<rt::dist::StoreServer> server;
    if (env->rank == 0) server = rt::dist::StoreServer::start(env->master_addr, env->master_port);
    auto store = rt::dist::StoreClient::connect(env->master_addr, env->master_port, m.job_timeout);
    if (m.opts.world_size > 0 && (m.opts.world_size != env->world_size || m.opts.world_rank != env->rank))
      throw rt::dist::StoreError("--world-size " + std::to_string(m.opts.world_size) + " --rank " + std::to_string(m.opts.world_rank) +
                                 " disagrees with the job (WORLD_SIZE=" + std::to_string(env->world_size) +
                                 ", RANK=" + std::to_string(env->rank) + ")");
    rt::dist::join(*store, *env, m.job_timeout);
    m.job = env;
    m.job_server = std::move(server);
    m.job_store = std::move(store);
    m.in->set_world(env->world_size, env->rank);
    // Collectives in traces reach the job through Gloo (CPU tensors), opened at the first one
    // that needs it, so that a job without collectives needs no plugin.
    m.in->exec_context().communicator = [&m]() -> rt::dist::Communicator* {
      if (!m.job_comm) m.job_comm = rt::dist::open_gloo(*m.job_store, *m.job, m.job_timeout);
      return m.job_comm.get();
    };
    // A subgroup's ranks meet under a prefix of their own and number themselves by their place
    // in the group (every member opens it at the group's first collective, as SPMD programs do).
    m.in->exec_context().group_communicator = [&m](const std::vector<int64_t>& ranks) -> rt::dist::Communicator* {
      auto it = m.group_comms.find(ranks);
      if (it != m.group_comms.end()) return it->second.get();
      rt::dist::JobEnv sub = *m.job;
      std::string members;
      for (size_t i = 0; i < ranks.size(); ++i) {
        if (ranks[i] == m.job->rank) sub.rank = static_cast<int>(i);
        members += (i ? "," : "") + std::to_string(ranks[i]);
      }
      sub.world_size = static_cast<int>(ranks.size());
      return m.group_comms.emplace(ranks, rt::dist::open_gloo(*m.job_store, sub, m.job_timeout, "127.0.0.1", "gloo/group/" + members))
          .first->second.get();
    };
    // And through NCCL on the GPU (the executor's collectives of CUDA tensors), likewise opened
    // at the first, on the session's device.
    m.in->exec_context().device_communicator = [&m]() -> rt::dist::DeviceCommunicator* {
      if (!m.job_nccl) {
        if (!m.gpu) throw rt::dist::StoreError("a collective of CUDA tensors without the session's GPU");
        m.gpu->make_current();
        m.job_nccl = rt::dist::open_nccl(*m.job_store, *m.job, m.gpu->ordinal(), m.job_timeout);
      }
      return m.job_nccl.get();
    };
    return true;
  } catch (const std::exception& e) {
    const char* r = std::getenv("RANK");
    m.error(std::string("rank ") + (r ? r : "?") + ": " + e.what());
    return false;
  }
}

namespace {

// One line per collective of the traces, in the order they run: its op and what every rank must
// give alike (the operand's dtype and shape, the group, the op, the dimension, the root).
void collective_lines(const std::vector<ir::Stmt>& stmts, const std::string& trace, std::vector<std::string>& out) {
  static const char* kOps[] = {"all_gather", "reduce_scatter", "all_reduce", "broadcast", "reduce_from_tp", "gather_from_tp"};
  for (const ir::Stmt& s : stmts) {
    if (s.kind != ir::StmtKind::Prim) {
      collective_lines(s.subsymbols, trace, out);
      continue;
    }
    if (!s.op || s.op->ns != "prims") continue;
    bool is = false;
    for (const char* o : kOps) is = is || s.op->name == o;
    if (!is) continue;
    std::string line = s.op->name + "(";
    for (size_t i = 0; i < s.args.size(); ++i) {
      const ir::Arg& a = s.args[i];
      if (i) line += ", ";
      if (a.kind == ir::Arg::Kind::Proxy) line += std::string(rt::dtype_name(a.proxy->type.dtype)) + rt::shape_str(a.proxy->type.shape);
      // A subgroup by its size: ranks of different groups (the rows of a mesh) run the same
      // collectives over their own members.
      else if (a.kind == ir::Arg::Kind::Tuple && a.items.size() == 3 && a.items[0].kind == ir::Arg::Kind::Str && a.items[0].s == "ranks")
        line += "a subgroup of " + ir::print_arg(a.items[1]) + " ranks";
      else line += ir::print_arg(a);
    }
    out.push_back(line + ") in " + trace);
  }
}

std::string join_lines(const std::vector<std::string>& xs) {
  std::string s;
  for (const auto& x : xs) s += x + "\n";
  return s;
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  size_t a = 0;
  while (a < s.size()) {
    size_t b = s.find('\n', a);
    if (b == std::string::npos) b = s.size();
    out.push_back(s.substr(a, b - a));
    a = b + 1;
  }
  return out;
}

}  // namespace

std::string Session::Impl::check_collectives(const interp::Traces& prog) {
  if (!job_store || !job || job->world_size < 2) return "";
  std::vector<std::string> mine;
  for (const auto& t : prog) collective_lines(t->stmts, t->name, mine);
  const std::string key = "program/" + std::to_string(job_runs++) + "/";
  job_store->set(key + std::to_string(job->rank), join_lines(mine));
  // A program without collectives cannot wait on another rank: it publishes its (empty) list for
  // the ranks that have some, and runs.
  if (mine.empty()) return "";
  for (int r = 0; r < job->world_size; ++r) {
    if (r == job->rank) continue;
    std::vector<std::string> theirs = split_lines(job_store->get(key + std::to_string(r), job_timeout));
    if (theirs == mine) continue;
    // Said the same way on every rank: the lower rank's list first.
    const bool first = r < job->rank;
    const std::vector<std::string>& lo = first ? theirs : mine;
    const std::vector<std::string>& hi = first ? mine : theirs;
    const int rlo = first ? r : job->rank, rhi = first ? job->rank : r;
    size_t i = 0;
    while (i < lo.size() && i < hi.size() && lo[i] == hi[i]) ++i;
    auto say = [](const std::vector<std::string>& xs, size_t k) { return k < xs.size() ? xs[k] : std::string("no collective (its program ends)"); };
    return "the ranks' programs differ at collective " + std::to_string(i + 1) + ": rank " + std::to_string(rlo) + " runs " + say(lo, i) +
           ", rank " + std::to_string(rhi) + " runs " + say(hi, i) +
           " (every rank must run the same collectives on tensors of the same shapes and dtypes; nothing ran)";
  }
  return "";
}

std::optional<JobInfo> Session::job() const {
  const Impl& m = *impl_;
  if (!m.job) return std::nullopt;
  return JobInfo{m.job->rank, m.job->world_size, m.job->local_rank, m.job->local_world_size,
                 m.job->master_addr + ":" + std::to_string(m.job->master_port)};
}

bool Session::leave_job() {
  Impl& m = *impl_;
  if (!m.job_store) return true;
  bool ok = true;
  try {
    rt::dist::join(*m.job_store, *m.job, m.job_timeout, "finished");
    // A rank may still be reading that everyone arrived when rank 0 is through: each says it is
    // done with the store, and rank 0 closes it only after all have.
    const std::string done = "finished/done";
    if (m.job->rank != 0) {
      m.job_store->add(done, 1);
    } else {
      auto deadline = std::chrono::steady_clock::now() + m.job_timeout;
      while (m.job_store->add(done, 0) < m.job->world_size - 1) {
        if (std::chrono::steady_clock::now() > deadline)
          throw rt::dist::StoreError("a rank met the others at the end but did not let go of the store within the timeout");
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
  } catch (const std::exception& e) {
    m.error("rank " + std::to_string(m.job->rank) + ", at the end of the run: " + e.what());
    ok = false;
  }
  m.in->exec_context().communicator = nullptr;
  m.in->exec_context().group_communicator = nullptr;
  m.in->exec_context().device_communicator = nullptr;
  if (m.job_nccl && m.gpu) m.gpu->synchronize();
  m.job_nccl.reset();
  m.group_comms.clear();
  m.job_comm.reset();
  m.job_store.reset();
  m.job_server.reset();  // rank 0: only now, when every rank is done with the store (or gone)
  return ok;
}

}  // namespace tracer
