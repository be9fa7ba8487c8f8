// The distributed passes against one process (docs/distributed.md, "Passes"): each case runs a
// file once alone (`tracer run --passes grad`) and once on N CPU ranks (`tracer launch --nproc N
// -- run --passes grad,...`), each rank writing its outputs (--output DIR: DIR/rankR/NAME.npy),
// and puts the ranks' pieces back together as each output's distribution says: a slice of the
// whole along dim 0 (padded up to a multiple of N), this rank's rows of the global batch, or
// the same on every rank. The single process draws the whole tensors the ranks draw pieces of
// (per-rank and sharded random inputs are the rank's part of one stream: api/session.cpp).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <filesystem>
#include <map>
#include <regex>
#include <string>

#include "runtime/io.h"
#include "tracer/session.h"
#include "runtime/kernels.h"
#include "tests/support.h"

#ifndef TRACER_CLI_PATH
#define TRACER_CLI_PATH "tracer"
#endif

namespace {

using tracer::rt::Tensor;
using tracer::test::source_dir;

std::string tmp_dir(const std::string& name) {
  std::string d = (std::filesystem::temp_directory_path() / ("tracer_dist_" + std::to_string(::getpid()) + "_" + name)).string();
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// Runs `tracer ARGS` in the source tree; returns its status, its output in *log.
int run_tracer(const std::string& args, std::string* log) {
  std::string out = tmp_dir("log") + "/log.txt";
  std::string cmd = "cd '" + source_dir() + "' && '" + std::string(TRACER_CLI_PATH) + "' " + args + " > '" + out + "' 2>&1";
  int rc = std::system(cmd.c_str());
  std::FILE* f = std::fopen(out.c_str(), "r");
  log->clear();
  if (f) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) log->append(buf, n);
    std::fclose(f);
  }
  return rc;
}

enum class Piece { same, mean, rows, shard0, shard1 };

Tensor as_f64(const Tensor& t) { return tracer::rt::cast(t, tracer::rt::DType::f64, nullptr); }

// The ranks' outputs NAME put back together: the same on every rank (checked: bitwise), rows of
// the global batch (concatenated), or dim-0 slices of one tensor of `rows` rows (concatenated,
// the padding cut off).
Tensor assemble(const std::string& dir, const std::string& name, int n, Piece how, int64_t rows) {
  std::vector<Tensor> parts;
  for (int r = 0; r < n; ++r) parts.push_back(tracer::rt::read_npy(dir + "/rank" + std::to_string(r) + "/" + name + ".npy"));
  if (how == Piece::same) {
    for (int r = 1; r < n; ++r) {
      INFO(name << ": rank " << r << " differs from rank 0");
      REQUIRE(parts[static_cast<size_t>(r)].nbytes() == parts[0].nbytes());
      REQUIRE(std::memcmp(parts[static_cast<size_t>(r)].data(), parts[0].data(), parts[0].nbytes()) == 0);
    }
    return parts[0];
  }
  if (how == Piece::mean) {
    Tensor m = as_f64(parts[0]);
    for (int r = 1; r < n; ++r) {
      Tensor x = as_f64(parts[static_cast<size_t>(r)]);
      for (int64_t k = 0; k < m.numel(); ++k) m.set(k, m.get(k) + x.get(k));
    }
    for (int64_t k = 0; k < m.numel(); ++k) m.set(k, m.get(k) / n);
    return m;
  }
  Tensor all = tracer::rt::cat(parts, how == Piece::shard1 ? 1 : 0, nullptr);
  if (how == Piece::rows || how == Piece::shard1) return all;
  std::vector<int64_t> lo(all.shape().size(), 0), hi(all.shape().begin(), all.shape().end()), step(lo.size(), 1);
  hi[0] = rows;
  return tracer::rt::slice(all, lo, hi, step, nullptr);
}

// The largest difference between a / over and b, relative to b's largest magnitude (1 if that
// is below 1).
double rel_diff(const Tensor& a, const Tensor& b, double over) {
  REQUIRE(a.shape() == b.shape());
  Tensor x = as_f64(a), y = as_f64(b);
  double worst = 0, scale = 1;
  for (int64_t k = 0; k < y.numel(); ++k) scale = std::max(scale, std::fabs(y.get(k)));
  for (int64_t k = 0; k < y.numel(); ++k) worst = std::max(worst, std::fabs(x.get(k) / over - y.get(k)));
  return worst / scale;
}

bool bitwise(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

struct Expect {
  std::string name;
  Piece how;
  double scale = 1;  // the single process's value times this is what the ranks put together give
};

// Runs file alone and on n ranks with passes; compares every expected output; returns the worst
// relative difference (0 when bitwise equal).
double compare(const std::string& file, const std::string& passes, int n, const std::vector<Expect>& outs, const std::string& tag,
               const std::string& extra = "") {
  std::string one = tmp_dir(tag + "_one"), many = tmp_dir(tag + "_many"), log;
  INFO(file << " alone");
  REQUIRE(run_tracer("run " + file + extra + " --passes grad --output '" + one + "'", &log) == 0);
  INFO(log);
  INFO(file << " on " << n << " ranks with " << passes);
  int rc = run_tracer("launch --nproc " + std::to_string(n) + " -- run " + file + extra + " --passes '" + passes + "' --output '" + many + "'", &log);
  INFO(log);
  REQUIRE(rc == 0);
  double worst = 0;
  for (const Expect& e : outs) {
    Tensor ref = tracer::rt::read_npy(one + "/" + e.name + ".npy");
    Tensor got = assemble(many, e.name, n, e.how, ref.shape().empty() ? 1 : ref.shape()[0]);
    double d = e.scale == 1 && bitwise(got, ref) ? 0.0 : rel_diff(got, ref, e.scale);
    INFO(e.name << ": largest relative difference " << d);
    CHECK(d <= 2e-6);
    worst = std::max(worst, d);
  }
  std::filesystem::remove_all(one);
  std::filesystem::remove_all(many);
  return worst;
}

// tracer mem's estimate for rank 0 of n, of file with sizes set, after passes (without running).
tracer::MemoryReport estimate_rank0(const std::string& file, const std::vector<std::pair<std::string, std::string>>& sets, int n,
                                    const std::string& passes) {
  tracer::SessionOptions so;
  so.world_size = n;
  tracer::Session s(so);
  for (const auto& [k, v] : sets) s.set(k, v);
  REQUIRE(s.load_file(source_dir() + "/" + file));
  REQUIRE(s.set_passes(tracer::split_passes(passes)));
  auto m = s.memory("main", "cpu");
  INFO(s.rendered_diagnostics());
  REQUIRE(m);
  return *m;
}

}  // namespace

TEST_CASE("fsdp (ZeRO-2 and ZeRO-3) gives one process's gradients of the whole batch, on 2 and 4 ranks", "[dist]") {
  // Each rank's loss is the mean over its rows; their average is the whole batch's mean. The
  // gradient of x is each rank's rows of the whole batch's, times N (a mean over fewer rows).
  for (int n : {2, 4}) {
    for (const char* passes : {"grad,fsdp", "grad,fsdp(zero=3, prefetch=1)", "grad,fsdp(zero=3),remat,fuse,del_last_used"}) {
      std::vector<Expect> outs = {{"loss", Piece::mean}, {"grad_w1", Piece::shard0}, {"grad_b1", Piece::shard0}, {"grad_w2", Piece::shard0},
                                  {"grad_x", Piece::rows, static_cast<double>(n)}};
      compare("tests/dist/fsdp.trace", passes, n, outs, "fsdp" + std::to_string(n));
    }
  }
}

TEST_CASE("fsdp with the same data on every rank equals one process bit for bit", "[dist]") {
  for (int n : {2, 4}) {
    for (const char* passes : {"grad,fsdp", "grad,fsdp(zero=3)"}) {
      std::vector<Expect> outs = {{"loss", Piece::same}, {"grad_w", Piece::shard0}, {"grad_v", Piece::shard0}, {"grad_x", Piece::shard0}};
      CHECK(compare("tests/dist/fsdp_replicated.trace", passes, n, outs, "fsdp_rep" + std::to_string(n)) == 0.0);
    }
  }
}

TEST_CASE("shard slices the replicated saved tensors and gathers them back: gradients bit for bit", "[dist]") {
  // Every activation of this file is replicated (the same data on every rank): shard slices each
  // saved one (dims 0 and 1, padded where none divides); alone, after fsdp (the gathered
  // weights), and under remat, fuse and del_last_used.
  for (int n : {2, 4}) {
    for (const char* passes : {"grad,shard(every=True)", "grad,shard(prefetch=2, every=True),remat,fuse,del_last_used",
                               "grad,fsdp,shard(every=True),del_last_used"}) {
      bool fsdp = std::string(passes).find("fsdp") != std::string::npos;
      Piece grads = fsdp ? Piece::shard0 : Piece::same;
      std::vector<Expect> outs = {{"loss", Piece::same}, {"grad_w", grads}, {"grad_v", grads}, {"grad_x", grads}};
      CHECK(compare("tests/dist/fsdp_replicated.trace", passes, n, outs, "shard_rep" + std::to_string(n)) == 0.0);
    }
  }
  // Data parallel with fsdp(zero=2): the gathered weights are the replicated saved tensors.
  std::vector<Expect> outs = {{"loss", Piece::mean}, {"grad_w1", Piece::shard0}, {"grad_b1", Piece::shard0}, {"grad_w2", Piece::shard0},
                              {"grad_x", Piece::rows, 2.0}};
  compare("tests/dist/fsdp.trace", "grad,fsdp,shard,remat,fuse,del_last_used", 2, outs, "shard_fsdp");
}

TEST_CASE("tracer mem per rank: shard removes at least (N-1)/N of the replicated saved bytes, and the peak falls by at least 90% of that", "[dist]") {
  // examples/llama_mlp_fsdp.trace, small, under fsdp (ZeRO-2: the gathered weights are saved,
  // replicated) with and without shard, estimated for rank 0 of N without running.
  for (int n : {2, 4}) {
    auto estimate = [&](const std::string& passes) {
      return estimate_rank0("examples/llama_mlp_fsdp.trace", {{"T", "64"}, {"L", "3"}, {"D", "128"}, {"H", "352"}}, n, passes);
    };
    tracer::MemoryReport without = estimate("grad,fsdp,del_last_used");
    tracer::MemoryReport with = estimate("grad,fsdp,shard,del_last_used");
    INFO(n << " ranks: peak " << without.peak_bytes << " -> " << with.peak_bytes << ", replicated saved " << without.saved_replicated_bytes);
    CHECK(without.world_size == n);
    // The gathered weights: 3 blocks of 2 * [352, 128] + [128, 352] bf16.
    CHECK(without.saved_replicated_bytes == 3u * 3u * 352u * 128u * 2u);
    // shard may leave a weight whole that the backward gathers by its peak (it saves nothing
    // there); most are sliced.
    CHECK(with.saved_replicated_bytes <= without.saved_replicated_bytes / 4);
    // What is saved instead is each weight's slice, which this rank holds already (the fsdp
    // input): nothing is copied, and the saved bytes fall by all of those sliced.
    CHECK(with.saved_sharded_bytes == 0);
    CHECK(with.saved_for_backward_bytes == without.saved_for_backward_bytes - (without.saved_replicated_bytes - with.saved_replicated_bytes));
    CHECK(with.saved_per_rank_bytes == without.saved_per_rank_bytes);
    const double sliced = static_cast<double>(without.saved_replicated_bytes - with.saved_replicated_bytes) * (n - 1) / n;
    CHECK(static_cast<double>(without.peak_bytes) - static_cast<double>(with.peak_bytes) >= 0.9 * sliced);
    CHECK(with.comm_peak_bytes > 0);
  }
}

TEST_CASE("tp (column- and row-parallel linears) gives one process's loss and gradients, on 2 and 4 ranks", "[dist]") {
  // The loss counts once: every rank's loss, and the gradients of the replicated inputs, are the
  // single process's; each rank has its slices of the sharded weights' gradients. With shard,
  // the normed input of the column-parallel linears (replicated, saved) keeps 1/N.
  for (int n : {2, 4}) {
    for (const char* passes : {"tp,grad", "tp,grad,shard(every=True),remat,fuse,del_last_used",
                               "tp,grad,checkpoint,shard(prefetch=2),del_last_used"}) {
      std::vector<Expect> outs = {{"loss", Piece::same},         {"grad_x", Piece::same},      {"grad_g_0", Piece::same},
                                  {"grad_fc1_0", Piece::shard0}, {"grad_b1_0", Piece::shard0}, {"grad_fc2_0", Piece::shard0},
                                  {"grad_proj_0", Piece::shard1}, {"grad_pb_0", Piece::same}};
      compare("tests/dist/tp.trace", passes, n, outs, "tp" + std::to_string(n));
    }
  }
  // Three blocks, odd sizes elsewhere (T = 7 tokens, D = 6), the last block's weights too.
  std::vector<Expect> outs = {{"loss", Piece::same}, {"grad_x", Piece::same}, {"grad_fc1_2", Piece::shard0},
                              {"grad_proj_2", Piece::shard1}, {"grad_g_1", Piece::same}, {"grad_b1_0", Piece::shard0}};
  compare("tests/dist/tp.trace", "tp,grad,shard(every=True),fuse,del_last_used", 2, outs, "tp_l3", " --set L=3 --set T=7 --set D=6");
}

TEST_CASE("tracer mem per rank: shard slices tp's replicated activations to 1/N", "[dist]") {
  // Under tp, the normed input of the column-parallel linears and the residual stream are the
  // same on every rank and saved: shard keeps 1/N of each (local_shard copies, not inputs). Of 8
  // blocks, the one whose tensors the backward gathers first is whole at the peak.
  for (int n : {2, 4}) {
    auto estimate = [&](const std::string& passes) {
      return estimate_rank0("tests/dist/tp.trace", {{"T", "64"}, {"D", "32"}, {"H", "48"}, {"L", "8"}}, n, passes);
    };
    for (auto [before, after] : {std::pair{"tp,grad,del_last_used", "tp,grad,shard,del_last_used"},
                                 {"tp,grad,remat,fuse,del_last_used", "tp,grad,remat,fuse,shard,del_last_used"}}) {
      tracer::MemoryReport without = estimate(before);
      tracer::MemoryReport with = estimate(after);
      // What shard sliced: the replicated saved bytes it left replicated are not counted.
      const double sliced = static_cast<double>(without.saved_replicated_bytes - with.saved_replicated_bytes) * (n - 1) / n;
      INFO(n << " ranks, " << after << ": peak " << without.peak_bytes << " -> " << with.peak_bytes << ", replicated saved "
             << without.saved_replicated_bytes << " -> " << with.saved_replicated_bytes);
      CHECK(without.saved_replicated_bytes > 0);
      CHECK(with.saved_replicated_bytes < without.saved_replicated_bytes / 4);
      CHECK(with.saved_sharded_bytes * static_cast<size_t>(n) == without.saved_replicated_bytes - with.saved_replicated_bytes);
      CHECK(static_cast<double>(without.peak_bytes) - static_cast<double>(with.peak_bytes) >= 0.9 * sliced);
    }
  }
}

TEST_CASE("each rank's measured peak is the estimate's (tracer run --json on 2 ranks)", "[dist]") {
  // The estimate models what the ranks do: an asynchronous collective's input kept until its
  // wait, the copies a gather along another dimension than 0 makes (ir/memory.cpp).
  struct Case {
    const char* file;
    const char* sets;
    const char* passes;
  };
  for (const Case& c : {Case{"examples/llama_mlp_fsdp.trace", " --set T=64 --set L=3 --set D=128 --set H=352", "grad,fsdp,del_last_used"},
                        Case{"examples/llama_mlp_fsdp.trace", " --set T=64 --set L=3 --set D=128 --set H=352",
                             "grad,fsdp(zero=3, prefetch=1),remat,fuse,shard,del_last_used"},
                        Case{"tests/dist/tp.trace", " --set L=4 --set T=64 --set D=32 --set H=48", "tp,grad,remat,fuse,shard,del_last_used"},
                        Case{"tests/dist/tp.trace", " --set L=3 --set T=7 --set D=6", "tp,grad,shard(every=True),del_last_used"},
                        Case{"tests/dist/ddp.trace", "", "grad,ddp,del_last_used"}}) {
    std::string log;
    INFO(c.file << c.sets << " --passes " << c.passes);
    REQUIRE(run_tracer(std::string("launch --nproc 2 -- run ") + c.file + c.sets + " --passes '" + c.passes + "' --json", &log) == 0);
    INFO(log);
    std::smatch m;
    std::regex peak("\\[rank ([01])\\] +\"peak_bytes\": ([0-9]+)"), est("\\[rank ([01])\\] +\"estimated_peak_bytes\": ([0-9]+)");
    std::map<std::string, std::string> measured, estimated;
    for (auto it = std::sregex_iterator(log.begin(), log.end(), peak); it != std::sregex_iterator(); ++it) measured[(*it)[1]] = (*it)[2];
    for (auto it = std::sregex_iterator(log.begin(), log.end(), est); it != std::sregex_iterator(); ++it) estimated[(*it)[1]] = (*it)[2];
    REQUIRE(measured.size() == 2);
    CHECK(measured == estimated);
  }
}

TEST_CASE("printout 05's FSDP backward on 2 ranks, each with its own saved tensors: its gradients are float64's shards", "[dist][thunder]") {
  // backward_fn(saved_for_backward, cotangents) of the shared ZeRO-2 printout: the collections'
  // element types come from its augmented_forward_fn. Each rank gets its own activations and
  // cotangent and the same gathered weight; the reduce-scattered gradient of rank r is rows
  // [32r, 32r + 32) of the sum over ranks of that rank's gradient / 2 (the printout's averaging).
  const std::string file = tracer::test::thunder_dir() + "/05_fsdp_zero2_forward_and_backward.txt";
  const int64_t n = 64, world = 2;
  std::string in = tmp_dir("p05_in"), out = tmp_dir("p05_out");
  uint64_t state = 12345;
  auto uniform = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return double(state >> 11) / double(1ULL << 53) * 2 - 1;
  };
  auto fill = [&](tracer::rt::DType dt) {
    Tensor t = Tensor::empty(dt, {n, n});
    for (int64_t k = 0; k < t.numel(); ++k) t.set(k, dt == tracer::rt::DType::b8 ? (uniform() > 0 ? 1 : 0) : uniform());
    return t;
  };
  Tensor w2 = fill(tracer::rt::DType::f32);  // t10: the gathered weight, the same on both ranks
  std::vector<std::map<std::string, Tensor>> saved(world);
  for (int r = 0; r < world; ++r) {
    std::filesystem::create_directories(in + "/" + std::to_string(r));
    saved[r] = {{"input", fill(tracer::rt::DType::f32)}, {"t10", w2}, {"t7", fill(tracer::rt::DType::b8)},
                {"t8", fill(tracer::rt::DType::f32)}, {"t0", fill(tracer::rt::DType::f32)}};
    for (const auto& [name, t] : saved[r]) tracer::rt::write_npy(in + "/" + std::to_string(r) + "/" + name + ".npy", t);
  }
  std::string inputs;
  for (const char* name : {"input", "t10", "t7", "t8", "t0"})
    inputs += std::string(" --input ") + name + "=" + in + "/$RANK/" + name + ".npy";
  std::string log;
  int rc = run_tracer("launch --nproc 2 --exec -- sh -c '\"" + std::string(TRACER_CLI_PATH) + "\" run \"" + file +
                          "\" --entry backward_fn" + inputs + " --output " + out + "'", &log);
  INFO(log);
  REQUIRE(rc == 0);
  // The reference, in float64: gb1, gb2 [64], gW1, gW2 [64, 64].
  std::vector<double> gb1(n, 0), gb2(n, 0), gw1(n * n, 0), gw2(n * n, 0);
  for (int r = 0; r < world; ++r) {
    auto& s = saved[r];
    std::vector<double> h(n * n, 0);  // where(t7, t0 @ t10, 0): the cotangent of the first linear's output
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < n; ++k) acc += s["t0"].get(i * n + k) * s["t10"].get(k * n + j);
        h[i * n + j] = s["t7"].get(i * n + j) != 0 ? acc : 0;
      }
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        gb2[j] += s["t0"].get(i * n + j) / 2;
        gb1[j] += h[i * n + j] / 2;
        double a1 = 0, a2 = 0;  // gW1 = h^T @ input, gW2 = t0^T @ t8
        for (int64_t k = 0; k < n; ++k) {
          a1 += h[k * n + i] * s["input"].get(k * n + j);
          a2 += s["t0"].get(k * n + i) * s["t8"].get(k * n + j);
        }
        gw1[i * n + j] += a1 / 2;
        gw2[i * n + j] += a2 / 2;
      }
  }
  const int64_t rows = n / world;
  for (int r = 0; r < world; ++r) {
    struct Want {
      const char* name;
      const std::vector<double>* ref;
      int64_t cols;
    };
    for (const Want& w : {Want{"t56", &gb1, 1}, Want{"t53", &gb2, 1}, Want{"t50", &gw1, n}, Want{"t38", &gw2, n}}) {
      Tensor got = tracer::rt::read_npy(out + "/rank" + std::to_string(r) + "/" + w.name + ".npy");
      INFO("rank " << r << ", " << w.name);
      REQUIRE(got.numel() == rows * w.cols);
      double worst = 0, scale = 1;
      for (int64_t k = 0; k < got.numel(); ++k) {
        double ref = (*w.ref)[static_cast<size_t>(r * rows * w.cols + k)];
        scale = std::max(scale, std::fabs(ref));
        worst = std::max(worst, std::fabs(got.get(k) - ref));
      }
      CHECK(worst / scale < 1e-5);
    }
  }
  std::filesystem::remove_all(in);
  std::filesystem::remove_all(out);
}
