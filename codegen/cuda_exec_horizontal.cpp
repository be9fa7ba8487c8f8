// Horizontal fusion in the GPU executor (docs/codegen.md, "Horizontal kernels"): a run of
// independent elementwise groups, as an optimizer's update of each parameter or a clipping's
// scale of each gradient is, launched as one kernel (codegen::generate_elementwise_multi); and a
// run of independent column groups whose outputs are reduced values, as a gradient norm's sum of
// squares of each parameter is, launched as one pair of kernels (generate_columns_multi).
//
// A run starts at an elementwise fusion and takes the fusions after it, dels between them
// allowed, until a statement of another kind, a fusion that reads an earlier member's output,
// 512 members (64 for column runs), 64 codes of members (each code's segment function is
// compiled once) or the kernel parameters' limit (max_param_bytes: 32000 bytes from CUDA 12.1 on
// sm_70+, else about 3.5 KiB). Buffers are taken as the members would take
// them one by one (an output over a dying input of its own member), with two differences that
// the rules below make harmless:
//   - every member runs at once, so an output never takes a buffer another member reads;
//   - the dels between members run after the launch, so a buffer they free could not be reused
//     by a later member: where a later member would allocate after such a free, the run is not
//     grouped (the peak, and `tracer mem`'s estimate of it, stay as they were).
#include <algorithm>
#include <cstdlib>
#include <iterator>

#include "codegen/cuda_exec.h"
#include "ir/fusion.h"

namespace tracer::codegen {

using rt::cuda::DeviceTensor;

namespace {
constexpr size_t kMaxMembers = 64;  // column runs (the kernels' vec_mask has a bit per member)
constexpr size_t kMaxKinds = 64;    // codes of members in one elementwise run
// Elementwise runs: up to 512 members (a 64-bit mask word each 64), within the argument block's
// limit; TRACER_HZ_MAX_MEMBERS=N sets fewer. Members of the same code share one segment
// function, so the count no longer multiplies NVRTC's work. GPT-2 small's AdamW update as one
// kernel of 148 members took 0.706 ms a step on an H100 against 0.731 as three of 64 (session 24).
size_t max_elementwise_members() {
  static const size_t n = [] {
    const char* e = std::getenv("TRACER_HZ_MAX_MEMBERS");
    const long v = e ? std::atol(e) : 0;
    return v >= 2 && v <= 512 ? static_cast<size_t>(v) : size_t{512};
  }();
  return n;
}

void reads_of(const ir::Stmt& s, std::unordered_set<const ir::Proxy*>& out) {
  for (const ir::Arg& a : s.args) ir::for_each_proxy(a, [&](const ir::ProxyPtr& p) { out.insert(p.get()); });
}
}  // namespace

std::shared_ptr<GpuExecutor::Horizontal> GpuExecutor::plan_horizontal(const std::vector<ir::Stmt>& stmts, size_t i,
                                                                       const std::unordered_set<const ir::Proxy*>& lazy) {
  // Per param: whether its member reads or writes it 16 bytes at a time (full size, or a vector
  // view). An optimizer's one-element coefficients, views at 8-byte offsets, are not: counting
  // them sent every member down the scalar path, half the copy bandwidth on an H100.
  auto fill_vector_access = [](Horizontal& h) {
    h.vector_access.assign(h.kernel.params.size(), 0);
    size_t q = 0;
    for (size_t m = 0; m < h.kernel.segment_params.size(); ++m) {
      const size_t n = static_cast<size_t>(h.kernel.segment_params[m]);
      for (size_t a = q; a < q + n; ++a)
        h.vector_access[a] = h.kernel.params[a].vector || rt::numel(h.kernel.params[a].type.shape) == h.kernel.segment_elements[m];
      q += n;
    }
  };
  // 1: an elementwise member, 3: a column member, 0: neither. A run takes members of one kind.
  auto kind_of = [&](const ir::Stmt& s) {
    if (s.kind != ir::StmtKind::Fusion || view_fusions_->count(&s)) return 0;
    for (const auto& o : s.outputs)
      if (lazy.count(o.get())) return 0;
    auto pk = is_group_.find(&s);
    if (pk == is_group_.end())
      pk = is_group_.emplace(&s, is_elementwise_group(s) ? 1 : is_row_group(s) ? 2 : is_column_group(s) ? 3 : 0).first;
    if (pk->second == 1) return 1;
    if (pk->second != 3) return 0;
    auto cm = column_member_.find(&s);
    if (cm == column_member_.end()) cm = column_member_.emplace(&s, is_horizontal_column_member(s)).first;
    return cm->second ? 3 : 0;
  };
  const int kind = kind_of(stmts[i]);
  if (!kind) return nullptr;
  auto is_member = [&](const ir::Stmt& s) { return kind_of(s) == kind; };
  auto h = std::make_shared<Horizontal>();
  h->columns = kind == 3;
  std::unordered_set<const ir::Proxy*> written;
  const size_t max_members = kind == 3 ? kMaxMembers : max_elementwise_members();
  size_t param_bytes = 8 * ((max_members + 63) / 64);  // the vec_mask words
  for (size_t j = i; j < stmts.size() && h->members.size() < max_members; ++j) {
    const ir::Stmt& s = stmts[j];
    if (s.kind == ir::StmtKind::Del) continue;
    if (!is_member(s)) break;
    std::unordered_set<const ir::Proxy*> reads;
    reads_of(s, reads);
    bool depends = false;
    for (const ir::Proxy* r : reads) depends = depends || written.count(r);
    if (depends) break;
    size_t bytes = 8 * (reads.size() + s.outputs.size());
    if (param_bytes + bytes > max_param_bytes()) break;
    param_bytes += bytes;
    h->members.push_back(j);
    for (const auto& o : s.outputs) written.insert(o.get());
  }
  if (h->members.size() < 2) return nullptr;
  if (h->columns) {
    std::vector<const ir::Stmt*> ms;
    for (size_t m : h->members) ms.push_back(&stmts[m]);
    h->kernel = generate_columns_multi(ms, "horizontal_columns");
    h->fn = compiled(h->kernel.structure, h->kernel.symbol, h->kernel.name);
    h->fn2 = compiled(h->kernel.structure, h->kernel.symbol2, h->kernel.name);
    h->donors.resize(h->kernel.params.size());
    fill_vector_access(*h);  // (as run_column_kernel's vec_ok)
    return h;
  }
  // Each member's donors: its dying inputs that no other member reads (they run at once).
  std::vector<std::unordered_set<const ir::Proxy*>> reads(h->members.size());
  for (size_t m = 0; m < h->members.size(); ++m) reads_of(stmts[h->members[m]], reads[m]);
  std::vector<const ir::Stmt*> ms;
  for (size_t m = 0; m < h->members.size(); ++m) {
    std::unordered_set<const ir::Proxy*> dying;
    ir::dying_after(stmts, h->members[m], dying);
    for (auto it = dying.begin(); it != dying.end();) {
      bool shared = false;
      for (size_t o = 0; o < h->members.size() && !shared; ++o) shared = o != m && reads[o].count(*it);
      it = shared ? dying.erase(it) : std::next(it);
    }
    h->dying.push_back(std::move(dying));
    ms.push_back(&stmts[h->members[m]]);
  }
  std::vector<std::unordered_set<const ir::Proxy*>> may_alias;
  for (size_t m = 0; m < ms.size(); ++m) may_alias.push_back(alias_candidates(*ms[m], h->dying[m]));
  h->kernel = generate_elementwise_multi(ms, "horizontal", may_alias, dev_.sm_count());
  // At most kMaxKinds codes: members of many different codes would each be compiled (inlined)
  // again, as before members shared code; the run ends before the member of code kMaxKinds + 1.
  if (h->kernel.segment_kinds > static_cast<int>(kMaxKinds)) {
    size_t keep = 0;
    while (keep < h->kernel.segment_kind.size() && h->kernel.segment_kind[keep] < static_cast<int>(kMaxKinds)) ++keep;
    if (keep < 2) return nullptr;
    h->members.resize(keep);
    h->dying.resize(keep);
    ms.resize(keep);
    may_alias.resize(keep);
    h->kernel = generate_elementwise_multi(ms, "horizontal", may_alias, dev_.sm_count());
  }
  h->fn = kernel_function(h->kernel);
  h->donors.resize(h->kernel.params.size());
  fill_vector_access(*h);
  size_t q = 0;
  for (size_t m = 0; m < ms.size(); ++m) {
    const size_t n = static_cast<size_t>(h->kernel.segment_params[m]);
    DonorCandidates d = donor_candidates(h->kernel.params, q, q + n, h->dying[m]);
    for (size_t a = q; a < q + n; ++a) h->donors[a] = std::move(d[a]);
    q += n;
  }
  return h;
}

size_t GpuExecutor::max_param_bytes() const {
  // 32,764 bytes from CUDA 12.1's driver on Volta and later (less room for the vec_mask and
  // slack); 4,096 before.
  return dev_.driver_version() >= 12010 && dev_.compute_major() >= 7 ? 32000 : 3584;
}

bool GpuExecutor::run_horizontal(const std::vector<ir::Stmt>& stmts, size_t i, Values& env, ir::ExecContext& ctx,
                                 const std::unordered_set<const ir::Proxy*>& lazy, size_t* next) {
  auto pit = horizontal_.find(&stmts[i]);
  if (pit == horizontal_.end()) {
    std::shared_ptr<Horizontal> plan;
    try {
      plan = plan_horizontal(stmts, i, lazy);
    } catch (const std::exception&) {
      plan = nullptr;  // (a member that cannot be generated as a segment runs alone)
    }
    pit = horizontal_.emplace(&stmts[i], std::move(plan)).first;
  }
  if (!pit->second) return false;
  Horizontal& h = *pit->second;
  const Kernel& k = h.kernel;
  // Dry run: every input present and packed, each output's donor, and whether a later member
  // would allocate after a del between members freed a buffer (then the run is not grouped).
  // donors[a]: output param a's donor (null: a new buffer). A member's donors die right after
  // it and no other member reads them, so "taken" is a question within the member.
  std::vector<const ir::Proxy*>& donors = scratch_donors_;
  donors.assign(k.params.size(), nullptr);
  std::vector<rt::cuda::DevPtr>& ptrs = scratch_ptrs_;  // the inputs' pointers, taken here
  ptrs.assign(k.params.size(), 0);
  std::vector<char>& taken_by = scratch_taken_;  // by input param: its buffer went to an output
  taken_by.assign(k.params.size(), 0);
  const bool any_transposed = !transposed_.empty();
  std::vector<const ir::Proxy*> taken;  // a member's donors, sorted
  bool freed = false;
  // Column members allocate only small outputs: grouped, they could not take a freed buffer
  // only where one of the same rounded size was freed between the members (the allocator reuses
  // blocks by exact rounded size), so those sizes are what is checked.
  std::unordered_set<size_t> freed_sizes;
  size_t q = 0;  // k.params index
  for (size_t m = 0; m < h.members.size(); ++m) {
    const size_t n = static_cast<size_t>(k.segment_params[m]);
    bool allocates = false;
    for (size_t a = q; a < q + n; ++a) {
      const KernelParam& p = k.params[a];
      if (!p.output) {
        auto it = env.find(p.proxy.get());
        if (it == env.end() || (any_transposed && transposed_.count(p.proxy.get())) || !it->second.layout.empty()) return false;
        ptrs[a] = it->second.ptr();
        continue;
      }
      const int64_t b = h.donors[a].empty() ? -1 : pick_donor(h.donors[a], k.params, env, [&](uint32_t c) { return taken_by[c] != 0; });
      if (b >= 0) taken_by[static_cast<size_t>(b)] = 1;
      allocates = allocates || b < 0;
      donors[a] = b < 0 ? nullptr : k.params[static_cast<size_t>(b)].proxy.get();
      if (h.columns && freed_sizes.count(rt::cuda::allocation_size(rt::numel(p.type.shape) * rt::dtype_size(p.type.dtype)))) return false;
    }
    if (allocates && freed && !h.columns) return false;
    // The dels after this member (before the next): do they free a buffer (one not taken)?
    taken.clear();
    for (size_t a = q; a < q + n; ++a)
      if (donors[a]) taken.push_back(donors[a]);
    std::sort(taken.begin(), taken.end());
    const size_t end = m + 1 < h.members.size() ? h.members[m + 1] : h.members[m] + 1;
    for (size_t d = h.members[m] + 1; d < end && (!freed || h.columns); ++d)
      for (const auto& x : stmts[d].deleted) {
        auto it = env.find(x.get());
        if (it == env.end() || !it->second.buffer || it->second.buffer.use_count() != 1) continue;
        if (std::binary_search(taken.begin(), taken.end(), x.get())) continue;
        freed = true;
        if (h.columns) freed_sizes.insert(rt::cuda::allocation_size(it->second.buffer->bytes));
      }
    q += n;
  }
  // Bind the outputs (the inputs' pointers were taken above): a donor's entry is moved over to
  // its output (the node re-keyed, nothing allocated), else a new buffer. Then one launch.
  for (size_t a = 0; a < k.params.size(); ++a) {
    const KernelParam& p = k.params[a];
    if (!p.output) continue;
    if (const ir::Proxy* d = donors[a]) {
      auto node = env.extract(d);
      node.key() = p.proxy.get();
      node.mapped().dtype = p.type.dtype;
      node.mapped().shape = p.type.shape;
      ptrs[a] = node.mapped().ptr();
      env.insert(std::move(node));
    } else {
      DeviceTensor t = alloc(p.type);
      ptrs[a] = t.ptr();
      env[p.proxy.get()] = std::move(t);
    }
  }
  // A bit per member (a word each 64; one word up to 64 members, the column kernels' limit).
  unsigned long long* vec_mask = scratch_masks_;
  std::fill(std::begin(scratch_masks_), std::end(scratch_masks_), 0ULL);
  q = 0;
  for (size_t m = 0; m < h.members.size(); ++m) {
    const size_t n = static_cast<size_t>(k.segment_params[m]);
    // (as a single kernel's: the tensors it reads or writes 16 bytes at a time)
    bool aligned = true;
    for (size_t a = q; a < q + n; ++a)
      if (h.vector_access[a]) aligned = aligned && ptrs[a] % 16 == 0;
    if (aligned) vec_mask[m / 64] |= 1ULL << (m % 64);
    q += n;
  }
  std::vector<void*>& args = scratch_args_;
  args.clear();
  for (auto& p : ptrs) args.push_back(&p);
  if (h.columns) {
    // One partials buffer for every member (stream ordered: back to the cache once queued).
    rt::cuda::Buffer partial(&dev_, static_cast<size_t>(std::max<int64_t>(k.partials, 1)) * sizeof(double));
    rt::cuda::DevPtr pp = partial.ptr;
    args.push_back(&pp);
    args.push_back(&vec_mask[0]);
    dev_.launch(h.fn, static_cast<unsigned>(k.blocks), 256, args.data());
    dev_.launch(h.fn2, static_cast<unsigned>(k.blocks2), 256, args.data());
    stats_.launches += 2;
  } else {
    // One argument: the pointers, then the mask words, as 64-bit words in a row.
    std::vector<unsigned long long>& block = scratch_arg_block_;
    block.assign(ptrs.begin(), ptrs.end());
    if (block.empty()) block.push_back(0);
    block.insert(block.end(), vec_mask, vec_mask + (h.members.size() + 63) / 64);
    void* one[] = {block.data()};
    dev_.launch(h.fn, static_cast<unsigned>(k.blocks), 256, one);
    stats_.launches++;
  }
  stats_.horizontal_members += h.members.size();
  // The dels between the members, now that the kernel has been issued (stream order keeps what
  // they free from being reused before it has run).
  std::unordered_set<const ir::Proxy*> none;
  for (size_t d = h.members.front() + 1; d < h.members.back(); ++d)
    if (stmts[d].kind == ir::StmtKind::Del) run_stmt(stmts[d], env, ctx, none, lazy);
  *next = h.members.back() + 1;
  return true;
}

}  // namespace tracer::codegen
