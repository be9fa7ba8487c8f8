// The memory estimator: replays the executor's allocations and frees symbolically.
#include "ir/memory.h"

#include "ir/fusion.h"
#include "ir/group.h"
#include "ir/op.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace tracer::ir {

namespace {

class Sim {
 public:
  MemReport rep;
  size_t (*allocation)(size_t) = nullptr;  // the allocator's size for a request (null: exact)

  size_t alloc_size(size_t bytes) const { return allocation ? allocation(bytes) : bytes; }
  int new_storage(size_t bytes, bool comm = false) {
    bytes_.push_back(alloc_size(bytes));
    refs_.push_back(0);
    comm_.push_back(comm);
    return static_cast<int>(bytes_.size() - 1);
  }
  void hold(int s) {
    if (refs_[s]++ == 0) {
      live_ += bytes_[s];
      if (comm_[s]) {
        comm_live_ += bytes_[s];
        rep.comm_peak_bytes = std::max(rep.comm_peak_bytes, comm_live_);
      }
    }
  }
  void release(int s) {
    if (--refs_[s] == 0) {
      live_ -= bytes_[s];
      if (comm_[s]) comm_live_ -= bytes_[s];
    }
  }
  void define(const Proxy* p, int s) {
    if (static_cast<size_t>(s) >= first_name_.size()) first_name_.resize(bytes_.size());
    if (first_name_[s].empty()) first_name_[s] = p->name;  // what a storage is called once its values are gone
    auto it = env_.find(p);
    if (it != env_.end()) release(it->second);  // redefinition replaces the old value
    env_[p] = s;
    hold(s);
  }
  void drop(const Proxy* p) {
    auto it = env_.find(p);
    if (it == env_.end()) return;
    release(it->second);
    env_.erase(it);
  }
  int storage(const Proxy* p) const {
    auto it = env_.find(p);
    return it == env_.end() ? -1 : it->second;
  }
  size_t bytes(int s) const { return bytes_[s]; }

  // Called after every statement (and inside composites): the peak's bytes and place. What is
  // live there is described only at call number describe_at (a second walk), so that a peak
  // that keeps rising (a forward's saved values) costs no list per statement.
  void note_peak(int phase, size_t index, const Stmt* s) {
    ++calls_;
    if (live_ > rep.peak_bytes) {
      rep.peak_bytes = live_;
      rep.peak_phase = phase;
      rep.peak_index = index;
      peak_call_ = calls_;
    }
    if (calls_ == describe_at_) {
      rep.peak_stmt = s ? print_stmt_line(*s) : "inputs";
      rep.peak_live = live_set();
      rep.peak_comm_bytes = comm_live_;
    }
  }
  long long peak_call() const { return peak_call_; }
  void describe_at(long long call) { describe_at_ = call; }

  std::vector<std::pair<std::string, size_t>> live_set() const {
    std::vector<std::string> name(bytes_.size());
    for (const auto& [p, st] : env_)
      if (name[st].empty() || p->name < name[st]) name[st] = p->name;
    std::vector<std::pair<std::string, size_t>> out;
    for (size_t st = 0; st < bytes_.size(); ++st)
      if (refs_[st] > 0) {
        // Held by the caller after the trace let its last value go (an input the program deleted):
        // named after the first value it held.
        std::string n = !name[st].empty() ? name[st]
                        : st < first_name_.size() && !first_name_[st].empty() ? first_name_[st] + " (held by the caller)"
                                                                               : "(held by the caller)";
        out.emplace_back(n, bytes_[st]);
      }
    std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    return out;
  }

  // The executor's buffer reuse (find_donor in ir/execute.cpp): an argument that dies after s,
  // whose buffer nobody else holds, with the output's dtype and shape, becomes the output.
  int donor_arg(const Stmt& s, const TensorType& out, const std::unordered_set<const Proxy*>& dying,
                std::vector<int>& taken, const std::unordered_set<const Proxy*>* in_order = nullptr) const {
    int found = -1;
    for (const Arg& a : s.args)
      for_each_proxy(a, [&](const ProxyPtr& p) {
        if (found >= 0 || !dying.count(p.get())) return;
        if (in_order && !in_order->count(p.get())) return;
        bool same = in_order ? rt::numel(p->type.shape) == rt::numel(out.shape) : p->type.shape == out.shape;
        if (p->type.dtype != out.dtype || !same) return;
        int st = storage(p.get());
        if (st < 0 || refs_[st] != 1 || bytes_[st] != alloc_size(out.nbytes())) return;
        if (std::find(taken.begin(), taken.end(), st) != taken.end()) return;
        found = st;
      });
    if (found >= 0) taken.push_back(found);
    return found;
  }

  void run_stmt(const Stmt& s, int phase, size_t index, const std::unordered_set<const Proxy*>& dying) {
    if (runs_fused(s)) {  // block by block: only the outputs exist at full size
      std::vector<int> taken, st;
      // Only inputs read at the element written lend a buffer (ir/group.h), as in the executors.
      GroupPlan g = plan_group(s);
      std::unordered_set<const Proxy*> in_order;
      if (g.kind != GroupKind::None) in_order = in_order_inputs(g);
      for (const auto& p : s.outputs)
        st.push_back(dying.empty() ? -1 : donor_arg(s, p->type, dying, taken, g.kind != GroupKind::None ? &in_order : nullptr));
      for (size_t i = 0; i < s.outputs.size(); ++i)
        define(s.outputs[i].get(), st[i] >= 0 ? st[i] : new_storage(s.outputs[i]->type.nbytes()));
      note_peak(phase, index, &s);
      return;
    }
    switch (s.kind) {
      case StmtKind::Del:
        for (const auto& p : s.deleted) drop(p.get());
        return;
      case StmtKind::Prim: {
        // A reshape is a view, a wait gives the tensor its future already holds, and copy_to_tp
        // its input.
        bool alias = s.op && (s.op->name == "reshape" || s.op->name == "wait" || s.op->name == "copy_to_tp" || (lazy_ && s.outputs.size() == 1 && lazy_->count(s.outputs[0].get()))) &&
                     !s.args.empty() && s.args[0].kind == Arg::Kind::Proxy && storage(s.args[0].proxy.get()) >= 0;
        int donor = -1;
        if (!alias && !dying.empty() && s.op && s.op->kind == OpKind::Elementwise && s.outputs.size() == 1) {
          std::vector<int> taken;
          donor = donor_arg(s, s.outputs[0]->type, dying, taken);
        }
        // The device's attention backward holds f32 row sums and a dq accumulator while its
        // outputs exist (cuDNN's and the flash kernels' alike; the CPU needs neither).
        size_t transient = 0;
        // (A masked one runs on the CPU kernel, which needs neither.)
        const bool masked = s.args.size() > 8 && s.args[8].kind != Arg::Kind::None;
        if (allocation && !masked && s.op && s.op->name == "attention_backward" && s.args.size() > 1 && s.args[1].kind == Arg::Kind::Proxy) {
          const TensorType& q = s.args[1].proxy->type;
          if (!q.shape.empty()) {
            const size_t rows = static_cast<size_t>(rt::numel(q.shape) / std::max<int64_t>(1, q.shape.back()));
            const bool f64 = q.dtype == rt::DType::f64;
            transient = alloc_size(rows * (f64 ? 8 : 4));
            if (q.dtype == rt::DType::bf16 || q.dtype == rt::DType::f16)
              transient += alloc_size(rows * static_cast<size_t>(q.shape.back()) * 4);
          }
        }
        // A gather or reduce-scatter along a dimension other than 0, over several ranks, moves it
        // to the front (a copy of its input) and collects into a buffer of the output's size,
        // which it then permutes into the output: both live while the output is made.
        if (s.op && s.op->ns == "prims" && (s.op->name == "all_gather" || s.op->name == "reduce_scatter" || s.op->name == "gather_from_tp") &&
            s.args.size() > 2 && s.args[0].kind == Arg::Kind::Proxy && !s.outputs.empty()) {
          const size_t dim_at = s.op->name == "all_gather" ? 3 : s.op->name == "reduce_scatter" ? 4 : 2;
          const size_t group_at = s.op->name == "reduce_scatter" ? 2 : 1;
          const Arg& g = s.args[group_at];
          const bool many = g.kind == Arg::Kind::Tuple && g.items.size() == 2 && g.items[1].kind == Arg::Kind::Int && g.items[1].i > 1;
          const int64_t rank = static_cast<int64_t>(s.args[0].proxy->type.shape.size());
          int64_t d = s.args.size() > dim_at && s.args[dim_at].kind == Arg::Kind::Int ? s.args[dim_at].i : 0;
          if (d < 0) d += rank;
          if (many && d != 0) {
            if (async_collective(s)) {  // held until the wait, as the executors hold them
              std::vector<int>& sc = scratch_[s.outputs[0].get()];
              for (size_t bytes : {s.args[0].proxy->type.nbytes(), s.outputs[0]->type.nbytes()}) {
                sc.push_back(new_storage(bytes));
                first_name_.resize(bytes_.size());
                first_name_.back() = "(" + s.outputs[0]->name + "'s scratch)";
                hold(sc.back());
              }
            } else {
              transient += alloc_size(s.args[0].proxy->type.nbytes()) + alloc_size(s.outputs[0]->type.nbytes());
            }
          }
        }
        live_ += transient;
        // A collective's result is its communication buffer (a FUTURE until it is waited on).
        const bool comm = s.op && s.op->ns == "prims" &&
                          (s.op->name == "all_gather" || s.op->name == "reduce_scatter" || s.op->name == "all_reduce" ||
                           s.op->name == "broadcast");
        for (const auto& p : s.outputs)
          define(p.get(), alias ? storage(s.args[0].proxy.get()) : donor >= 0 ? donor : new_storage(p->type.nbytes(), comm));
        // An asynchronous collective reads its input until its wait: held until then.
        if (async_collective(s) && s.args[0].kind == Arg::Kind::Proxy) {
          int in = storage(s.args[0].proxy.get());
          if (in >= 0) {
            hold(in);
            in_flight_[s.outputs[0].get()] = in;
          }
        }
        note_peak(phase, index, &s);
        live_ -= transient;
        if (s.op && s.op->name == "wait" && s.args[0].kind == Arg::Kind::Proxy) {
          auto f = in_flight_.find(s.args[0].proxy.get());
          if (f != in_flight_.end()) {
            release(f->second);
            in_flight_.erase(f);
          }
          auto sc = scratch_.find(s.args[0].proxy.get());
          if (sc != scratch_.end()) {
            for (int k : sc->second) release(k);
            scratch_.erase(sc);
          }
        }
        return;
      }
      case StmtKind::Composite:
      case StmtKind::Fusion: {
        const std::unordered_set<const Proxy*>* lazy = lazy_;
        lazy_ = nullptr;
        for (const Stmt& sub : s.subsymbols) run_stmt(sub, phase, index, {});
        lazy_ = lazy;
        std::unordered_set<const Proxy*> outs;
        for (const auto& p : s.outputs) outs.insert(p.get());
        for (const Stmt& sub : s.subsymbols)
          for (const auto& p : sub.outputs)
            if (!outs.count(p.get())) drop(p.get());
        note_peak(phase, index, &s);
        return;
      }
    }
  }

  void run_trace(const Trace& t, int phase) {
    std::unordered_set<const Proxy*> lazy = lazy_transposes(t.stmts, &t.output);
    lazy_ = &lazy;
    rep.start_bytes.push_back(live_);
    std::unordered_set<const Proxy*> dying;
    for (size_t i = 0; i < t.stmts.size(); ++i) {
      dying_after(t.stmts, i, dying);
      run_stmt(t.stmts[i], phase, i, dying);
      rep.timeline.push_back({phase, i, live_});
    }
    lazy_ = nullptr;
  }

  // Ends a trace: its values die, except what it returns, which its caller now holds.
  std::vector<std::pair<const Proxy*, int>> finish(const Trace& t) {
    std::vector<std::pair<const Proxy*, int>> held;
    for_each_proxy(t.output, [&](const ProxyPtr& p) {
      int s = storage(p.get());
      if (s < 0) return;
      hold(s);
      held.emplace_back(p.get(), s);
    });
    std::vector<const Proxy*> all;
    for (const auto& kv : env_) all.push_back(kv.first);
    for (const Proxy* p : all) drop(p);
    for (const auto& [f, in] : in_flight_) release(in);  // never waited on: done by the trace's end
    in_flight_.clear();
    for (const auto& [f, sc] : scratch_)
      for (int k : sc) release(k);
    scratch_.clear();
    return held;
  }

  size_t live() const { return live_; }

 private:
  std::vector<size_t> bytes_;
  std::vector<std::string> first_name_;  // by storage: the first value defined in it
  std::vector<int> refs_;
  std::vector<bool> comm_;  // by storage: a collective's result
  std::unordered_map<const Proxy*, int> env_;
  std::unordered_map<const Proxy*, int> in_flight_;  // an asynchronous collective's input, by its FUTURE
  std::unordered_map<const Proxy*, std::vector<int>> scratch_;  // its scratch (dims other than 0), likewise
  size_t live_ = 0, comm_live_ = 0;
  const std::unordered_set<const Proxy*>* lazy_ = nullptr;  // this trace's lazy transposes
  long long calls_ = 0, peak_call_ = 0, describe_at_ = -1;
};

}  // namespace

namespace {
void walk(Sim& sim, const std::vector<const Trace*>& traces) {
  if (traces.empty()) return;
  const Trace& fw = *traces[0];
  for (const auto& p : fw.inputs) {
    int s = sim.new_storage(p->type.nbytes());
    if (!p->moved_in) sim.hold(s);  // the caller's reference, for the whole program
    sim.define(p.get(), s);
  }
  sim.rep.input_bytes = sim.live();
  std::unordered_set<int> input_storage;
  for (const auto& p : fw.inputs) input_storage.insert(sim.storage(p.get()));
  for (const Trace* t : traces) sim.rep.phases.push_back(t->name);
  sim.note_peak(0, 0, nullptr);
  sim.run_trace(fw, 0);
  auto held = sim.finish(fw);
  if (traces.size() < 2) return;

  // The forward returns (output, (saved...)): the caller keeps the output and moves the saved
  // tensors into the backward; any other backward input (a cotangent) the caller allocates.
  std::unordered_map<const Proxy*, int> saved;
  if (fw.output.is_seq() && fw.output.items.size() == 2)
    for_each_proxy(fw.output.items[1], [&](const ProxyPtr& p) {
      for (const auto& [q, s] : held)
        if (q == p.get()) saved[q] = s;
    });
  std::unordered_set<int> counted;
  for (const auto& [p, s] : saved)
    if (!input_storage.count(s) && counted.insert(s).second) {
      sim.rep.saved_bytes += sim.bytes(s);
      switch (p->type.dist) {
        case Dist::replicated: sim.rep.saved_replicated_bytes += sim.bytes(s); break;
        case Dist::sharded: sim.rep.saved_sharded_bytes += sim.bytes(s); break;
        case Dist::per_rank: sim.rep.saved_per_rank_bytes += sim.bytes(s); break;
        default: break;
      }
    }
  const Trace& bw = *traces[1];
  std::unordered_set<const Proxy*> moved;
  for (const auto& p : bw.inputs) {
    auto it = saved.find(p.get());
    int s = -1;
    for (const auto& [q, hs] : held)
      if (q == p.get()) s = hs;
    if (s < 0) s = sim.new_storage(p->type.nbytes());
    sim.define(p.get(), s);
    if (it != saved.end() && moved.insert(p.get()).second) sim.release(s);  // moved, not copied
  }
  sim.note_peak(1, 0, nullptr);
  sim.run_trace(bw, 1);
  sim.finish(bw);
}
}  // namespace

MemReport estimate_memory(const std::vector<const Trace*>& traces, bool describe_peak, size_t (*allocation)(size_t)) {
  Sim sim;
  sim.allocation = allocation;
  walk(sim, traces);
  if (describe_peak && sim.peak_call() > 0) {
    Sim again;  // the same walk, describing what is live at the peak
    again.allocation = allocation;
    again.describe_at(sim.peak_call());
    walk(again, traces);
    sim.rep.peak_stmt = again.rep.peak_stmt;
    sim.rep.peak_live = again.rep.peak_live;
    sim.rep.peak_comm_bytes = again.rep.peak_comm_bytes;
  }
  return sim.rep;
}

}  // namespace tracer::ir
