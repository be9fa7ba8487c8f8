// The GPU executor's generated kernels: the on-disk cubin cache (KernelCache), and binding a
// kernel's parameters to the values (donating dying inputs' buffers to outputs) and launching it,
// elementwise, by rows and by columns. See cuda_exec.h.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unordered_set>

#include "codegen/cuda_exec.h"
#include "codegen/cuda_reduce.h"
#include "ir/fusion.h"
#include "runtime/io.h"

namespace tracer::codegen {

namespace fs = std::filesystem;
using rt::cuda::DeviceTensor;
using K = ir::Arg::Kind;
using rt::DType;

// ---------------------------------------------------------------- disk cache

std::string KernelCache::default_dir() {
  if (const char* d = std::getenv("TRACER_CACHE_DIR")) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME")) return std::string(x) + "/tracer/kernels";
  if (const char* h = std::getenv("HOME")) return std::string(h) + "/.cache/tracer/kernels";
  return (fs::temp_directory_path() / "tracer-kernels").string();
}

KernelCache::KernelCache(std::string dir) : dir_(std::move(dir)) {}

namespace {
constexpr char kMagic[8] = {'T', 'R', 'K', 'C', 'U', 'B', '0', '1'};
}

std::string KernelCache::load(const std::string& key) const {
  std::ifstream f(fs::path(dir_) / (key + ".cubin"), std::ios::binary);
  if (!f) return {};
  std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  // magic, 8-byte length, 16 hex digits of the payload's hash, payload
  if (data.size() < 32 || std::memcmp(data.data(), kMagic, 8) != 0) return {};
  uint64_t n = 0;
  std::memcpy(&n, data.data() + 8, 8);
  if (n != data.size() - 32) return {};
  std::string payload = data.substr(32);
  if (hash_hex(payload) != data.substr(16, 16)) return {};
  return payload;
}

void KernelCache::store(const std::string& key, const std::string& cubin) const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return;  // a cache that cannot be written only costs compile time
  std::string data(kMagic, 8);
  uint64_t n = cubin.size();
  data.append(reinterpret_cast<const char*>(&n), 8);
  data += hash_hex(cubin) + cubin;
  std::string err;  // a failed write only costs compile time next run
  rt::write_file_atomically((fs::path(dir_) / (key + ".cubin")).string(), data, &err);
}

// ---------------------------------------------------------------- launches

void GpuExecutor::bind(Prepared& prep, Values& env, const std::unordered_set<const ir::Proxy*>& dying) {
  const Kernel& k = prep.kernel;
  if (!prep.donors_ready) {
    prep.donors = donor_candidates(k.params, 0, k.params.size(), dying);
    prep.donors_ready = true;
  }
  // Scratch kept across launches: the launch path allocates nothing of its own.
  std::vector<rt::cuda::DevPtr>& ptrs = scratch_ptrs_;
  std::vector<DeviceTensor>& outs = scratch_outs_;
  std::vector<const ir::Proxy*>& donors = scratch_donors_;
  ptrs.clear();
  outs.clear();
  donors.clear();
  for (size_t a = 0; a < k.params.size(); ++a) {
    const KernelParam& p = k.params[a];
    if (!p.output) {
      auto it = env.find(p.proxy.get());
      if (it == env.end()) throw std::runtime_error("'" + p.name + "' has no value (deleted or never defined)");
      if (transposed_.count(p.proxy.get())) throw std::runtime_error("'" + p.name + "' is a lazy transpose read by a kernel");
      ptrs.push_back(it->second.ptr());
      continue;
    }
    // An argument that dies here, whose buffer nobody else holds, with the output's type.
    const int64_t b = prep.donors[a].empty() ? -1 : pick_donor(prep.donors[a], k.params, env, [&](uint32_t c) {
      return std::find(donors.begin(), donors.end(), k.params[c].proxy.get()) != donors.end();
    });
    const ir::Proxy* donor = b < 0 ? nullptr : k.params[static_cast<size_t>(b)].proxy.get();
    DeviceTensor o;
    if (donor) {
      donors.push_back(donor);
      o = env.at(donor);
      o.dtype = p.type.dtype;
      o.shape = p.type.shape;
    } else {
      o = alloc(p.type);
    }
    ptrs.push_back(o.ptr());
    outs.push_back(std::move(o));
  }
}

GpuExecutor::DonorCandidates GpuExecutor::donor_candidates(const std::vector<KernelParam>& params, size_t begin, size_t end,
                                                           const std::unordered_set<const ir::Proxy*>& dying) {
  DonorCandidates out(params.size());
  if (dying.empty()) return out;
  for (size_t a = begin; a < end; ++a) {
    const KernelParam& p = params[a];
    if (!p.output || !p.may_alias) continue;
    const int64_t n = rt::numel(p.type.shape);
    for (size_t b = begin; b < end; ++b) {
      const KernelParam& q = params[b];
      // Only pairs the kernel declares without __restrict__ (alias_candidates) may share memory.
      if (q.output || !q.may_alias || q.type.dtype != p.type.dtype || !dying.count(q.proxy.get()) ||
          rt::numel(q.type.shape) != n)
        continue;
      out[a].push_back(static_cast<uint32_t>(b));
    }
  }
  return out;
}

void GpuExecutor::bind_outputs(const Kernel& k, Values& env) {
  for (const ir::Proxy* d : scratch_donors_) env.erase(d);
  size_t j = 0;
  for (const KernelParam& p : k.params)
    if (p.output) env[p.proxy.get()] = std::move(scratch_outs_[j++]);
  scratch_outs_.clear();
}

void GpuExecutor::run_kernel(const ir::Stmt& s, Values& env, const std::unordered_set<const ir::Proxy*>& dying) {
  auto kit = kernels_.find(&s);
  if (kit == kernels_.end()) {
    Prepared prep;
    prep.kernel = generate_elementwise(s, "k", alias_candidates(s, dying));
    prep.fn = kernel_function(prep.kernel);
    kit = kernels_.emplace(&s, std::move(prep)).first;
  }
  const Kernel& k = kit->second.kernel;
  bind(kit->second, env, dying);
  std::vector<void*>& args = scratch_args_;
  args.clear();
  long long n = k.elements;
  // The vector path where every tensor it reads or writes 16 bytes at a time is 16-byte aligned
  // (KernelParam::vector); one-element and broadcast inputs may sit anywhere.
  int vec_ok = 1;
  for (size_t j = 0; j < k.params.size() && j < scratch_ptrs_.size(); ++j)
    if ((k.params[j].vector || rt::numel(k.params[j].type.shape) == k.elements) && scratch_ptrs_[j] % 16 != 0) vec_ok = 0;
  for (auto& q : scratch_ptrs_) args.push_back(&q);
  args.push_back(&n);
  args.push_back(&vec_ok);
  long long units = vec_ok ? n / k.vector_width + n % k.vector_width : n;
  long long blocks = std::max<long long>(1, std::min<long long>((units + 255) / 256, 16LL * dev_.sm_count()));
  dev_.launch(kit->second.fn, static_cast<unsigned>(blocks), 256, args.data());
  stats_.launches++;
  bind_outputs(k, env);
}

void GpuExecutor::run_row_kernel(const ir::Stmt& s, Values& env, const std::unordered_set<const ir::Proxy*>& dying) {
  auto kit = kernels_.find(&s);
  if (kit == kernels_.end()) {
    Prepared prep;
    prep.kernel = generate_row(s, "k", alias_candidates(s, dying), dev_.max_shared_per_block());
    prep.fn = kernel_function(prep.kernel);
    if (prep.kernel.row_columns) prep.fn2 = compiled(prep.kernel.structure, prep.kernel.symbol2, prep.kernel.name);
    kit = kernels_.emplace(&s, std::move(prep)).first;
  }
  const Kernel& k = kit->second.kernel;
  bind(kit->second, env, dying);
  std::vector<rt::cuda::DevPtr>& ptrs = scratch_ptrs_;
  std::vector<void*>& args = scratch_args_;
  args.clear();
  long long rows = k.rows;
  // Vector accesses need every row-shaped tensor 16-byte aligned (rows then are too: the
  // generator vectorizes only when the vector width divides the row).
  int vec_ok = 1;
  for (size_t j = 0; j < k.params.size(); ++j)
    if ((k.row_cached || rt::numel(k.params[j].type.shape) == k.elements) && ptrs[j] % 16 != 0) vec_ok = 0;
  for (auto& q : ptrs) args.push_back(&q);
  args.push_back(&rows);
  args.push_back(&vec_ok);
  if (k.row_columns) {
    // With reductions over the columns: the blocks take fixed chunks of rows and write partials
    // (stream ordered: freed to the allocator's cache after the launches are queued), which the
    // second kernel combines, 32 columns a block.
    rt::cuda::Buffer partial(&dev_, static_cast<size_t>(std::max<int64_t>(k.partials, 1)) * sizeof(double));
    rt::cuda::DevPtr pp = partial.ptr;
    args.push_back(&pp);
    dev_.launch(kit->second.fn, static_cast<unsigned>(k.column_chunks), 1, 256, static_cast<unsigned>(k.shared_bytes), args.data());
    dev_.launch(kit->second.fn2, static_cast<unsigned>(std::max<int64_t>(1, (k.row_length + 31) / 32)), 256, args.data());
    stats_.launches += 2;
    bind_outputs(k, env);
    return;
  }
  if (rows > 0) {
    long long blocks = k.row_lanes == 32 ? (rows + 7) / 8 : rows;
    unsigned grid = static_cast<unsigned>(std::min<long long>(blocks, 1LL << 30));
    if (k.shared_bytes > 0)
      dev_.launch(kit->second.fn, grid, 1, 256, static_cast<unsigned>(k.shared_bytes), args.data());
    else
      dev_.launch(kit->second.fn, grid, 256, args.data());
    stats_.launches++;
  }
  bind_outputs(k, env);
}

void GpuExecutor::run_column_kernel(const ir::Stmt& s, Values& env, const std::unordered_set<const ir::Proxy*>& dying) {
  auto kit = kernels_.find(&s);
  if (kit == kernels_.end()) {
    Prepared prep;
    prep.kernel = generate_columns(s, "k", alias_candidates(s, dying));
    prep.fn = compiled(prep.kernel.structure, prep.kernel.symbol, prep.kernel.name);
    prep.fn2 = compiled(prep.kernel.structure, prep.kernel.symbol2, prep.kernel.name);
    kit = kernels_.emplace(&s, std::move(prep)).first;
  }
  const Kernel& k = kit->second.kernel;
  bind(kit->second, env, dying);
  // The partials: one double per chunk of rows, reduction and column (stream ordered: freed
  // to the allocator's cache after the launches are queued, reused only by later work).
  rt::cuda::Buffer partial(&dev_, static_cast<size_t>(std::max<int64_t>(k.partials, 1)) * sizeof(double));
  std::vector<void*>& args = scratch_args_;
  args.clear();
  rt::cuda::DevPtr pp = partial.ptr;
  for (auto& q : scratch_ptrs_) args.push_back(&q);
  args.push_back(&pp);
  // Vector accesses where every full-shape pointer is 16-byte aligned (a view's offset may not be).
  int vec_ok = 1;
  for (size_t j = 0; j < k.params.size() && j < scratch_ptrs_.size(); ++j)
    if ((k.params[j].vector || rt::numel(k.params[j].type.shape) == k.elements) && scratch_ptrs_[j] % 16 != 0) vec_ok = 0;
  args.push_back(&vec_ok);
  const int64_t per_block = k.column_block * std::max(1, k.vector_width);
  unsigned gx = static_cast<unsigned>((k.row_length + per_block - 1) / per_block);
  dev_.launch(kit->second.fn, gx, static_cast<unsigned>(k.column_chunks), 256, 0, args.data());
  // The second kernel: 32 columns a block (cuda_columns.cpp), every column covered; one block
  // for a folded column.
  dev_.launch(kit->second.fn2, k.column_fold ? 1u : static_cast<unsigned>(std::max<int64_t>(1, (k.row_length + 31) / 32)), 256, args.data());
  stats_.launches += 2;
  bind_outputs(k, env);
}

}  // namespace tracer::codegen
