// The GPU executor's whole-run CUDA graphs (capture, replay), device fills, and the report of
// TRACER_GPU_PROFILE; see cuda_exec.h.
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "codegen/cuda_exec.h"

namespace tracer::codegen {

using rt::cuda::DeviceTensor;

DeviceTensor GpuExecutor::full(const ir::TensorType& t, double value) {
  DeviceTensor out = alloc(t);
  long long n = rt::numel(t.shape);
  if (n == 0) return out;
  SimpleKernel k;
  std::string why;
  if (!generate_fill(t, rt::Scalar{value, static_cast<int64_t>(value), false}, &k, &why))
    throw std::runtime_error("cannot fill a tensor on the GPU: " + why);
  void* fn = compiled(k.source, k.symbol, "full");
  rt::cuda::DevPtr y = out.ptr();
  void* args[] = {&y};
  dev_.launch(fn, static_cast<unsigned>(std::max<long long>(1, std::min<long long>((n + 255) / 256, 65535LL))), 256, args);
  stats_.launches++;
  return out;
}

std::unique_ptr<GpuGraph> GpuExecutor::capture(const std::function<void()>& work, ir::ExecContext& ctx) {
  // Device state the captured work uses is made before the capture (allocations inside it
  // would come from, and go back to, the graph's own blocks).
  if (!rng_base_) rng_base_ = std::make_shared<rt::cuda::Buffer>(&dev_, 16);
  index_errors();
  check_index_errors();
  dev_.synchronize();
  uint64_t start = ctx.rng_offset;
  size_t launches = stats_.launches, gemms = stats_.gemms, gelus = stats_.gelu_epilogues, dgelus = stats_.dgelu_epilogues;
  dev_.begin_capture();
  in_graph_ = true;
  rng_ready_ = true;  // rng_state reads the base that replay() writes
  rng_start_ = start;
  auto leave = [&] {
    in_graph_ = rng_ready_ = false;
    ctx.rng_offset = start;  // nothing ran: the replays draw
    stats_.launches = launches;
    stats_.gemms = gemms;
    stats_.gelu_epilogues = gelus;
    stats_.dgelu_epilogues = dgelus;
  };
  std::unique_ptr<rt::cuda::Graph> g;
  try {
    work();
  } catch (...) {
    index_check_pending_ = false;
    leave();
    dev_.end_capture(false);
    throw;
  }
  uint64_t draws = ctx.rng_offset - start;
  size_t captured_launches = stats_.launches - launches, captured_gemms = stats_.gemms - gemms,
         captured_gelus = stats_.gelu_epilogues - gelus, captured_dgelus = stats_.dgelu_epilogues - dgelus;
  bool checks = index_check_pending_;
  index_check_pending_ = false;
  leave();
  g = dev_.end_capture(true);
  auto out = std::make_unique<GpuGraph>();
  out->graph = std::move(g);
  out->checks_index = checks;
  out->draws = draws;
  out->launches = captured_launches;
  out->gemms = captured_gemms;
  out->gelu_epilogues = captured_gelus;
  out->dgelu_epilogues = captured_dgelus;
  return out;
}

void GpuExecutor::replay_async(GpuGraph& g, ir::ExecContext& ctx) {
  poll_index_errors(false);
  replay(g, ctx);
  read_index_errors_later();
}

void GpuExecutor::replay(GpuGraph& g, ir::ExecContext& ctx) {
  if (g.draws) {
    write_rng_base(ctx);
  }
  dev_.launch_graph(*g.graph);
  if (g.checks_index) index_check_pending_ = true;  // read by check_index_errors()
  ctx.rng_offset += g.draws;
  stats_.launches += g.launches;
  stats_.gemms += g.gemms;
  stats_.gelu_epilogues += g.gelu_epilogues;
  stats_.dgelu_epilogues += g.dgelu_epilogues;
  stats_.graph_launches++;
}


void GpuExecutor::print_profile(std::ostream& out) {
  std::vector<std::pair<std::string, std::pair<double, int>>> rows(profile_table_.begin(), profile_table_.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  double total = 0;
  for (const auto& r : rows) total += r.second.first;
  out << "# GPU profile (device ms, each statement synchronized): total " << total << " ms\n";
  for (const auto& r : rows)
    out << "#   " << r.second.first << " ms  " << r.second.second << "x  " << r.first << "\n";
  if (profile_each_) {
    // The statements by time, with the bandwidth their bytes imply (inputs and outputs once).
    std::stable_sort(profile_rows_.begin(), profile_rows_.end(), [](const ProfileRow& a, const ProfileRow& b) { return a.ms > b.ms; });
    // TRACER_GPU_PROFILE_ROWS sets how many are printed (60 by default, 0 for all).
    size_t limit = 60;
    if (const char* n = std::getenv("TRACER_GPU_PROFILE_ROWS")) limit = std::strtoul(n, nullptr, 10);
    if (limit == 0) limit = profile_rows_.size();
    out << "# statements by device time (ms, MB read+written, GB/s):\n";
    for (size_t k = 0; k < profile_rows_.size() && k < limit; ++k) {
      const ProfileRow& r = profile_rows_[k];
      char buf[96];
      std::snprintf(buf, sizeof buf, "#   %8.3f ms %9.1f MB %7.0f GB/s  ", r.ms, r.bytes / 1e6, r.ms > 0 ? r.bytes / r.ms / 1e6 : 0.0);
      out << buf << r.what << "\n";
    }
  }
  profile_table_.clear();
  profile_rows_.clear();
}

}  // namespace tracer::codegen
