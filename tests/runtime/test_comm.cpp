// Gloo communicators (runtime/comm.h) among forked CPU ranks over loopback: every collective on
// several dtypes against the value each rank computes alone, with 2 and 4 ranks; a rank that never
// starts; outputs of the wrong shape; the asynchronous layer (make_async) over a fake.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

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

namespace tracer::test {
namespace {

// A communicator of one rank whose all_reduce adds 1 and blocks until released, and whose
// broadcast fails: to see what make_async does with order, overlap and errors.
class Gate : public rt::dist::Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_reduce(Tensor& t, ReduceOp) override {
    std::unique_lock<std::mutex> lock(m);
    entered = true;
    cv.notify_all();
    cv.wait(lock, [this] { return open; });
    t.data_as<float>()[0] += 1;
    order.push_back(static_cast<int>(t.data_as<float>()[0]));
  }
  void all_gather(const Tensor& in, Tensor& out) override { std::memcpy(out.data(), in.data(), in.nbytes()); }
  void reduce_scatter(const Tensor& in, Tensor& out, ReduceOp) override { std::memcpy(out.data(), in.data(), in.nbytes()); }
  void broadcast(Tensor&, int) override { throw StoreError("broadcast: the peer is gone"); }
  void barrier() override {}
  void release() {
    {
      std::lock_guard<std::mutex> lock(m);
      open = true;
    }
    cv.notify_all();
  }
  void wait_entered() {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [this] { return entered; });
  }
  std::mutex m;
  std::condition_variable cv;
  bool open = false, entered = false;
  std::vector<int> order;  // written by the worker only
};

// What make_async owns: a view of a Gate that outlives it.
class Ref : public rt::dist::Communicator {
 public:
  explicit Ref(Communicator& c) : c_(c) {}
  int rank() const override { return c_.rank(); }
  int size() const override { return c_.size(); }
  void all_reduce(Tensor& t, ReduceOp op) override { c_.all_reduce(t, op); }
  void all_gather(const Tensor& in, Tensor& out) override { c_.all_gather(in, out); }
  void reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) override { c_.reduce_scatter(in, out, op); }
  void broadcast(Tensor& t, int root) override { c_.broadcast(t, root); }
  void barrier() override { c_.barrier(); }

 private:
  Communicator& c_;
};

}  // namespace

TEST_CASE("make_async: submitted collectives run on the communicator's thread, in order, while the caller goes on", "[runtime][dist]") {
  Gate gate;
  Gate* g = &gate;
  std::unique_ptr<Communicator> comm = make_async(std::make_unique<Ref>(gate));
  std::vector<Tensor> ts;
  std::vector<Work> works;
  for (int i = 0; i < 3; ++i) {
    Tensor t = Tensor::empty(DType::f32, {1});
    t.data_as<float>()[0] = static_cast<float>(10 * i);
    ts.push_back(t);
    works.push_back(comm->submit([t](Communicator& c) mutable { c.all_reduce(t, ReduceOp::sum); }));
  }
  // Submitting returned while the first is still held: the caller was not blocked.
  CHECK_FALSE(works[0].done());
  CHECK_FALSE(works[2].done());
  CHECK_FALSE(ts[1].sole_owner());  // the queued collective holds its tensor
  g->release();
  works[2].wait();
  CHECK(works[0].done());
  CHECK(works[1].done());
  CHECK(g->order == std::vector<int>{1, 11, 21});
  // What a finished collective captured is released by the time its wait returns.
  CHECK(ts[1].sole_owner());
  // An error goes to its own Work, and the next collective still runs.
  Tensor b = Tensor::empty(DType::f32, {1});
  Work failed = comm->submit([b](Communicator& c) mutable { c.broadcast(b, 0); });
  Tensor after = Tensor::empty(DType::f32, {1});
  after.data_as<float>()[0] = 5;
  comm->all_reduce(after, ReduceOp::sum);  // a direct call keeps its place in the order
  CHECK(after.data_as<float>()[0] == 6);
  CHECK_THROWS_WITH(failed.wait(), Catch::Contains("the peer is gone"));
}

TEST_CASE("make_async: destroying it drops what has not started", "[runtime][dist]") {
  Gate gate;
  Gate* g = &gate;
  std::unique_ptr<Communicator> comm = make_async(std::make_unique<Ref>(gate));
  Tensor t = Tensor::empty(DType::f32, {1});
  t.data_as<float>()[0] = 0;
  Work first = comm->submit([t](Communicator& c) mutable { c.all_reduce(t, ReduceOp::sum); });
  Work second = comm->submit([t](Communicator& c) mutable { c.all_reduce(t, ReduceOp::sum); });
  g->wait_entered();  // the first is running, the second queued
  std::thread opener([g] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    g->release();
  });
  comm.reset();  // waits for the one running; the second is dropped
  opener.join();
  first.wait();
  CHECK(t.data_as<float>()[0] == 1);
  REQUIRE(second.done());
  CHECK_THROWS(second.wait());  // a broken promise
}

}  // namespace tracer::test
