// Gloo communicators (runtime/comm.h) among forked CPU ranks over loopback: every collective on
// several dtypes against the value each rank computes alone, with 2 and 4 ranks; a rank that never
// starts; outputs of the wrong shape.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "runtime/comm.h"
#include "runtime/kernel_util.h"
#include "tests/runtime/store_process.h"

namespace tracer::test {
namespace {
using namespace rt::dist;
using rt::DType;
using rt::Tensor;
using std::chrono::milliseconds;

double value(int rank, int64_t i) { return static_cast<double>((rank + 1) * 3 + (i % 7) - 2); }  // small integers: exact in every dtype

template <class T>
void fill(Tensor& t, int rank) {
  T* p = t.data_as<T>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = rt::detail::convert<T>(value(rank, i));
}

template <class T>
double at(const Tensor& t, int64_t i) {
  return rt::detail::convert<double>(t.data_as<T>()[i]);
}

// One rank's whole check; returns the number of mismatches (printed to stderr).
int rank_main(int port, int rank, int world) {
  int bad = 0;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) {
      std::fprintf(stderr, "rank %d of %d: %s\n", rank, world, what.c_str());
      ++bad;
    }
  };
  auto store = StoreClient::connect("127.0.0.1", port, milliseconds(10000));
  JobEnv job;
  job.rank = rank;
  job.world_size = world;
  join(*store, job, milliseconds(10000));
  auto comm = open_gloo(*store, job, milliseconds(20000));
  expect(comm->rank() == rank && comm->size() == world, "rank and size");
  using rt::detail::BF16;
  using rt::detail::Half;
  // all_reduce: sum (f32, bf16), max (i64), min (f64), avg (f16).
  {
    Tensor a = Tensor::empty(DType::f32, {13, 3});
    fill<float>(a, rank);
    comm->all_reduce(a, ReduceOp::sum);
    for (int64_t i = 0; i < a.numel(); ++i) {
      double want = 0;
      for (int r = 0; r < world; ++r) want += value(r, i);
      expect(at<float>(a, i) == want, "all_reduce sum f32 at " + std::to_string(i));
    }
    Tensor b = Tensor::empty(DType::bf16, {1001});
    fill<BF16>(b, rank);
    comm->all_reduce(b, ReduceOp::sum);
    for (int64_t i = 0; i < b.numel(); ++i) {
      double want = 0;
      for (int r = 0; r < world; ++r) want += value(r, i);
      expect(at<BF16>(b, i) == want, "all_reduce sum bf16 at " + std::to_string(i));
    }
    Tensor c = Tensor::empty(DType::i64, {40});
    fill<int64_t>(c, rank);
    comm->all_reduce(c, ReduceOp::max);
    for (int64_t i = 0; i < c.numel(); ++i) expect(at<int64_t>(c, i) == value(world - 1, i), "all_reduce max i64");
    Tensor d = Tensor::empty(DType::f64, {9});
    fill<double>(d, rank);
    comm->all_reduce(d, ReduceOp::min);
    for (int64_t i = 0; i < d.numel(); ++i) expect(at<double>(d, i) == value(0, i), "all_reduce min f64");
    Tensor e = Tensor::empty(DType::f16, {17});
    fill<Half>(e, rank);
    comm->all_reduce(e, ReduceOp::avg);
    for (int64_t i = 0; i < e.numel(); ++i) {
      double want = 0;
      for (int r = 0; r < world; ++r) want += value(r, i);
      want /= world;
      expect(std::fabs(at<Half>(e, i) - want) <= 1e-3 * std::fabs(want) + 1e-3, "all_reduce avg f16");
    }
  }
  // all_gather (f16, [5, 2] each) and reduce_scatter (f32 [world * 3, 4]).
  {
    Tensor in = Tensor::empty(DType::f16, {5, 2}), out = Tensor::empty(DType::f16, {5 * world, 2});
    fill<Half>(in, rank);
    comm->all_gather(in, out);
    for (int r = 0; r < world; ++r)
      for (int64_t i = 0; i < 10; ++i) expect(at<Half>(out, r * 10 + i) == value(r, i), "all_gather f16");
    Tensor big = Tensor::empty(DType::f32, {3 * world, 4}), mine = Tensor::empty(DType::f32, {3, 4});
    fill<float>(big, rank);
    comm->reduce_scatter(big, mine, ReduceOp::sum);
    for (int64_t i = 0; i < 12; ++i) {
      double want = 0;
      for (int r = 0; r < world; ++r) want += value(r, rank * 12 + i);
      expect(at<float>(mine, i) == want, "reduce_scatter sum f32");
    }
    Tensor wrong = Tensor::empty(DType::f16, {5, 2});
    try {
      comm->all_gather(in, wrong);
      expect(false, "all_gather into a tensor of the wrong shape was accepted");
    } catch (const StoreError& e) {
      expect(std::string(e.what()).find("the output must be f16[" + std::to_string(5 * world) + ", 2]") != std::string::npos, e.what());
    }
  }
  // broadcast from the last rank (u8), then a barrier.
  {
    Tensor t = Tensor::empty(DType::u8, {33});
    fill<uint8_t>(t, rank);
    comm->broadcast(t, world - 1);
    for (int64_t i = 0; i < t.numel(); ++i) expect(at<uint8_t>(t, i) == value(world - 1, i), "broadcast u8");
    comm->barrier();
  }
  return bad;
}

// Forks world ranks; each runs body and exits with its result. Returns the exit codes.
template <class F>
std::vector<int> run_ranks(int world, F body) {
  std::vector<int> ranks;
  for (int r = 0; r < world; ++r) ranks.push_back(r);
  return wait_ranks(fork_ranks(ranks, body));
}

}  // namespace

TEST_CASE("Gloo: every collective among 2 and 4 CPU ranks equals what each rank computes alone", "[runtime][dist][gloo]") {
  setenv("TRACER_GLOO_PLUGIN", TRACER_GLOO_PLUGIN_PATH, 1);
  for (int world : {2, 4}) {
    INFO(world << " ranks");
    StoreProcess server;  // (this process forks the ranks: it runs no thread of its own)
    const int port = server.port();
    auto codes = run_ranks(world, [&](int r) { return rank_main(port, r, world); });
    for (int c : codes) CHECK(c == 0);
  }
}

TEST_CASE("Gloo: a rank that never starts stops the others within the timeout, with the reason", "[runtime][dist][gloo]") {
  setenv("TRACER_GLOO_PLUGIN", TRACER_GLOO_PLUGIN_PATH, 1);
  StoreProcess server;
  const int port = server.port();
  // World of 3 whose rank 2 never comes: ranks 0 and 1 skip the rendezvous's join (which would
  // report it first) to show that Gloo's own connection gives up too, naming what it waited for.
  auto t0 = std::chrono::steady_clock::now();
  auto codes = run_ranks(2, [&](int r) {
    auto store = StoreClient::connect("127.0.0.1", port, milliseconds(5000));
    JobEnv job;
    job.rank = r;
    job.world_size = 3;
    try {
      open_gloo(*store, job, milliseconds(500));
    } catch (const StoreError& e) {
      const std::string m = e.what();
      return !(m.find("could not connect") != std::string::npos && m.find("was not set") != std::string::npos);
    }
    return true;  // connected to a rank that does not exist: wrong
  });
  for (int c : codes) CHECK(c == 0);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
}

TEST_CASE("Gloo: no plugin is a clear error", "[runtime][dist][gloo]") {
  // In a child: the plugin is loaded once per process.
  auto codes = run_ranks(1, [&](int) {
    setenv("TRACER_GLOO_PLUGIN", "/nonexistent/libtracer_gloo.so", 1);
    auto server = StoreServer::start("127.0.0.1", 0);
    auto store = StoreClient::connect("127.0.0.1", server->port(), milliseconds(1000));
    try {
      open_gloo(*store, JobEnv{}, milliseconds(500));
    } catch (const StoreError& e) {
      return std::string(e.what()).find("Gloo: no plugin") == std::string::npos;
    }
    return true;
  });
  CHECK(codes == std::vector<int>{0});
}

}  // namespace tracer::test
